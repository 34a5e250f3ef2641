"""The plots of a benchmark run's report (scripts/bench-report.py):
DIR/throughput.png, stream.png, stream-wakeups.png, latency.png and
servers.png, for the workloads the run measured.
"""
import os

from benchrun import VARIANTS, size_label


def plots(d, stat, ts, ss, ls, present, servers):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if len(present) == 1:
        note = f" (QEMU TCG, {present[0]} kernel only: no comparison)"
    else:
        note = " (QEMU TCG: compare ratios only)"

    def plot(fname, title, ylabel, sizes_, series):
        fig, ax = plt.subplots(figsize=(8, 5))
        for label, workload, system, variant, metric, style in series:
            if variant not in present:
                continue
            pts = [(s, stat(workload, system, s, variant, metric)) for s in sizes_]
            pts = [(s, st) for s, st in pts if st]
            ax.errorbar([s for s, _ in pts], [st.mean for _, st in pts],
                        yerr=[st.sd for _, st in pts], label=label, capsize=3, **style)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes_, [size_label(s) for s in sizes_])
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title + note)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(d, fname), dpi=100)
        plt.close(fig)

    color = {"vanilla": "tab:blue", "anchor": "tab:green", "patched": "tab:red"}

    def per_kernel(name, workload, system, metric, **style):
        """A line for each kernel, named "KERNEL NAME"."""
        return [(f"{v} {name}", workload, system, v, metric, dict(style, color=color[v]))
                for v in VARIANTS]
    if ts:
        plot("throughput.png", "iperf3 throughput", "Gbit/s", ts, [
            *per_kernel("sockmap", "iperf3", "sockmap", "gbit_s", marker="o"),
            *per_kernel("TCP", "iperf3", "tcp", "gbit_s", marker="s", linestyle="--"),
        ])
    if ss:
        plot("stream.png", "stream to a reader that keeps up", "Gbit/s", ss, [
            *per_kernel("sockmap", "stream", "sockmap", "gbit_s", marker="o"),
            *per_kernel("TCP", "stream", "tcp", "gbit_s", marker="s", linestyle="--"),
        ])
        plot("stream-wakeups.png", "stream: receiver wake-ups per MB", "wake-ups/MB", ss, [
            *per_kernel("sockmap", "stream", "sockmap", "wakeups_per_mb", marker="o"),
            *per_kernel("TCP", "stream", "tcp", "wakeups_per_mb", marker="s",
                        linestyle="--"),
        ])
    if ls:
        plot("latency.png", "ping-pong latency (RTT/2)", "us", ls, [
            *per_kernel("sockmap", "sockperf", "sockmap", "latency_us", marker="o"),
            *per_kernel("TCP", "sockperf", "tcp", "latency_us", marker="s", linestyle="--"),
            *per_kernel("UDS", "pingpong", "uds", "latency_us", marker="^", linestyle=":"),
        ])
    if not servers:
        return
    # Each kernel's sockmap rate over plain TCP's in the same boot.
    groups = servers
    fig, ax = plt.subplots(figsize=(max(8, len(groups) * 1.2), 5))
    width = 0.8 / len(present)
    for i, v in enumerate(present):
        sts = [stat(w, "sockmap", s, v, m) for _, w, s, m in groups]
        ax.bar([g + (i - (len(present) - 1) / 2) * width for g in range(len(groups))],
               [st.mean for st in sts], width, yerr=[st.sd for st in sts], capsize=3,
               label=v, color=color[v])
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], rotation=30, ha="right")
    ax.set_ylabel("sockmap requests/s over plain TCP's, same boot")
    ax.set_title("real servers: redis-benchmark, wrk + nginx" + note)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(d, "servers.png"), dpi=100)
    plt.close(fig)
