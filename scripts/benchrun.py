"""A benchmark run's measurements: the boots in DIR/raw/*.json and
DIR/icount/*.json (one per boot, from guest/bench.py), their statistics
and how the kernels compare, for scripts/bench-report.py.
"""
import functools
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


# Sockets that do not redirect, counted (Run.nonredir): each system of
# guest/bench.py's nonredir workload and its row's name, and what the
# series may add to their instructions per transaction, in percent.
NONREDIR = (("nobpf", "no BPF, the control"), ("nomsg", "in a sockhash, no program"),
            ("pass", "in a sockhash, sk_msg passes"),
            ("skb", "in a sockhash, sk_skb verdict alone"))
NONREDIR_BUDGET = 0.3


def change_pct(row, a, b):
    """b/a - 1 in percent of a Run.nonredir row's Stats, or None without
    both kernels."""
    return (ratio(row[a], row[b])[0] - 1) * 100 if a in row and b in row else None


def fmt_pct(change):
    return "missing" if change is None else f"{change:+.2f}%"


def within_budget(change, noise=0.0):
    """Whether a change_pct() meets NONREDIR_BUDGET, beyond NOISE, as a cell."""
    return "" if change is None else "yes" if change <= NONREDIR_BUDGET + noise else "**no**"


def nonredir_noise(rows, name, a, b):
    """How far, in percent, the control of row NAME of Run.nonredir moved
    from kernel A to B: the many-flow run's plain TCP (nobpf), which runs
    no code the series changes, varies by a few percent from boot to boot
    with 20,000 connections, and the other many-flow rows with it; none
    for the sockperf rows, whose control moves by 0.1% at most. The
    control row itself is not judged."""
    if not name.startswith("many flows"):
        return 0.0
    control = next(st for n, st in rows if n.startswith("many flows") and ", nobpf:" in n)
    change = change_pct(control, a, b)
    return math.inf if ", nobpf:" in name else abs(change or 0.0)


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
            if r["workload"] in ("iperf3", "stream") and r["system"] in ("tcp", "tcp-nodelay"):
                tcp[(r["workload"], r["system"], r["size"])] = r["gbit_s"]
            if r["workload"] in SERVER_RATES and r["system"] == "tcp":
                servers[(r["workload"], r["size"])] = r
        # Each boot's sockmap latency over its Unix socket latency, measured
        # right after it: the series does not touch Unix sockets, so this
        # takes out how fast the host ran the guest at the time.
        # Likewise each boot's sockmap throughput over its plain TCP
        # throughput (per_tcp; per_tcp_nodelay with TCP_NODELAY), measured
        # right after it.
        for r in doc["records"]:
            if (r["workload"] in ("sockperf", "pingpong") and r["system"] == "sockmap"
                    and r["size"] in uds):
                data[(r["workload"], "sockmap", r["size"], doc["variant"], "per_uds")].append(
                    r["latency_us"] / uds[r["size"]])
            for ctl in ("tcp", "tcp-nodelay"):
                if (r["system"] == "sockmap" and "gbit_s" in r
                        and tcp.get((r["workload"], ctl, r["size"]))):
                    data[(r["workload"], "sockmap", r["size"], doc["variant"],
                          "per_" + ctl.replace("-", "_"))].append(
                        r["gbit_s"] / tcp[(r["workload"], ctl, r["size"])])
            plain = servers.get((r["workload"], r["size"]))
            if plain and r["system"] == "sockmap":
                for m in SERVER_RATES[r["workload"]]:
                    if r.get(m) and plain.get(m):
                        data[(r["workload"], "sockmap", r["size"], doc["variant"],
                              m + "_per_tcp")].append(r[m] / plain[m])
    return docs, data, rounds



class Measures:
    """One kind of a run's measures, the timed boots' or the instruction-
    counted ones': stat(workload, system, size, variant, metric) is a Stat,
    or None, noted as missing unless the kernel refused it; and the rows of
    a table (per_kernel(), per_pair(), ...), each a name and a cell, which
    gives the text for a size."""

    def __init__(self, run, data, what=""):
        self.run, self.data, self.what = run, data, what

    def __call__(self, workload, system, size, variant, metric):
        v = self.data.get((workload, system, size, variant, metric))
        if not v:
            if workload in self.run.ran and not self.refused(workload, system, size, variant):
                self.run.missing.append(
                    f"{self.what}{workload} {system} {size} {variant} {metric}")
            return None
        return Stat(v)

    def has(self, workload, system, metric=None):
        """Whether any kernel has a measure of SYSTEM in WORKLOAD (of METRIC)."""
        return any(k[:2] == (workload, system) and metric in (None, k[4]) for k in self.data)

    def mapped(self, workload, system, size, metric, f):
        """{kernel: Stat of f(value)} of the kernels that have the measure."""
        st = {v: self(workload, system, size, v, metric) for v in self.run.present}
        return {v: Stat([f(x) for x in s.values]) for v, s in st.items() if s}

    def refused(self, workload, system, size, variant):
        """How many boots' kernel refused this measurement's writes (vanilla,
        the anchor)."""
        return len(self.data.get((workload, system, size, variant, "refused"), ()))

    def sizes(self, workload):
        return sorted({k[2] for k in self.data if k[0] == workload})

    def cell(self, workload, system, variant, metric):
        def f(s):
            st = self(workload, system, s, variant, metric)
            n = self.refused(workload, system, s, variant)
            if not st:
                return "refused" if n else "missing"
            return st.fmt() + (f" ({n} refused)" if n else "")
        f.needs = (variant,)
        return f

    def cmp(self, workload, sys_a, var_a, sys_b, var_b, metric, fmt=fmt_ratio):
        def f(s):
            a = self(workload, sys_a, s, var_a, metric)
            b = self(workload, sys_b, s, var_b, metric)
            if a and b:
                return fmt(a, b)
            return ("refused" if self.refused(workload, sys_a, s, var_a)
                    or self.refused(workload, sys_b, s, var_b) else "missing")
        f.needs = (var_a, var_b)
        return f

    def per_kernel(self, name, workload, system, metric):
        """A cell() row for each kernel, named NAME with {v} the kernel."""
        return [(name.format(v=v), self.cell(workload, system, v, metric)) for v in VARIANTS]

    def per_pair(self, name, workload, system, metric, fmt=fmt_ratio):
        """A cmp() row for each comparison, named NAME with {a} and {b} the
        kernels and {vs} what tells the comparison apart (Run.versus())."""
        return [(name.format(a=a, b=b, vs=self.run.versus(a, b)),
                 self.cmp(workload, system, a, system, b, metric, fmt))
                for a, b in PAIRS]

    def per_pair_rounds(self, name, workload, system, metric):
        """For each comparison, the ratio paired by round (paired())."""
        rounds = self.run.rounds

        def row(a, b):
            def f(s):
                return paired(rounds.get((workload, system, s, a, metric), {}),
                              rounds.get((workload, system, s, b, metric), {})) or ""
            f.needs = (a, b)
            return name.format(a=a, b=b, vs=self.run.versus(a, b)), f
        return [row(a, b) for a, b in PAIRS]


