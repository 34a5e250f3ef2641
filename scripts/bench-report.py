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

bench-report.py --results-md RESULTS prints docs/results.md (make
results-md): RESULTS/NOTE.md, the page's own text, with a section for each
run under RESULTS, newest first, where that places them. A run's section
is its NOTE.md, if it has one (its first line "# TITLE" the section's
title), with the tables it names rendered as report.md has them, from
the run's raw data, or from its report.md if it has none; without a
NOTE.md, the main comparisons of every table (DIGEST). Links in a NOTE.md
are written from docs/.
"""
import glob
import math
import os
import re
import statistics
import sys

from benchplots import plots
from benchresults import results_md
from benchrun import (NONREDIR_BUDGET, PAIRS, SERVER_RATES, VARIANTS, Run, Table,
                     change_pct, fmt_change, fmt_pct, fmt_ratio, nonredir_noise, paired, ratio,
                     size_label, within_budget)

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


def published(f):
    """The anchor's published vanilla-to-patched change: shown next to ours only."""
    f.needs = ("vanilla", "patched")
    return f


def size_table(r, title, sizes, rows):
    """A Table of ROWS by size, those whose kernels run R measured; None
    for a workload it did not measure (no SIZES)."""
    if not sizes:
        return None
    rows = [(name, cell) for name, cell in rows
            if set(getattr(cell, "needs", ())) <= set(r.present)]
    return Table(title, ["size"] + [size_label(s) for s in sizes],
                 [(name, [cell(s) for s in sizes]) for name, cell in rows])


# The report, part by part: each a function of the Run that yields the
# report's lines and Tables, in order (or nothing, where the run has no
# such measure).

def preamble(r):
    first, g, kernels, reps, present = r.first, r.first["guest"], r.kernels, r.reps, r.present
    yield f"# sk_msg ingress corking benchmark ({first['mode']} mode)\n"
    if r.only:
        k = kernels[r.only]
        yield (f"**No comparison: this run measured only the {r.only} kernel** (config "
               f"`{k['config']}`). The tables give its numbers alone, with no ratios between "
               "the kernels, and the issue's targets, which compare them, are not judged.\n")
    yield ("**QEMU TCG, no KVM**: a software-emulated x86-64 guest with "
           f"{g['cpus']} vCPUs on {first['host_cpus']} shared host cores. Absolute numbers "
           "are far below bare metal and are not comparable to the published anchor; only "
           "the ratios between kernels measured in the same run carry over, and even those "
           "only roughly.\n")
    if r.only:
        n = len(reps[r.only])
        yield (f"- {n} boot{'s' if n != 1 else ''} of {r.only}; "
               "every cell is the mean ± standard deviation over those boots.")
    else:
        group = "pair" if len(present) == 2 else "round"
        yield (f"- Kernels booted alternately, every other {group} in reverse order "
               f"({', '.join(present + present[::-1])}, ...): "
               + ", ".join(f"{len(reps[v])} {'boots ' if v == present[0] else ''}of {v}"
                           for v in present)
               + "; every cell is the mean ± standard deviation over those boots, except "
               "in the rows \"paired by round\": there, each round's ratio (its boots ran one "
               "after the other), their geometric mean and its 95% confidence interval.")
    for v in VARIANTS:
        if v in kernels:
            k = kernels[v]
            yield (f"- {v}: `{k['guest']['kernel_release']}`, tree "
                   f"{k['kernel_tree_commit'][:12]} (base {k['kernel_tree_base'][:12]}), series: "
                   + ("; ".join(k["series"]) if k["series"] else "none")
                   + f"; config `{k['config']}` sha256 {k['config_sha256'][:12]}")
    copy = g.get("copy_flags")
    copy = ("" if copy is None else
            "; guest CPU without ERMS or FSRM: the kernel copies with rep movsq" if not copy
            else f"; guest CPU with {' and '.join(f.upper() for f in copy)}: the kernel "
            "copies with rep movsb")
    yield (f"- HZ={g['hz']}, clocksource {g['clocksource']}, {g['cpu_model']}{copy}; sender on "
           f"vCPU {g['sender_cpu']}, receiver on vCPU {g['receiver_cpu']}"
           + ("; each vCPU's thread pinned to the host CPU of its number"
              if first.get("vcpus_pinned") else "; vCPU threads not pinned on the host"))
    yield (f"- Tools: " + ", ".join(f"{p} {v}" for p, v in sorted(g["tools"].items()))
           + f"; {first['qemu']}; workbench {first['workbench_commit']}")
    yield (f"- Guest time per boot: " + ", ".join(
        f"{doc['variant']} {doc['rep']}: {doc['elapsed_s']:.0f}s" for doc in r.docs))


