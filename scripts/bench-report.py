#!/usr/bin/python3
# (Debian's python: the one python3-matplotlib is installed for.)
"""Summarise a benchmark run: bench-report.py DIR

Reads DIR/raw/*.json (one per boot, from guest/bench.py) and writes
DIR/report.md (tables in the cover letter's shape: mean and standard
deviation over the repetitions, patched/vanilla ratio, and the issue's
targets, met or not) and DIR/throughput.png, DIR/latency.png. Prints the
report. Fails if a measurement is missing for any kernel.

If DIR also holds boots of the anchor (bench.sh --variants "vanilla anchor
patched"), every figure given as patched/vanilla is given as anchor/vanilla
and patched/anchor as well, and the targets, judged for patched, give the
anchor's measures beside. If DIR holds only one kernel's boots, the report
says so at the top and gives that kernel's numbers alone: no ratios between
the kernels, no targets. A measurement missing for that kernel still fails.
"""
import glob
import json
import math
import os
import statistics
import sys
from collections import defaultdict

# The kernels in the order the report lists them: the unpatched base, the
# anchor (the published earlier posting, for comparison), the series.
VARIANTS = ("vanilla", "anchor", "patched")
# The comparisons, each the second kernel over the first.
PAIRS = (("vanilla", "patched"), ("vanilla", "anchor"), ("anchor", "patched"))
# The published v4 numbers (bare metal, ../shared/DESIGN.md), for shape only.
ANCHOR_TPUT_RATIO = {64: 2.41, 128: 2.28, 256: 2.25, 512: 2.43, 1024: 2.48, 4096: 2.61,
                     16384: 2.07, 32768: 1.97, 65536: 1.05, 131072: 1.03, 262144: 1.06}
# The anchor's vanilla sockmap at 64 B and 64 KB, Gbit/s: the balance of its costs.
ANCHOR_VANILLA_GBIT = {64: 0.17, 65536: 43.07}
ANCHOR_LAT_CHANGE = {64: 6.6, 128: 6.9, 256: 6.7, 512: 3.7, 1024: 5.7, 4096: 5.0,
                     16384: 3.5, 32768: 1.5, 64512: -0.9}


def cost_balance(gbit):
    """From throughputs at 64 B and 64 KB ({size: Gbit/s}): the fixed cost of a
    message in us, the cost of a further byte in ns, and the size in KB at which
    a message's bytes cost as much as the rest of it."""
    us = {size: size * 8 / (g * 1e3) for size, g in gbit.items()}
    per_byte = (us[65536] - us[64]) / (65536 - 64)
    fixed = us[64] - 64 * per_byte
    return fixed, per_byte * 1e3, fixed / per_byte / 1024


def size_label(n):
    if n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)


def num(x):
    """Three significant digits, without exponents."""
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 0.001 else f"{x:.2g}"


class Stat:
    def __init__(self, values):
        self.values = values
        self.n = len(values)
        self.mean = statistics.fmean(values)
        self.sd = statistics.stdev(values) if self.n > 1 else 0.0

    def rel_sd(self):
        return self.sd / self.mean if self.mean else 0.0

    def fmt(self):
        m = num(self.mean)
        if self.n < 2:
            return m
        sd = f"{self.sd:.0f}" if self.sd >= 10 else f"{self.sd:.2g}"
        return f"{m} ±{sd}"


def ratio(a, b):
    """b/a with its relative standard deviation (first order)."""
    r = b.mean / a.mean if a.mean else math.nan
    return r, r * math.hypot(a.rel_sd(), b.rel_sd())


def fmt_ratio(a, b):
    r, sd = ratio(a, b)
    return f"{r:.2f}" if a.n < 2 else f"{r:.2f} ±{sd:.2f}"


# Student's t for a two-sided 95% interval, by degrees of freedom (1 to 30;
# beyond, 30's).
T95 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14,
       2.13, 2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05,
       2.05, 2.04)


def paired(a, b):
    """b/a paired by round, from {repetition: value} of each kernel: the
    boots of one round ran one after the other, so each round's ratio leaves
    out most of the host's drift. The geometric mean of those ratios and its
    95% confidence interval, as "r [lo, hi]"; None under two rounds."""
    logs = [math.log(b[r] / a[r]) for r in sorted(a.keys() & b.keys()) if a[r] > 0 < b[r]]
    if len(logs) < 2:
        return None
    m = statistics.fmean(logs)
    half = T95[min(len(logs) - 1, len(T95)) - 1] * statistics.stdev(logs) / math.sqrt(len(logs))
    return f"{math.exp(m):.2f} [{math.exp(m - half):.2f}, {math.exp(m + half):.2f}]"