class Run:
    """A run directory's boots (load()) and what the report says of them
    throughout: the kernels it measured, the comparisons it can make, the
    sizes of its workloads, and the measurements found missing."""

    def __init__(self, d):
        self.dir = d
        self.docs, self.data, self.rounds = load(d)
        self.icdocs, self.icdata, _ = load(d, "icount")
        self.missing = []
        # The workloads this run measured (bench.sh --only: not all of them).
        self.ran = {k[0] for k in self.data} | {k[0] for k in self.icdata}
        self.stat = Measures(self, self.data)
        self.istat = Measures(self, self.icdata, "icount: ")
        self.first = self.docs[0]
        self.reps = {v: sorted(doc["rep"] for doc in self.docs if doc["variant"] == v)
                     for v in VARIANTS}
        self.kernels = {doc["variant"]: doc for doc in self.docs}
        # The kernels this run measured; with one, nothing is compared.
        self.present = [v for v in VARIANTS if v in self.kernels]
        self.only = self.present[0] if len(self.present) == 1 else None
        # The comparisons it can make.
        self.pairs = [(a, b) for a, b in PAIRS if a in self.kernels and b in self.kernels]
        # The sizes of iperf3, the stream and sockperf in the timed boots.
        self.ts, self.ss, self.ls = (self.stat.sizes(w) for w in ("iperf3", "stream", "sockperf"))

    def versus(self, a, b):
        """What tells the comparison of b with a from the others in a row's
        or column's name: nothing if it is the run's only one."""
        return "" if len(self.pairs) == 1 else f" {b}/{a}"

    def flows(self):
        """How many connections the many-flow workload ran, if it ran."""
        return self.first["plan"]["flows"] if "manyflow" in self.ran else 0

    @functools.cached_property
    def nonredir(self):
        """The instruction-counted rows of sockets that do not redirect, each
        (name, {kernel: Stat of instructions per transaction}): the nonredir
        workload's sockperf ping-pong by size (a round trip is twice its
        RTT/2, and a ns an instruction), then the many-flow ping-pong (10^9
        over transactions per second), where the counted boots ran them."""
        per = self.istat.mapped
        rows = [(f"sockperf {size_label(s)}, {system}: {name}",
                 per("nonredir", system, s, "latency_us", lambda x: 2e3 * x))
                for s in self.istat.sizes("nonredir") for system, name in NONREDIR]
        if self.istat.sizes("manyflow"):
            flows = self.icdocs[0]["plan"]["flows"]
            rows += [(f"many flows ({flows}, 64), {system}: {name}",
                      per("manyflow", system, 64, "tps", lambda x: 1e9 / x))
                     for system, name in NONREDIR if system in ("nobpf", "pass")]
        return rows

    def servers(self):
        """The real servers' measures that every kernel has, each as (label,
        workload, size, metric): each kernel's sockmap rate over plain TCP's
        in the same boot."""
        return [(" ".join(filter(None, (wl, m[:-4].upper(), size_label(s)))), wl, s,
                 m + "_per_tcp")
                for wl, metrics in SERVER_RATES.items() for m in metrics
                for s in self.stat.sizes(wl)
                if all(self.data.get((wl, "sockmap", s, v, m + "_per_tcp"))
                       for v in self.present)]


class Table:
    """A table of the report: its title, the text between the title and
    the table, the column heads (the first heads the rows' names) and the
    rows, each a name and its cells."""

    def __init__(self, title, columns, rows, text=()):
        self.title, self.columns, self.rows, self.text = title, columns, rows, list(text)

    def lines(self, heading="##"):
        """The table in Markdown, its title a heading (##), or in italics
        above it without HEADING."""
        yield f"{heading} {self.title}\n" if heading else f"*{self.title}*\n"
        yield from self.text
        yield "| " + " | ".join(self.columns) + " |"
        yield "|---|" + "---|" * (len(self.columns) - 1)
        for name, cells in self.rows:
            yield f"| {name} | " + " | ".join(cells) + " |"
        yield ""