def boot_label(doc):
    return f"{doc['variant']} {doc['mode']} boot {doc['rep']}"


def record_label(doc, r):
    return f"{boot_label(doc)}: {r['workload']} {r['system']} {size_label(r['size'])}"


def failures(r):
    """What went wrong in the boots, timed or counted, that the kernel may
    own: refused writes, lost data, early deaths, splats."""
    docs = r.docs + r.icdocs
    anchor = "anchor" in r.kernels
    refusals = [(doc, rec) for doc in docs for rec in doc["records"] if "refused" in rec]
    if refusals:
        kept = ("vanilla and the anchor, those kernels' own" if anchor
                else "vanilla, the unpatched kernel's own")
        yield (f"- **Measurements the kernel failed**: a write refused, or a stream that "
               f"stalled (kept for {kept} behaviour; on patched they fail the run), shown as "
               "\"refused\" below: " + "; ".join(
                   f"{record_label(doc, rec)}: {rec['refused']}" for doc, rec in refusals))
    lost = [(doc, rec) for doc in docs for rec in doc["records"] if "data_lost" in rec]
    if lost:
        yield ("- **Data lost** (kept for vanilla and the anchor as those kernels' own "
               "behaviour, with the rest of the measurement; on patched it fails the run): "
               + "; ".join(f"{record_label(doc, rec)}: {rec['data_lost']}" for doc, rec in lost))
    early = [doc for doc in docs if doc.get("early_death")]
    if early:
        yield ("- Booted again after dying before init started (no measurement lost or "
               "chosen; scripts/bench.sh): " + "; ".join(
                   f"{boot_label(doc)}: "
                   + (doc["early_death"][0] if doc["early_death"] else "no kernel message")
                   for doc in early))
    splats = [doc for doc in docs if doc.get("kernel_splat")]
    if splats:
        allowed = "vanilla and the anchor: their" if anchor else "vanilla only: its"
        yield (f"- **Kernel splats** (allowed for {allowed} own bugs; one on patched "
               "fails the run): " + "; ".join(
                   f"{boot_label(doc)}: "
                   + next((line.strip(">> ") for line in doc["kernel_splat"]
                           if line.startswith(">>")), doc["kernel_splat"][0])
                   for doc in splats))
    yield ""


def iperf3_throughput(r):
    t = r.stat
    yield size_table(r, "Throughput: iperf3 -l SIZE, Gbit/s", r.ts, [
        *t.per_kernel("{v} sockmap", "iperf3", "sockmap", "gbit_s"),
        *t.per_pair("ratio {b}/{a}", "iperf3", "sockmap", "gbit_s"),
        *t.per_pair_rounds("ratio {b}/{a}, paired by round", "iperf3", "sockmap", "gbit_s"),
        ("(anchor ratio, bare metal)", published(lambda s: f"{ANCHOR_TPUT_RATIO[s]:.2f}"
         if s in ANCHOR_TPUT_RATIO else "")),
        *t.per_kernel("{v} TCP", "iperf3", "tcp", "gbit_s"),
        ("patched sockmap / patched TCP", t.cmp("iperf3", "tcp", "patched", "sockmap",
                                                "patched", "gbit_s")),
        *t.per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "iperf3", "sockmap",
                    "per_tcp"),
    ])
    if r.pairs and r.ts:
        two = len(r.present) == 2
        yield ("Plain TCP is the control: the series does not change it, and it counts the "
               f"same instructions on {'both' if two else 'all'} kernels (below), yet its timed "
               f"throughput differs between the {'two ' if two else ''}kernels' boots (the rows "
               "above: the host, and how fast TCG runs each kernel image). The last "
               f"{'row divides' if two else 'rows divide'} each boot's sockmap throughput by "
               "its TCP throughput, measured right after it at the same size, before comparing "
               "the kernels: that takes out what the host and the kernel image do to "
               f"{'both' if two else 'all'} alike.\n")
    vanilla = {size: r.data.get(("iperf3", "sockmap", size, "vanilla", "gbit_s"))
               for size in ANCHOR_VANILLA_GBIT}
    if all(vanilla.values()):
        ours = cost_balance({size: statistics.fmean(v) for size, v in vanilla.items()})
        theirs = cost_balance(ANCHOR_VANILLA_GBIT)
        yield ("Vanilla sockmap's costs, from its means at 64 B and 64 KB: {:.3g} us a message "
               "and {:.3g} ns a byte, so a message's bytes cost as much as the rest of it at "
               "{:.0f} KB. The anchor's vanilla row gives {:.3g} us, {:.3g} ns and {:.0f} KB. "
               "Where the two costs meet decides at which size batching messages stops "
               "paying, so it is what the emulation must get right for the ratios to "
               "compare.\n".format(*ours, *theirs))