def fmt_change(a, b):
    r, sd = ratio(a, b)
    return f"{(r - 1) * 100:+.1f}%" if a.n < 2 else f"{(r - 1) * 100:+.1f}% ±{sd * 100:.1f}"


# The real servers' workloads (guest/bench.py) and their rates, which the
# report also divides by plain TCP's in the same boot.
SERVER_RATES = {"redis -P1": ("set_rps", "get_rps"), "redis -P16": ("set_rps", "get_rps"),
                "wrk": ("rps",)}


def load(d, sub="raw"):
    """The boots in DIR/SUB/*.json: raw/ must have some, icount/ may not."""
    files = sorted(glob.glob(os.path.join(d, sub, "*.json")))
    if not files and sub == "raw":
        sys.exit(f"bench-report: no raw/*.json in {d}")
    docs = [json.load(open(f)) for f in files]
    data = defaultdict(list)  # (workload, system, size, variant, metric) -> values
    rounds = defaultdict(dict)  # the same -> {repetition: value}
    for doc in docs:
        uds, tcp, servers = {}, {}, {}
        for r in doc["records"]:
            if "refused" in r:
                data[(r["workload"], r["system"], r["size"], doc["variant"], "refused")].append(
                    r["refused"])
                continue
            for k, v in r.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    data[(r["workload"], r["system"], r["size"], doc["variant"], k)].append(v)
                    rounds[(r["workload"], r["system"], r["size"], doc["variant"], k)][
                        doc["rep"]] = v
            if (r["workload"], r["system"]) == ("pingpong", "uds"):
                uds[r["size"]] = r["latency_us"]
            if r["workload"] in ("iperf3", "stream") and r["system"] == "tcp":
                tcp[(r["workload"], r["size"])] = r["gbit_s"]
            if r["workload"] in SERVER_RATES and r["system"] == "tcp":
                servers[(r["workload"], r["size"])] = r
        # Each boot's sockmap latency over its Unix socket latency, measured
        # right after it: the series does not touch Unix sockets, so this
        # takes out how fast the host ran the guest at the time.
        # Likewise each boot's sockmap throughput over its plain TCP
        # throughput, measured right after it.
        for r in doc["records"]:
            if (r["workload"], r["system"]) == ("sockperf", "sockmap") and r["size"] in uds:
                data[("sockperf", "sockmap", r["size"], doc["variant"], "per_uds")].append(
                    r["latency_us"] / uds[r["size"]])
            if (r["system"] == "sockmap" and "gbit_s" in r
                    and tcp.get((r["workload"], r["size"]))):
                data[(r["workload"], "sockmap", r["size"], doc["variant"], "per_tcp")].append(
                    r["gbit_s"] / tcp[(r["workload"], r["size"])])
            plain = servers.get((r["workload"], r["size"]))
            if plain and r["system"] == "sockmap":
                for m in SERVER_RATES[r["workload"]]:
                    if r.get(m) and plain.get(m):
                        data[(r["workload"], "sockmap", r["size"], doc["variant"],
                              m + "_per_tcp")].append(r[m] / plain[m])
    return docs, data, rounds