def iperf3_wakeups(r):
    t = r.stat
    yield size_table(r, "Receiver wake-ups per MB and CPU seconds per GB (iperf3)", r.ts, [
        *t.per_kernel("{v} wake-ups/MB", "iperf3", "sockmap", "wakeups_per_mb"),
        *t.per_pair("ratio {b}/{a}", "iperf3", "sockmap", "wakeups_per_mb"),
        ("TCP wake-ups/MB (patched)", t.cell("iperf3", "tcp", "patched", "wakeups_per_mb")),
        *t.per_kernel("{v} CPU s/GB", "iperf3", "sockmap", "cpu_s_per_gb"),
        *t.per_pair("ratio {b}/{a}", "iperf3", "sockmap", "cpu_s_per_gb"),
        ("TCP CPU s/GB (patched)", t.cell("iperf3", "tcp", "patched", "cpu_s_per_gb")),
    ])


def stream(r):
    t = r.stat
    # The writer's sleeps: not in runs from before they were counted.
    writer = any(k[4] == "sender_wakeups_per_mb" for k in r.data)
    reads = any(k[4] == "reads_per_mb" for k in r.data)
    cpus = any(k[4] == "sender_cpu_busy" for k in r.data)
    uds, nodelay = t.has("stream", "uds"), t.has("stream", "tcp-nodelay")
    yield size_table(
        r, "Stream to a reader that keeps up: SIZE-byte blocking writes, blocking 64 KiB "
        "reads, every byte checked (bench/pingpong stream), Gbit/s, receiver "
        "wake-ups per MB" + (", writer sleeps per MB (its voluntary context "
                             "switches: for room to write, or on a lock)" if writer else "")
        + (", the reader's read() calls per MB (15.3 per MB when every read is full)"
           if reads else "")
        + (", and how busy the writer's and the reader's CPUs were (the share of the "
           "run, whatever ran there: the side near 1 sets the pace)" if cpus else ""),
        r.ss, [
            *t.per_kernel("{v} sockmap", "stream", "sockmap", "gbit_s"),
            *t.per_pair("ratio {b}/{a}", "stream", "sockmap", "gbit_s"),
            *t.per_pair_rounds("ratio {b}/{a}, paired by round", "stream", "sockmap",
                               "gbit_s"),
            *t.per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "stream",
                        "sockmap", "per_tcp"),
            *t.per_kernel("{v} TCP", "stream", "tcp", "gbit_s"),
            *(t.per_kernel("{v} UDS", "stream", "uds", "gbit_s") if uds else ()),
            *((*t.per_kernel("{v} TCP_NODELAY", "stream", "tcp-nodelay", "gbit_s"),
               *t.per_kernel("{v} sockmap / TCP, same boot", "stream", "sockmap", "per_tcp"),
               *t.per_kernel("{v} sockmap / TCP_NODELAY, same boot", "stream", "sockmap",
                             "per_tcp_nodelay"))
              if nodelay else ()),
            *t.per_kernel("{v} wake-ups/MB", "stream", "sockmap", "wakeups_per_mb"),
            *t.per_pair("wake-ups ratio {b}/{a}", "stream", "sockmap", "wakeups_per_mb"),
            ("TCP wake-ups/MB (patched)", t.cell("stream", "tcp", "patched", "wakeups_per_mb")),
            *((("TCP_NODELAY wake-ups/MB (patched)",
                t.cell("stream", "tcp-nodelay", "patched", "wakeups_per_mb")),) if nodelay else ()),
            *(t.per_kernel("{v} writer sleeps/MB", "stream", "sockmap",
                           "sender_wakeups_per_mb") if writer else ()),
            *(t.per_kernel("{v} reads/MB", "stream", "sockmap", "reads_per_mb")
              if reads else ()),
            *t.per_kernel("{v} CPU s/GB", "stream", "sockmap", "cpu_s_per_gb"),
            *(t.per_kernel("{v} writer's CPU busy", "stream", "sockmap", "sender_cpu_busy")
              if cpus else ()),
            *(t.per_kernel("{v} reader's CPU busy", "stream", "sockmap", "receiver_cpu_busy")
              if cpus else ()),
        ])


def latency(r):
    t = r.stat
    yield size_table(
        r, "Latency: sockperf ping-pong --tcp, average one-way us (RTT/2)", r.ls, [
            *t.per_kernel("{v} sockmap", "sockperf", "sockmap", "latency_us"),
            *t.per_pair("change{vs}", "sockperf", "sockmap", "latency_us", fmt_change),
            ("(anchor change, bare metal)", published(
                lambda s: f"{ANCHOR_LAT_CHANGE[s]:+.1f}%" if s in ANCHOR_LAT_CHANGE else "")),
            *t.per_kernel("{v} sockmap / UDS, same boot", "sockperf", "sockmap", "per_uds"),
            *t.per_pair("change relative to UDS{vs}", "sockperf", "sockmap", "per_uds",
                        fmt_change),
            *t.per_kernel("{v} sockmap p99", "sockperf", "sockmap", "p99_us"),
            *t.per_kernel("{v} TCP", "sockperf", "tcp", "latency_us"),
            *t.per_kernel("{v} UDS (pingpong)", "pingpong", "uds", "latency_us"),
            *pingpong_rows(t, ("{v} sockmap (pingpong) / UDS, same boot", "sockmap",
                                  "per_uds")),
        ])


def pingpong_rows(t, *rows):
    """Rows of bench/pingpong's ping-pong through sockmap and plain TCP
    (NAME, SYSTEM, METRIC each), in the runs that measured it."""
    if not t.has("pingpong", "sockmap", "latency_us"):
        return []
    rows = (("{v} sockmap (pingpong)", "sockmap", "latency_us"),
            ("{v} TCP (pingpong)", "tcp", "latency_us")) + rows
    return [row for name, system, metric in rows
            for row in t.per_kernel(name, "pingpong", system, metric)]


def selftests_bench(r):
    t = r.stat
    yield size_table(
        r, "Selftests bench sockmap --tx-verdict-ingress (sendfile 128 KiB), receive MB/s",
        t.sizes("bench"), [
            *t.per_kernel("{v}", "bench", "bench-sockmap", "rcv_mb_s"),
            *t.per_pair("ratio{vs}", "bench", "bench-sockmap", "rcv_mb_s"),
        ])

def redis(r):
    t = r.stat
    for pipeline in (1, 16):
        workload = f"redis -P{pipeline}"
        if not t.sizes(workload):
            continue
        yield size_table(
            r, f"Real server: redis-benchmark -P {pipeline} "
            f"({r.first['plan'].get('redis_clients', 4)} clients, SET and GET of one "
            "key, value SIZE), requests/s", t.sizes(workload), [
                *[row for op in ("set", "get") for row in (
                    *t.per_kernel(f"{{v}} sockmap {op.upper()}", workload, "sockmap",
                                  f"{op}_rps"),
                    *t.per_pair(f"{op.upper()} ratio {{b}}/{{a}}", workload, "sockmap",
                                f"{op}_rps"),
                    *t.per_pair_rounds(f"{op.upper()} ratio {{b}}/{{a}}, paired by round",
                                       workload, "sockmap", f"{op}_rps"),
                    *t.per_pair(f"{op.upper()} ratio of sockmap / TCP, same boot, {{b}}/{{a}}",
                                workload, "sockmap", f"{op}_rps_per_tcp"),
                )],
                *t.per_kernel("{v} TCP GET", workload, "tcp", "get_rps"),
                *t.per_kernel("{v} sockmap GET p50 ms", workload, "sockmap", "get_p50_ms"),
                *t.per_kernel("{v} sockmap GET p99 ms", workload, "sockmap", "get_p99_ms"),
            ])