def main():
    d = sys.argv[1]
    docs, data, rounds = load(d)
    icdocs, icdata, _ = load(d, "icount")
    missing = []
    # The workloads this run measured (bench.sh --only: not all of them).
    ran = {k[0] for k in data} | {k[0] for k in icdata}

    def stat_of(data, what=""):
        def stat(workload, system, size, variant, metric):
            v = data.get((workload, system, size, variant, metric))
            if not v:
                if workload in ran and not stat.refused(workload, system, size, variant):
                    missing.append(f"{what}{workload} {system} {size} {variant} {metric}")
                return None
            return Stat(v)
        # How many boots' kernel refused this measurement's writes (vanilla,
        # the anchor).
        stat.refused = lambda workload, system, size, variant: len(
            data.get((workload, system, size, variant, "refused"), ()))
        return stat
    stat = stat_of(data)
    istat = stat_of(icdata, "icount: ")

    def sizes(workload):
        return sorted({k[2] for k in data if k[0] == workload})

    out = []
    w = out.append
    first = docs[0]
    g = first["guest"]
    reps = {v: sorted(doc["rep"] for doc in docs if doc["variant"] == v) for v in VARIANTS}
    kernels = {doc["variant"]: doc for doc in docs}
    # The kernels this run measured; with one, nothing is compared.
    present = [v for v in VARIANTS if v in kernels]
    only = present[0] if len(present) == 1 else None
    # The comparisons it can make.
    pairs = [(a, b) for a, b in PAIRS if a in kernels and b in kernels]

    def versus(a, b):
        """What tells the comparison of b with a from the others in a row's
        or column's name: nothing if it is the run's only one."""
        return "" if len(pairs) == 1 else f" {b}/{a}"
    w(f"# sk_msg ingress corking benchmark ({first['mode']} mode)\n")
    if only:
        k = kernels[only]
        w(f"**No comparison: this run measured only the {only} kernel** (config "
          f"`{k['config']}`). The tables give its numbers alone, with no ratios between "
          "the kernels, and the issue's targets, which compare them, are not judged.\n")
    w("**QEMU TCG, no KVM**: a software-emulated x86-64 guest with "
      f"{g['cpus']} vCPUs on {first['host_cpus']} shared host cores. Absolute numbers "
      "are far below bare metal and are not comparable to the published anchor; only "
      "the ratios between kernels measured in the same run carry over, and even those "
      "only roughly.\n")
    if only:
        n = len(reps[only])
        w(f"- {n} boot{'s' if n != 1 else ''} of {only}; "
          "every cell is the mean ± standard deviation over those boots.")
    else:
        group = "pair" if len(present) == 2 else "round"
        w(f"- Kernels booted alternately, every other {group} in reverse order "
          f"({', '.join(present + present[::-1])}, ...): "
          + ", ".join(f"{len(reps[v])} {'boots ' if v == present[0] else ''}of {v}"
                      for v in present)
          + "; every cell is the mean ± standard deviation over those boots, except "
          "in the rows \"paired by round\": there, each round's ratio (its boots ran one "
          "after the other), their geometric mean and its 95% confidence interval.")
    for v in VARIANTS:
        if v in kernels:
            k = kernels[v]
            w(f"- {v}: `{k['guest']['kernel_release']}`, tree {k['kernel_tree_commit'][:12]}"
              f" (base {k['kernel_tree_base'][:12]}), series: "
              + ("; ".join(k["series"]) if k["series"] else "none")
              + f"; config `{k['config']}` sha256 {k['config_sha256'][:12]}")
    copy = g.get("copy_flags")
    copy = ("" if copy is None else
            "; guest CPU without ERMS or FSRM: the kernel copies with rep movsq" if not copy
            else f"; guest CPU with {' and '.join(f.upper() for f in copy)}: the kernel "
            "copies with rep movsb")
    w(f"- HZ={g['hz']}, clocksource {g['clocksource']}, {g['cpu_model']}{copy}; sender on vCPU "
      f"{g['sender_cpu']}, receiver on vCPU {g['receiver_cpu']}"
      + ("; each vCPU's thread pinned to the host CPU of its number"
         if first.get("vcpus_pinned") else "; vCPU threads not pinned on the host"))
    w(f"- Tools: " + ", ".join(f"{p} {v}" for p, v in sorted(g["tools"].items()))
      + f"; {first['qemu']}; workbench {first['workbench_commit']}")
    w(f"- Guest time per boot: " + ", ".join(
        f"{doc['variant']} {doc['rep']}: {doc['elapsed_s']:.0f}s" for doc in docs))
    refusals = [(doc, r) for doc in docs + icdocs for r in doc["records"] if "refused" in r]
    if refusals:
        kept = ("vanilla and the anchor, those kernels' own" if "anchor" in kernels
                else "vanilla, the unpatched kernel's own")
        w(f"- **Measurements the kernel failed**: a write refused, or a stream that stalled "
          f"(kept for {kept} behaviour; on patched they fail the run), shown as "
          "\"refused\" below: " + "; ".join(
              f"{doc['variant']} {doc['mode']} boot {doc['rep']}: {r['workload']} "
              f"{r['system']} {size_label(r['size'])}: {r['refused']}" for doc, r in refusals))
    lost = [(doc, r) for doc in docs + icdocs for r in doc["records"] if "data_lost" in r]
    if lost:
        w("- **Data lost** (kept for vanilla and the anchor as those kernels' own behaviour, "
          "with the rest of the measurement; on patched it fails the run): " + "; ".join(
              f"{doc['variant']} {doc['mode']} boot {doc['rep']}: {r['workload']} "
              f"{r['system']} {size_label(r['size'])}: {r['data_lost']}" for doc, r in lost))
    early = [doc for doc in docs + icdocs if doc.get("early_death")]
    if early:
        w("- Booted again after dying before init started (no measurement lost or "
          "chosen; scripts/bench.sh): " + "; ".join(
              f"{doc['variant']} {doc['mode']} boot {doc['rep']}: "
              + (doc["early_death"][0] if doc["early_death"] else "no kernel message")
              for doc in early))
    splats = [doc for doc in docs + icdocs if doc.get("kernel_splat")]
    if splats:
        allowed = ("vanilla and the anchor: their" if "anchor" in kernels
                   else "vanilla only: its")
        w(f"- **Kernel splats** (allowed for {allowed} own bugs; one on patched "
          "fails the run): " + "; ".join(
              f"{doc['variant']} {doc['mode']} boot {doc['rep']}: "
              + next((line.strip(">> ") for line in doc["kernel_splat"]
                      if line.startswith(">>")), doc["kernel_splat"][0])
              for doc in splats))
    w("")

    def table(title, workload, sizes_, rows):
        # Only the rows whose kernels this run measured.
        if not sizes_:
            return  # a workload this run did not measure
        rows = [(name, cell) for name, cell in rows
                if set(getattr(cell, "needs", ())) <= set(present)]
        w(f"## {title}\n")
        w("| size | " + " | ".join(size_label(s) for s in sizes_) + " |")
        w("|---|" + "---|" * len(sizes_))
        for name, cell in rows:
            w(f"| {name} | " + " | ".join(cell(s) for s in sizes_) + " |")
        w("")

    def cell_stat(workload, system, variant, metric, stat=stat):
        def f(s):
            st = stat(workload, system, s, variant, metric)
            n = stat.refused(workload, system, s, variant)
            if not st:
                return "refused" if n else "missing"
            return st.fmt() + (f" ({n} refused)" if n else "")
        f.needs = (variant,)
        return f

    def cell_cmp(workload, sys_a, var_a, sys_b, var_b, metric, fmt=fmt_ratio, stat=stat):
        def f(s):
            a = stat(workload, sys_a, s, var_a, metric)
            b = stat(workload, sys_b, s, var_b, metric)
            if a and b:
                return fmt(a, b)
            return ("refused" if stat.refused(workload, sys_a, s, var_a)
                    or stat.refused(workload, sys_b, s, var_b) else "missing")
        f.needs = (var_a, var_b)
        return f

    def per_kernel(name, workload, system, metric, stat=stat):
        """A cell_stat row for each kernel, named NAME with {v} the kernel."""
        return [(name.format(v=v), cell_stat(workload, system, v, metric, stat))
                for v in VARIANTS]

    def per_pair(name, workload, system, metric, fmt=fmt_ratio, stat=stat):
        """A cell_cmp row for each comparison, named NAME with {a} and {b} the
        kernels and {vs} what tells the comparison apart (versus())."""
        return [(name.format(a=a, b=b, vs=versus(a, b)),
                 cell_cmp(workload, system, a, system, b, metric, fmt, stat))
                for a, b in PAIRS]

    def per_pair_rounds(name, workload, system, metric):
        """For each comparison, the ratio paired by round (paired())."""
        def row(a, b):
            def f(s):
                return paired(rounds.get((workload, system, s, a, metric), {}),
                              rounds.get((workload, system, s, b, metric), {})) or ""
            f.needs = (a, b)
            return name.format(a=a, b=b, vs=versus(a, b)), f
        return [row(a, b) for a, b in PAIRS]

    def published(f):
        """The anchor's published vanilla-to-patched change: shown next to ours only."""
        f.needs = ("vanilla", "patched")
        return f

    ts = sizes("iperf3")
    table("Throughput: iperf3 -l SIZE, Gbit/s", "iperf3", ts, [
        *per_kernel("{v} sockmap", "iperf3", "sockmap", "gbit_s"),
        *per_pair("ratio {b}/{a}", "iperf3", "sockmap", "gbit_s"),
        *per_pair_rounds("ratio {b}/{a}, paired by round", "iperf3", "sockmap", "gbit_s"),
        ("(anchor ratio, bare metal)", published(lambda s: f"{ANCHOR_TPUT_RATIO[s]:.2f}"
         if s in ANCHOR_TPUT_RATIO else "")),
        *per_kernel("{v} TCP", "iperf3", "tcp", "gbit_s"),
        ("patched sockmap / patched TCP", cell_cmp("iperf3", "tcp", "patched", "sockmap",
                                                   "patched", "gbit_s")),
        *per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "iperf3", "sockmap", "per_tcp"),
    ])
    if pairs and ts:
        two = len(present) == 2
        w("Plain TCP is the control: the series does not change it, and it counts the same "
          f"instructions on {'both' if two else 'all'} kernels (below), yet its timed "
          f"throughput differs between the {'two ' if two else ''}kernels' boots (the rows "
          "above: the host, and how fast TCG runs each kernel image). The last "
          f"{'row divides' if two else 'rows divide'} each boot's sockmap throughput by its "
          "TCP throughput, measured right after it at the same size, before comparing the "
          f"kernels: that takes out what the host and the kernel image do to "
          f"{'both' if two else 'all'} alike.\n")
    vanilla = {size: data.get(("iperf3", "sockmap", size, "vanilla", "gbit_s"))
               for size in ANCHOR_VANILLA_GBIT}
    if all(vanilla.values()):
        ours = cost_balance({size: statistics.fmean(v) for size, v in vanilla.items()})
        theirs = cost_balance(ANCHOR_VANILLA_GBIT)
        w("Vanilla sockmap's costs, from its means at 64 B and 64 KB: {:.3g} us a message "
          "and {:.3g} ns a byte, so a message's bytes cost as much as the rest of it at "
          "{:.0f} KB. The anchor's vanilla row gives {:.3g} us, {:.3g} ns and {:.0f} KB. "
          "Where the two costs meet decides at which size batching messages stops paying, "
          "so it is what the emulation must get right for the ratios to compare.\n"
          .format(*ours, *theirs))
    table("Receiver wake-ups per MB and CPU seconds per GB (iperf3)", "iperf3", ts, [
        *per_kernel("{v} wake-ups/MB", "iperf3", "sockmap", "wakeups_per_mb"),
        *per_pair("ratio {b}/{a}", "iperf3", "sockmap", "wakeups_per_mb"),
        ("TCP wake-ups/MB (patched)", cell_stat("iperf3", "tcp", "patched", "wakeups_per_mb")),
        *per_kernel("{v} CPU s/GB", "iperf3", "sockmap", "cpu_s_per_gb"),
        *per_pair("ratio {b}/{a}", "iperf3", "sockmap", "cpu_s_per_gb"),
        ("TCP CPU s/GB (patched)", cell_stat("iperf3", "tcp", "patched", "cpu_s_per_gb")),
    ])
    ss = sizes("stream")
    # The writer's sleeps: not in runs from before they were counted.
    writer = any(k[4] == "sender_wakeups_per_mb" for k in data)
    reads = any(k[4] == "reads_per_mb" for k in data)
    cpus = any(k[4] == "sender_cpu_busy" for k in data)
    if ss:
        table("Stream to a reader that keeps up: SIZE-byte blocking writes, blocking 64 KiB "
              "reads, every byte checked (bench/pingpong stream), Gbit/s, receiver "
              "wake-ups per MB" + (", writer sleeps per MB (its voluntary context "
                                   "switches: for room to write, or on a lock)"
                                   if writer else "")
              + (", the reader's read() calls per MB (15.3 per MB when every read is full)"
                 if reads else "")
              + (", and how busy the writer's and the reader's CPUs were (the share of the "
                 "run, whatever ran there: the side near 1 sets the pace)" if cpus else ""),
              "stream", ss, [
                  *per_kernel("{v} sockmap", "stream", "sockmap", "gbit_s"),
                  *per_pair("ratio {b}/{a}", "stream", "sockmap", "gbit_s"),
                  *per_pair_rounds("ratio {b}/{a}, paired by round", "stream", "sockmap",
                                   "gbit_s"),
                  *per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "stream",
                            "sockmap", "per_tcp"),
                  *per_kernel("{v} TCP", "stream", "tcp", "gbit_s"),
                  *per_kernel("{v} wake-ups/MB", "stream", "sockmap", "wakeups_per_mb"),
                  *per_pair("wake-ups ratio {b}/{a}", "stream", "sockmap", "wakeups_per_mb"),
                  ("TCP wake-ups/MB (patched)",
                   cell_stat("stream", "tcp", "patched", "wakeups_per_mb")),
                  *(per_kernel("{v} writer sleeps/MB", "stream", "sockmap",
                               "sender_wakeups_per_mb") if writer else ()),
                  *(per_kernel("{v} reads/MB", "stream", "sockmap", "reads_per_mb")
                    if reads else ()),
                  *per_kernel("{v} CPU s/GB", "stream", "sockmap", "cpu_s_per_gb"),
                  *(per_kernel("{v} writer's CPU busy", "stream", "sockmap", "sender_cpu_busy")
                    if cpus else ()),
                  *(per_kernel("{v} reader's CPU busy", "stream", "sockmap",
                               "receiver_cpu_busy") if cpus else ()),
              ])
    ls = sizes("sockperf")
    table("Latency: sockperf ping-pong --tcp, average one-way us (RTT/2)", "sockperf", ls, [
        *per_kernel("{v} sockmap", "sockperf", "sockmap", "latency_us"),
        *per_pair("change{vs}", "sockperf", "sockmap", "latency_us", fmt_change),
        ("(anchor change, bare metal)", published(lambda s: f"{ANCHOR_LAT_CHANGE[s]:+.1f}%"
         if s in ANCHOR_LAT_CHANGE else "")),
        *per_kernel("{v} sockmap / UDS, same boot", "sockperf", "sockmap", "per_uds"),
        *per_pair("change relative to UDS{vs}", "sockperf", "sockmap", "per_uds", fmt_change),
        *per_kernel("{v} sockmap p99", "sockperf", "sockmap", "p99_us"),
        *per_kernel("{v} TCP", "sockperf", "tcp", "latency_us"),
        *per_kernel("{v} UDS (pingpong)", "pingpong", "uds", "latency_us"),
    ])
    bs = sizes("bench")
    table("Selftests bench sockmap --tx-verdict-ingress (sendfile 128 KiB), receive MB/s",
          "bench", bs, [
              *per_kernel("{v}", "bench", "bench-sockmap", "rcv_mb_s"),
              *per_pair("ratio{vs}", "bench", "bench-sockmap", "rcv_mb_s"),
          ])
    for pipeline in (1, 16):
        workload = f"redis -P{pipeline}"
        if not sizes(workload):
            continue
        table(f"Real server: redis-benchmark -P {pipeline} "
              f"({first['plan'].get('redis_clients', 4)} clients, SET and GET of one "
              "key, value SIZE), requests/s", workload, sizes(workload), [
                  *[row for op in ("set", "get") for row in (
                      *per_kernel(f"{{v}} sockmap {op.upper()}", workload, "sockmap",
                                  f"{op}_rps"),
                      *per_pair(f"{op.upper()} ratio {{b}}/{{a}}", workload, "sockmap",
                                f"{op}_rps"),
                      *per_pair_rounds(f"{op.upper()} ratio {{b}}/{{a}}, paired by round",
                                       workload, "sockmap", f"{op}_rps"),
                      *per_pair(f"{op.upper()} ratio of sockmap / TCP, same boot, {{b}}/{{a}}",
                                workload, "sockmap", f"{op}_rps_per_tcp"),
                  )],
                  *per_kernel("{v} TCP GET", workload, "tcp", "get_rps"),
                  *per_kernel("{v} sockmap GET p50 ms", workload, "sockmap", "get_p50_ms"),
                  *per_kernel("{v} sockmap GET p99 ms", workload, "sockmap", "get_p99_ms"),
              ])
    if sizes("wrk"):
        table("Real server: wrk against nginx (1 thread, 4 connections, a SIZE page, "
              "sendfile on), requests/s", "wrk", sizes("wrk"), [
                  *per_kernel("{v} sockmap", "wrk", "sockmap", "rps"),
                  *per_pair("ratio {b}/{a}", "wrk", "sockmap", "rps"),
                  *per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "wrk", "sockmap",
                            "rps_per_tcp"),
                  *per_kernel("{v} TCP", "wrk", "tcp", "rps"),
                  *per_kernel("{v} sockmap p50 ms", "wrk", "sockmap", "p50_ms"),
                  *per_kernel("{v} sockmap p99 ms", "wrk", "sockmap", "p99_ms"),
              ])
    flows = first["plan"]["flows"] if "manyflow" in ran else 0
    if flows:
        w(f"## Many flows: {flows} TCP connections, 64-byte request/response, transactions/s\n")
        w("| system | " + " | ".join(present + [f"change{versus(a, b)}" for a, b in pairs])
          + " |")
        w("|---|" + "---|" * (len(present) + len(pairs)))
        for system, name in (("nobpf", "no BPF loaded"),
                             ("pass", "in a sockhash, sk_msg passes (no redirect)")):
            st = {v: stat("manyflow", system, 64, v, "tps") for v in present}
            if all(st.values()):
                w(f"| {name} | " + " | ".join([st[v].fmt() for v in present]
                                              + [fmt_change(st[a], st[b]) for a, b in pairs])
                  + " |")
        w("")

    if icdocs:
        w("## Instruction-counted: one boot per kernel under QEMU -icount\n")
        w("Guest time advances 1 ns per instruction that either vCPU executes (one "
          "host thread runs them in turn; idle time is skipped), so a timing is the "
          "work done: the latency below is the instructions of both ends per round "
          "trip, halved, and the throughput the bytes moved per 10^9 instructions. "
          "The same kernel gives the same figures on every boot, whatever the host "
          "does, so these show small differences the boots above cannot; they do "
          "not show what two CPUs running at once gain or lose (one second per "
          "measurement; kernels: " + ", ".join(
              f"{doc['variant']} tree {doc['kernel_tree_commit'][:12]}"
              for doc in sorted(icdocs, key=lambda doc: VARIANTS.index(doc["variant"])))
          + ").\n")
        table("Instruction-counted latency: sockperf ping-pong --tcp, RTT/2 in us "
              "(10^3 instructions)", "sockperf", ls, [
                  *per_kernel("{v} sockmap", "sockperf", "sockmap", "latency_us", istat),
                  *per_pair("change{vs}", "sockperf", "sockmap", "latency_us", fmt_change,
                            istat),
                  *per_kernel("{v} TCP", "sockperf", "tcp", "latency_us", istat),
                  *per_kernel("{v} UDS (pingpong)", "pingpong", "uds", "latency_us", istat),
              ])
        table("Instruction-counted throughput: iperf3 -l SIZE, Gbit/s (bits per 10^9 "
              "instructions)", "iperf3", ts, [
                  *per_kernel("{v} sockmap", "iperf3", "sockmap", "gbit_s", istat),
                  *per_pair("ratio {b}/{a}", "iperf3", "sockmap", "gbit_s", stat=istat),
                  *per_kernel("{v} TCP", "iperf3", "tcp", "gbit_s", istat),
                  ("patched sockmap / patched TCP", cell_cmp("iperf3", "tcp", "patched",
                                                             "sockmap", "patched", "gbit_s",
                                                             stat=istat)),
              ])

        ic = icdocs[0]["plan"].get("redis_clients", 4)
        ic = f"{ic} client{'s' if ic > 1 else ''}"
        iss = sorted({k[2] for k in icdata if k[0] == "stream"})
        if iss:
            table("Instruction-counted stream to a reader that keeps up (bench/pingpong "
                  "stream), Gbit/s (bits per 10^9 instructions) and receiver wake-ups per MB",
                  "stream", iss, [
                      *per_kernel("{v} sockmap", "stream", "sockmap", "gbit_s", istat),
                      *per_pair("ratio {b}/{a}", "stream", "sockmap", "gbit_s", stat=istat),
                      *per_kernel("{v} TCP", "stream", "tcp", "gbit_s", istat),
                      *per_kernel("{v} wake-ups/MB", "stream", "sockmap", "wakeups_per_mb",
                                  istat),
                      *per_kernel("{v} writer sleeps/MB", "stream", "sockmap",
                                  "sender_wakeups_per_mb", istat),
                  ])
            w("Under -icount one vCPU takes the other's wake-up only when that one halts "
              "or its turn ends at a timer, so the reader runs in turns and its wake-ups "
              "count them: about one a tick, or one per send buffer where a writer with a "
              "bound fills it within a tick and waits (its sleeps per MB then equal the "
              "reader's wake-ups). The timed boots show what the kernels do with both "
              "CPUs running (see docs/benchmark.md).\n")
        for workload, metric, what in (
                ("redis -P1", "set_rps", f"redis-benchmark -P 1 SET ({ic})"),
                ("redis -P1", "get_rps", f"redis-benchmark -P 1 GET ({ic})"),
                ("redis -P16", "get_rps", f"redis-benchmark -P 16 GET ({ic})"),
                ("wrk", "rps", "wrk against nginx")):
            isizes = sorted({k[2] for k in icdata if k[0] == workload})
            if isizes:
                table(f"Instruction-counted: {what}, requests per 10^9 instructions",
                      workload, isizes, [
                          *per_kernel("{v} sockmap", workload, "sockmap", metric, istat),
                          *per_pair("ratio {b}/{a}", workload, "sockmap", metric, stat=istat),
                          *per_kernel("{v} TCP", workload, "tcp", metric, istat),
                      ])

        if any(k[0] == "syscall" for k in icdata):
            w("## Instruction-counted system calls: pingpong solo, 64 B\n")
            count = istat("syscall", "sockmap", 64, present[0], "count")
            w("One thread holds both ends of a connection to itself: a send() on one end, "
              "a recv(MSG_DONTWAIT) at the other, both ways, "
              f"{count.mean if count else 0:,.0f} times. Nobody waits or "
              "is woken up: the instructions of each call on the path (mean of both "
              "directions).\n")
            w("| call | " + " | ".join(present + [f"change{versus(a, b)}" for a, b in pairs])
              + " |")
            w("|---|" + "---|" * (len(present) + len(pairs)))
            for system, name in (("sockmap", "sockmap"), ("tcp", "TCP")):
                for metric in ("send_ns", "recv_ns"):
                    st = {v: istat("syscall", system, 64, v, metric) for v in present}
                    if not all(st.values()):
                        continue
                    w(f"| {name} {metric[:4]}() | " + " | ".join(
                        [f"{st[v].mean:.0f}" for v in present]
                        + [f"{st[b].mean - st[a].mean:+.0f} ({fmt_change(st[a], st[b])})"
                           for a, b in pairs]) + " |")
            w("")

    # The targets, judged on the means; a miss is reported, not hidden.
    # They compare patched with vanilla: a run without both has none. The
    # anchor's same measures, against the same vanilla, stand beside them.
    if not {"iperf3", "sockperf", "manyflow"} & ran:
        w("## Targets\n")
        w(f"Not judged: they are about iperf3, sockperf and many flows, and this run "
          f"measured {', '.join(sorted(ran))} alone.")
    elif not {"vanilla", "patched"} <= set(kernels):
        w("## Targets\n")
        w(f"Not judged: they are about patched against vanilla, and this run measured "
          f"{' and '.join(present)} alone.")
    else:
        judged = [v for v in ("patched", "anchor") if v in kernels]
        w("## Targets (patched vs vanilla, this run"
          + "".join(f"; {v} vs vanilla beside" for v in judged[1:]) + ")\n")
        w("| target | measured | met |" + "".join(f" {v} | {v} met |" for v in judged[1:]))
        w("|---|" + "---|---|" * len(judged))

        def target(name, measure):
            """A row, unless MEASURE(v), kernel v's measure as (text, met) or
            None, has none for any kernel judged."""
            cells = [measure(v) for v in judged]
            if any(cells):
                w(f"| {name} | " + " | ".join(
                    f"{c[0]} | {'yes' if c[1] else '**no**'}" if c else "missing | "
                    for c in cells) + " |")

        def tput_ratio(v, s):
            a = stat("iperf3", "sockmap", s, "vanilla", "gbit_s")
            b = stat("iperf3", "sockmap", s, v, "gbit_s")
            return ratio(a, b)[0] if a and b else math.nan
        for lo, hi, want in ((64, 4096, 2.6), (16384, 32768, 2.1), (65536, 1 << 30, 1.0)):
            sel = [s for s in ts if lo <= s <= hi]
            if sel:
                def throughput(v):
                    rs = [tput_ratio(v, s) for s in sel]
                    return (", ".join(f"{size_label(s)}: {r:.2f}x" for s, r in zip(sel, rs)),
                            all(r >= want for r in rs))
                target(f"throughput >= {want}x at {size_label(sel[0])}-{size_label(sel[-1])}",
                       throughput)
        for st, metric, how in ((stat, "latency_us", ""),
                                (stat, "per_uds", ", relative to UDS in the same boot"),
                                (istat, "latency_us", ", instruction-counted")):
            def latency(v):
                changes = []
                for s in ls if st is stat or icdocs else ():
                    a = st("sockperf", "sockmap", s, "vanilla", metric)
                    b = st("sockperf", "sockmap", s, v, metric)
                    if a and b:
                        changes.append((s, (ratio(a, b)[0] - 1) * 100))
                if changes:
                    return (", ".join(f"{size_label(s)}: {c:+.1f}%" for s, c in changes),
                            all(c <= 1.0 for _, c in changes))
            target(f"latency <= +1% at every size{how}", latency)

        def vs_tcp(v):
            rs = []
            for s in ts:
                a = stat("iperf3", "tcp", s, v, "gbit_s")
                b = stat("iperf3", "sockmap", s, v, "gbit_s")
                if a and b:
                    rs.append((s, ratio(a, b)[0]))
            if rs:
                return (", ".join(f"{size_label(s)}: {r:.2f}x" for s, r in rs),
                        all(r >= 1.0 for _, r in rs))
        target("patched sockmap >= plain TCP throughput at every size", vs_tcp)

        def wakeups(v):
            a = stat("iperf3", "sockmap", 64, "vanilla", "wakeups_per_mb")
            b = stat("iperf3", "sockmap", 64, v, "wakeups_per_mb")
            if a and b and b.mean:
                f = a.mean / b.mean
                return f"{f:.2f}x fewer", f >= 4
        if 64 in ts:
            target("receiver wake-ups/MB at 64 B at least 4x fewer", wakeups)
        for system in ("nobpf", "pass") if flows else ():
            def cost(v):
                a = stat("manyflow", system, 64, "vanilla", "tps")
                b = stat("manyflow", system, 64, v, "tps")
                if a and b:
                    r, sd = ratio(a, b)
                    # "No measurable cost": not below vanilla by more than the noise.
                    return (f"{(r - 1) * 100:+.1f}% (noise ±{sd * 100:.1f}%)",
                            r >= 1 - max(sd, 0.01))
            target(f"many-flow ({system}): no measurable cost", cost)
    w("")
    # The real servers' plot: one group of bars per measure that every
    # kernel has.
    servers = [(" ".join(filter(None, (wl, m[:-4].upper(), size_label(s)))), wl, s,
                m + "_per_tcp")
               for wl, metrics in SERVER_RATES.items() for m in metrics for s in sizes(wl)
               if all(data.get((wl, "sockmap", s, v, m + "_per_tcp")) for v in present)]
    w("Plots: " + ", ".join(f"[{f}]({f})" for f, show in (
        ("throughput.png", ts), ("stream.png", ss), ("stream-wakeups.png", ss),
        ("latency.png", ls), ("servers.png", servers)) if show) + ". "
      "Raw data, one file per boot: [raw/](raw/)"
      + (", [icount/](icount/)." if icdocs else "."))

    if missing:
        sys.exit("bench-report: missing measurements:\n  " + "\n  ".join(missing))
    text = "\n".join(out) + "\n"
    open(os.path.join(d, "report.md"), "w").write(text)
    print(text)
    plots(d, stat, ts, ss, ls, present, servers)


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


if __name__ == "__main__":
    main()