def wrk(r):
    t = r.stat
    yield size_table(
        r, "Real server: wrk against nginx (1 thread, 4 connections, a SIZE page, "
        "sendfile on), requests/s", t.sizes("wrk"), [
            *t.per_kernel("{v} sockmap", "wrk", "sockmap", "rps"),
            *t.per_pair("ratio {b}/{a}", "wrk", "sockmap", "rps"),
            *t.per_pair("ratio of sockmap / TCP, same boot, {b}/{a}", "wrk", "sockmap",
                        "rps_per_tcp"),
            *t.per_kernel("{v} TCP", "wrk", "tcp", "rps"),
            *t.per_kernel("{v} sockmap p50 ms", "wrk", "sockmap", "p50_ms"),
            *t.per_kernel("{v} sockmap p99 ms", "wrk", "sockmap", "p99_ms"),
        ])


def kernel_columns(r, first):
    """The heads of a table with a column for each kernel and each comparison."""
    return [first] + r.present + [f"change{r.versus(a, b)}" for a, b in r.pairs]


MANYFLOW = (("nobpf", "no BPF loaded"), ("pass", "in a sockhash, sk_msg passes (no redirect)"),
            ("sockmap", "in a sockhash, every message redirected"))


def many_flows(r):
    flows = r.flows()
    if not flows:
        return
    rows = []
    for metric, what in (("tps", "transactions/s"), ("slab_per_flow", "slab bytes per flow")):
        for system, name in MANYFLOW:
            if not r.stat.has("manyflow", system, metric):
                continue
            st = {v: r.stat("manyflow", system, 64, v, metric) for v in r.present}
            if all(st.values()):
                rows.append((f"{name}: {what}", [st[v].fmt() for v in r.present]
                             + [fmt_change(st[a], st[b]) for a, b in r.pairs]))
    # Counted: 10^9 instructions over transactions/s (one boot a kernel).
    for system, name in MANYFLOW:
        if not r.istat.has("manyflow", system, "tps"):
            continue
        st = r.istat.mapped("manyflow", system, 64, "tps", lambda x: 1e9 / x)
        if len(st) == len(r.present):
            rows.append((f"{name}: instructions per transaction (counted)",
                         [st[v].fmt() for v in r.present]
                         + [fmt_change(st[a], st[b]) for a, b in r.pairs]))
    yield Table(f"Many flows: {flows} TCP connections, 64-byte request/response: "
                "transactions/s, and the kernel's slab memory per flow (both ends) once "
                "every flow is connected and accepted, before its first request",
                kernel_columns(r, "system"), rows)


def counted(part):
    """A part of the report on the instruction-counted boots: nothing in a
    run without them."""
    return lambda r: part(r) if r.icdocs else ()


@counted
def icount_intro(r):
    yield "## Instruction-counted: one boot per kernel under QEMU -icount\n"
    yield ("Guest time advances 1 ns per instruction that either vCPU executes (one "
           "host thread runs them in turn; idle time is skipped), so a timing is the "
           "work done: the latency below is the instructions of both ends per round "
           "trip, halved, and the throughput the bytes moved per 10^9 instructions. "
           "The same kernel gives the same figures on every boot, whatever the host "
           "does, so these show small differences the boots above cannot; they do "
           "not show what two CPUs running at once gain or lose (one second per "
           "measurement; kernels: " + ", ".join(
               f"{doc['variant']} tree {doc['kernel_tree_commit'][:12]}"
               for doc in sorted(r.icdocs, key=lambda doc: VARIANTS.index(doc["variant"])))
           + ").\n")


@counted
def icount_latency(r):
    t = r.istat
    yield size_table(
        r, "Instruction-counted latency: sockperf ping-pong --tcp, RTT/2 in us "
        "(10^3 instructions)", r.ls, [
            *t.per_kernel("{v} sockmap", "sockperf", "sockmap", "latency_us"),
            *t.per_pair("change{vs}", "sockperf", "sockmap", "latency_us", fmt_change),
            *t.per_kernel("{v} TCP", "sockperf", "tcp", "latency_us"),
            *t.per_kernel("{v} UDS (pingpong)", "pingpong", "uds", "latency_us"),
            *pingpong_rows(t),
        ])


@counted
def icount_iperf3(r):
    t = r.istat
    yield size_table(
        r, "Instruction-counted throughput: iperf3 -l SIZE, Gbit/s (bits per 10^9 "
        "instructions)", r.ts, [
            *t.per_kernel("{v} sockmap", "iperf3", "sockmap", "gbit_s"),
            *t.per_pair("ratio {b}/{a}", "iperf3", "sockmap", "gbit_s"),
            *t.per_kernel("{v} TCP", "iperf3", "tcp", "gbit_s"),
            ("patched sockmap / patched TCP",
             t.cmp("iperf3", "tcp", "patched", "sockmap", "patched", "gbit_s")),
        ])


@counted
def icount_stream(r):
    t = r.istat
    if not t.sizes("stream"):
        return
    yield size_table(
        r, "Instruction-counted stream to a reader that keeps up (bench/pingpong "
        "stream), Gbit/s (bits per 10^9 instructions) and receiver wake-ups per MB",
        t.sizes("stream"), [
            *t.per_kernel("{v} sockmap", "stream", "sockmap", "gbit_s"),
            *t.per_pair("ratio {b}/{a}", "stream", "sockmap", "gbit_s"),
            *t.per_kernel("{v} TCP", "stream", "tcp", "gbit_s"),
            *(t.per_kernel("{v} UDS", "stream", "uds", "gbit_s") if t.has("stream", "uds")
              else ()),
            *(t.per_kernel("{v} TCP_NODELAY", "stream", "tcp-nodelay", "gbit_s")
              if t.has("stream", "tcp-nodelay") else ()),
            *t.per_kernel("{v} wake-ups/MB", "stream", "sockmap", "wakeups_per_mb"),
            *t.per_kernel("{v} writer sleeps/MB", "stream", "sockmap", "sender_wakeups_per_mb"),
        ])
    yield ("Under -icount one vCPU takes the other's wake-up only when that one halts "
           "or its turn ends at a timer, so the reader runs in turns and its wake-ups "
           "count them: about one a tick, or one per send buffer where a writer with a "
           "bound fills it within a tick and waits (its sleeps per MB then equal the "
           "reader's wake-ups). The timed boots show what the kernels do with both "
           "CPUs running (see docs/benchmark.md).\n")


@counted
def icount_servers(r):
    t = r.istat
    ic = r.icdocs[0]["plan"].get("redis_clients", 4)
    ic = f"{ic} client{'s' if ic > 1 else ''}"
    for workload, metric, what in (
            ("redis -P1", "set_rps", f"redis-benchmark -P 1 SET ({ic})"),
            ("redis -P1", "get_rps", f"redis-benchmark -P 1 GET ({ic})"),
            ("redis -P16", "get_rps", f"redis-benchmark -P 16 GET ({ic})"),
            ("wrk", "rps", "wrk against nginx")):
        yield size_table(
            r, f"Instruction-counted: {what}, requests per 10^9 instructions",
            t.sizes(workload), [
                *t.per_kernel("{v} sockmap", workload, "sockmap", metric),
                *t.per_pair("ratio {b}/{a}", workload, "sockmap", metric),
                *t.per_kernel("{v} TCP", workload, "tcp", metric),
            ])


@counted
def syscalls(r):
    if not any(k[0] == "syscall" for k in r.icdata):
        return
    count = r.istat("syscall", "sockmap", 64, r.present[0], "count")
    text = ("One thread holds both ends of a connection to itself: a send() on one end, "
            "a recv(MSG_DONTWAIT) at the other, both ways, "
            f"{count.mean if count else 0:,.0f} times. Nobody waits or "
            "is woken up: the instructions of each call on the path (mean of both "
            "directions).\n")
    rows = []
    for system, name in (("sockmap", "sockmap"), ("tcp", "TCP")):
        for metric in ("send_ns", "recv_ns"):
            st = {v: r.istat("syscall", system, 64, v, metric) for v in r.present}
            if all(st.values()):
                rows.append((f"{name} {metric[:4]}()", [f"{st[v].mean:.0f}" for v in r.present]
                             + [f"{st[b].mean - st[a].mean:+.0f} ({fmt_change(st[a], st[b])})"
                                for a, b in r.pairs]))
    yield Table("Instruction-counted system calls: pingpong solo, 64 B",
                kernel_columns(r, "call"), rows, [text])


@counted
def nonredir(r):
    rows = r.nonredir
    if not rows:
        return
    judged = [v for v in ("patched", "anchor") if {v, "vanilla"} <= set(r.kernels)]
    text = ("Instruction-counted, a request and its response with both ends' work (sockperf "
            "ping-pong --tcp: twice its RTT/2; many flows, bench/pingpong: 10^9 over "
            "transactions per second). The sockets are in bench/sockredir's sockhash with no "
            "program on their data (nomsg), its sk_msg program passing every message (pass), "
            "or an sk_skb stream verdict alone passing every skb (skb); nobpf is plain TCP, "
            f"the control. The target: at most +{NONREDIR_BUDGET}% on vanilla in every row; "
            "in the many-flow rows, beyond how far their control moved."
            + "".join(f" No {what} rows: the counted boots did not run {w}."
                      for w, what in (("nonredir", "sockperf"), ("manyflow", "many-flow"))
                      if not r.istat.sizes(w)))
    yield Table(
        "Sockets in a sockmap that do not redirect: instructions per transaction"
        + (", " if judged else "") + " and ".join(f"{v}/vanilla" for v in judged),
        kernel_columns(r, "ping-pong") + [f"{v} within +{NONREDIR_BUDGET}%" for v in judged],
        [(name, [st[v].fmt() if v in st else "missing" for v in r.present]
          + [fmt_pct(change_pct(st, a, b)) for a, b in r.pairs]
          + [within_budget(change_pct(st, "vanilla", v), nonredir_noise(rows, name, "vanilla", v))
             for v in judged])
         for name, st in rows], [text + "\n"])


def throughput_targets(r):
    """The throughput targets, each as (name, measure): measure(v), kernel
    v's measure as (text, met), or None where it has none."""
    def tput_ratio(v, s):
        a = r.stat("iperf3", "sockmap", s, "vanilla", "gbit_s")
        b = r.stat("iperf3", "sockmap", s, v, "gbit_s")
        return ratio(a, b)[0] if a and b else math.nan

    for lo, hi, want in ((64, 4096, 2.6), (16384, 32768, 2.1), (65536, 1 << 30, 1.0)):
        sel = [s for s in r.ts if lo <= s <= hi]
        if sel:
            def throughput(v, sel=sel, want=want):
                rs = [tput_ratio(v, s) for s in sel]
                return (", ".join(f"{size_label(s)}: {x:.2f}x" for s, x in zip(sel, rs)),
                        all(x >= want for x in rs))
            yield (f"throughput >= {want}x at {size_label(sel[0])}-{size_label(sel[-1])}",
                   throughput)


def latency_targets(r):
    """The latency targets, as throughput_targets()."""
    for st, metric, how in ((r.stat, "latency_us", ""),
                            (r.stat, "per_uds", ", relative to UDS in the same boot"),
                            (r.istat, "latency_us", ", instruction-counted")):
        def latency(v, st=st, metric=metric):
            changes = []
            for s in r.ls if st is r.stat or r.icdocs else ():
                a = st("sockperf", "sockmap", s, "vanilla", metric)
                b = st("sockperf", "sockmap", s, v, metric)
                if a and b:
                    changes.append((s, (ratio(a, b)[0] - 1) * 100))
            if changes:
                return (", ".join(f"{size_label(s)}: {c:+.1f}%" for s, c in changes),
                        all(c <= 1.0 for _, c in changes))
        yield f"latency <= +1% at every size{how}", latency


def other_targets(r):
    """The targets against plain TCP, on wake-ups, on many flows and on
    sockets that do not redirect, as throughput_targets()."""
    def vs_tcp(v):
        rs = []
        for s in r.ts:
            a = r.stat("iperf3", "tcp", s, v, "gbit_s")
            b = r.stat("iperf3", "sockmap", s, v, "gbit_s")
            if a and b:
                rs.append((s, ratio(a, b)[0]))
        if rs:
            return (", ".join(f"{size_label(s)}: {x:.2f}x" for s, x in rs),
                    all(x >= 1.0 for _, x in rs))
    yield "patched sockmap >= plain TCP throughput at every size", vs_tcp

    def wakeups(v):
        a = r.stat("iperf3", "sockmap", 64, "vanilla", "wakeups_per_mb")
        b = r.stat("iperf3", "sockmap", 64, v, "wakeups_per_mb")
        if a and b and b.mean:
            f = a.mean / b.mean
            return f"{f:.2f}x fewer", f >= 4
    if 64 in r.ts:
        yield "receiver wake-ups/MB at 64 B at least 4x fewer", wakeups
    def manyflow(system, metric, show, ok):
        """A target on the many-flow METRIC of SYSTEM against vanilla's:
        show(a, b, b/a, noise) says it, ok(b/a, noise) judges it."""
        def f(v):
            a = r.stat("manyflow", system, 64, "vanilla", metric)
            b = r.stat("manyflow", system, 64, v, metric)
            if a and b:
                x, sd = ratio(a, b)
                return show(a, b, x, sd), ok(x, max(sd, 0.01))
        return f
    for system, _ in MANYFLOW if r.flows() else ():
        if r.stat.has("manyflow", system, "tps"):
            # "No measurable cost": not below vanilla by more than the noise.
            yield f"many-flow ({system}): no measurable cost", manyflow(
                system, "tps", lambda a, b, x, sd: f"{(x - 1) * 100:+.1f}% (noise ±{sd * 100:.1f}%)",
                lambda x, noise: x >= 1 - noise)
        if r.stat.has("manyflow", system, "slab_per_flow"):
            yield f"many-flow ({system}): no more slab per idle flow", manyflow(
                system, "slab_per_flow",
                lambda a, b, x, sd: f"{b.mean:.0f} against {a.mean:.0f} bytes ({(x - 1) * 100:+.1f}%)",
                lambda x, noise: x <= 1 + noise)
    if r.nonredir:
        def nonredir_cost(v):
            # Each row's change less the noise its control shows; the worst.
            changes = [(c - nonredir_noise(r.nonredir, name, "vanilla", v), c, name)
                       for name, st in r.nonredir
                       if (c := change_pct(st, "vanilla", v)) is not None]
            if changes:
                over, c, name = max(changes)
                return f"at most {c:+.2f}% ({name})", over <= NONREDIR_BUDGET
        yield (f"sockets in a sockmap that do not redirect: at most +{NONREDIR_BUDGET}% "
               "instructions per transaction, counted, in every row (many flows: beyond "
               "their control's change)"), nonredir_cost


def targets(r):
    """The issue's targets, judged on the means; a miss is reported, not
    hidden. They compare patched with vanilla: a run without both has none.
    The anchor's same measures, against the same vanilla, stand beside them."""
    if not {"iperf3", "sockperf", "manyflow", "nonredir"} & r.ran:
        yield "## Targets\n"
        yield ("Not judged: they are about iperf3, sockperf, many flows and sockets that do "
               f"not redirect, and this run measured {', '.join(sorted(r.ran))} alone.")
        yield ""
        return
    if not {"vanilla", "patched"} <= set(r.kernels):
        yield "## Targets\n"
        yield (f"Not judged: they are about patched against vanilla, and this run measured "
               f"{' and '.join(r.present)} alone.")
        yield ""
        return
    judged = [v for v in ("patched", "anchor") if v in r.kernels]
    rows = []
    for name, measure in (*throughput_targets(r), *latency_targets(r), *other_targets(r)):
        cells = [measure(v) for v in judged]
        if any(cells):
            rows.append((name, [x for c in cells for x in (
                (c[0], "yes" if c[1] else "**no**") if c else ("missing", ""))]))
    yield Table("Targets (patched vs vanilla, this run"
                + "".join(f"; {v} vs vanilla beside" for v in judged[1:]) + ")",
                ["target", "measured", "met"] + [x for v in judged[1:] for x in (v, f"{v} met")],
                rows)


def plot_links(r):
    yield ("Plots: " + ", ".join(f"[{f}]({f})" for f, show in (
        ("throughput.png", r.ts), ("stream.png", r.ss), ("stream-wakeups.png", r.ss),
        ("latency.png", r.ls), ("servers.png", r.servers())) if show) + ". "
        "Raw data, one file per boot: [raw/](raw/)"
        + (", [icount/](icount/)." if r.icdocs else "."))


REPORT = (preamble, failures, iperf3_throughput, iperf3_wakeups, stream, latency,
          selftests_bench, redis, wrk, many_flows, icount_intro, icount_latency, icount_iperf3,
          icount_stream, icount_servers, syscalls, nonredir, targets, plot_links)


def report(r):
    """The report's items in order: its lines and Tables."""
    for part in REPORT:
        for item in part(r):
            if item is not None:
                yield item


def main():
    if sys.argv[1:2] == ["--results-md"]:
        sys.stdout.write(results_md(sys.argv[2], report))
        return
    d = sys.argv[1]
    r = Run(d)
    out = []
    for item in report(r):
        out.extend(item.lines() if isinstance(item, Table) else [item])
    if r.missing:
        sys.exit("bench-report: missing measurements:\n  " + "\n  ".join(r.missing))
    text = "\n".join(out) + "\n"
    open(os.path.join(d, "report.md"), "w").write(text)
    print(text)
    plots(d, r.stat, r.ts, r.ss, r.ls, r.present, r.servers())


if __name__ == "__main__":
    main()
