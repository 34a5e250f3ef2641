#!/usr/bin/env python3
"""Where the instructions of a measurement go (scripts/bench.sh --profile).

  insnprof.py windows INSNPROF.TXT SYSTEM.MAP BENCH.JSON > PROFILE.JSON
      bench/insnprof.c's counts of one instruction-counted boot, by kernel
      function (System.map; user space as one line, BPF programs and other
      code outside the kernel image as another), for each measurement the
      boot's guest/bench.py marked (bench.json's profile_windows): of the
      last 2N windows, window 2i + 1 is measurement i. Fails if the windows
      and the marks disagree.
  insnprof.py report DIR > profile.md
      DIR/<variant>.json (the windows above) side by side: per measurement, the
      instructions per send (calls of sendto(), sendmsg() and write(), as
      counted at their entry: a ping-pong transaction is two sends) of
      the functions that differ most between the kernels (those that ran
      less than once in 10^5 instructions left out), the first one listed
      the reference.
  insnprof.py budget DIR > budget.md
      the stream's and the ping-pong's instructions per send by part of the
      kernel (PARTS: syscalls, copy, sk_msg, memory, wake-ups, TCP/IP, ...),
      for each size: plain TCP, the Unix socket and the sockmap path of
      each kernel side by side.
  insnprof.py lines INSNPROF.TXT BENCH.JSON VMLINUX MEASUREMENT FUNCTION...
      within the named kernel functions, one measurement's instructions per
      send by source line (addr2line; a block counts at the line it starts
      at, an inlined function's line under its own name): where in a
      function its count goes.
"""
import bisect
import glob
import json
import os
import subprocess
import sys

SENDS = ("__x64_sys_sendto", "__x64_sys_sendmsg", "__x64_sys_write")
ROWS = 25


def symbols(path):
    """System.map's text symbols: a function that names what an address
    ran (user space, and code outside the kernel image, as one name each),
    and the functions by their entry address."""
    addrs, names = [], []
    for line in open(path):
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    addrs = [addrs[i] for i in order]
    names = [names[i] for i in order]
    end = max(int(l.split()[0], 16) for l in open(path) if l.split()[2:] == ["_etext"])

    def name_of(addr):
        if addr < 1 << 63:
            return "(user space)"
        if addr < addrs[0] or addr >= end:
            return "(outside the kernel image: BPF programs, modules)"
        return names[bisect.bisect_right(addrs, addr) - 1]
    return name_of, dict(zip(addrs, names))


def raw_windows(txt, bench):
    """bench/insnprof.c's windows of the measurements bench.json marked,
    by name: each block's address -> (instructions, executions)."""
    marks = json.load(open(bench)).get("profile_windows", [])
    found = []
    for line in open(txt):
        if line.startswith("window"):
            found.append({})
            continue
        addr, insns, execs = line.split()
        i, e = found[-1].get(int(addr, 16), (0, 0))
        found[-1][int(addr, 16)] = (i + int(insns), e + int(execs))
    # Whatever called getppid() before the first measurement (the guest's
    # start-up does, twice) only adds windows ahead of them.
    skip = len(found) - 2 * len(marks)
    if skip < 0 or skip % 2:
        sys.exit(f"insnprof: {len(found)} windows for {len(marks)} marked measurements")
    return {m: found[skip + 2 * i + 1] for i, m in enumerate(marks)}


def windows(args):
    txt, sysmap, bench = args
    name_of, entry = symbols(sysmap)
    out = {}
    for m, blocks in raw_windows(txt, bench).items():
        w = out[m] = {"insns": {}, "calls": {}}
        for addr, (insns, execs) in blocks.items():
            name = name_of(addr)
            w["insns"][name] = w["insns"].get(name, 0) + insns
            if entry.get(addr) in SENDS:
                w["calls"][entry[addr]] = execs
        # What ran less than once in 10^5 instructions is noise here.
        w["total"] = sum(w["insns"].values())
        w["insns"] = {k: n for k, n in w["insns"].items() if n >= w["total"] / 1e5}
        out[m] = w
    json.dump(out, sys.stdout, indent=0)


def report(args):
    (d,) = args
    runs = {}
    for path in sorted(glob.glob(os.path.join(d, "*.json"))):
        runs[os.path.basename(path)[:-len(".json")]] = json.load(open(path))
    order = [v for v in ("vanilla", "anchor", "patched") if v in runs]
    if not order:
        sys.exit(f"insnprof: no profile in {d}")
    print("# Instructions by function, per send\n")
    print("Instruction-counted boots (bench/insnprof.c): per measurement, the kernel's"
          " functions whose instructions per send differ most between the kernels"
          f" ({', '.join(order)}); a ping-pong transaction is two sends.\n")
    for m in runs[order[0]]:
        per, total = {}, {}
        for v in order:
            w = runs[v].get(m)
            sends = sum(w["calls"].values()) if w else 0
            if not sends:
                break
            per[v] = {k: i / sends for k, i in w["insns"].items()}
            total[v] = w["total"] / sends
        if len(per) != len(order):
            continue
        print(f"## {m}\n")
        print("| function | " + " | ".join(order) + " | change |")
        print("|---|" + "---|" * (len(order) + 1))
        keys = set().union(*per.values())
        ref, last = per[order[0]], per[order[-1]]
        print("| **all** | " + " | ".join(f"{total[v]:.0f}" for v in order) +
              f" | {total[order[-1]] - total[order[0]]:+.0f} |")
        for k in sorted(keys, key=lambda k: -abs(last.get(k, 0) - ref.get(k, 0)))[:ROWS]:
            print(f"| {k} | " + " | ".join(f"{per[v].get(k, 0):.1f}" for v in order) +
                  f" | {last.get(k, 0) - ref.get(k, 0):+.1f} |")
        print()


# Where a send's instructions go, for budget: the first pattern a
# function's name starts with (or contains, for those with a "*") names
# its part; the rest is "other kernel".
PARTS = (
    ("user space", ("(user space)",)),
    # The sk_msg program and what it calls: its map lookups, its helpers.
    ("BPF program and helpers", ("(outside", "bpf_", "__bpf", "jhash", "memcmp", "__sock_hash",
                                 "sock_hash", "__sock_map", "sock_map_lookup", "htab_",
                                 "__htab")),
    ("sk_msg and psock", ("sk_msg", "sk_psock", "tcp_bpf", "__sk_msg", "*_sk_msg", "*psock")),
    ("copy", ("copy_", "_copy_", "rep_movs", "memcpy", "__skb_datagram_iter",
              "skb_copy_datagram", "simple_copy_to_iter", "*copy_to_iter", "*copy_from_iter")),
    ("memory and charging", ("kmem_cache", "__kmalloc", "kmalloc", "kfree", "__kfree", "kfree_",
                             "__alloc_pages", "alloc_pages", "get_page_from_freelist",
                             "__rmqueue", "free_", "__free", "page_frag", "skb_page_frag",
                             "sk_page_frag", "__sk_mem", "sk_mem", "mem_cgroup", "__mem_cgroup",
                             "__mod_memcg", "__mod_lruvec", "__mod_zone", "__mod_node",
                             "mod_memcg", "mod_lruvec", "mod_zone", "mod_node", "refill_stock",
                             "obj_cgroup", "memset", "__slab", "slab_", "___slab", "put_page",
                             "__put_page", "sk_forced_mem", "__sk_stream_memory",
                             "sk_stream_alloc")),
    ("wake-up and scheduler", ("__wake_up", "wake_up", "try_to_wake_up", "ttwu", "schedule",
                               "__schedule", "pick_", "enqueue_", "dequeue_", "update_",
                               "__update", "finish_task_switch", "select_task_rq",
                               "sock_def_readable", "sk_stream_write_space", "ep_",
                               "woken_wake", "autoremove_wake", "set_next", "put_prev",
                               "sched_", "__enqueue", "__dequeue", "check_preempt",
                               "wakeup_", "resched", "native_sched", "psi_", "rcu_",
                               "prepare_task_switch", "__switch_to", "switch_mm",
                               "hrtick", "cpuacct", "account_", "avg_vruntime",
                               "place_entity", "reweight", "__calc_delta", "vruntime")),
    ("syscall entry and exit", ("entry_SYSCALL", "do_syscall", "syscall_", "__x64_sys",
                                "__sys_", "ksys_", "vfs_", "rw_verify", "security_",
                                "import_", "__fdget", "fdget", "fput", "__fput",
                                "exit_to_user", "__sock_sendmsg", "sock_sendmsg",
                                "sock_recvmsg", "sock_write_iter", "sock_read_iter",
                                "fpregs", "switch_fpu", "restore_fpregs", "x64_sys_call")),
    # Its own protocol's code; the skbs it allocates and frees count here too.
    ("Unix socket", ("unix_", "__unix", "scm_", "maybe_add_creds", "unix_scm")),
    ("TCP/IP, loopback, skbs", ("tcp_", "__tcp_", "ip_", "__ip_", "inet_", "__inet", "dev_",
                             "__dev_", "netif_", "__netif", "net_rx", "eth_", "loopback",
                             "skb_", "__skb", "alloc_skb", "__alloc_skb", "kfree_skb",
                             "consume_skb", "sk_reset_timer", "sk_stream", "validate_xmit",
                             "process_backlog", "enqueue_to_backlog", "raw_local_deliver",
                             "nf_", "ipv4_", "tcp4_", "tcp_v4", "sk_filter",
                             "release_sock", "lock_sock", "__release_sock",
                             "sock_", "__sock", "sk_wait", "__sk_", "sk_")),
)


def part(name):
    for label, prefixes in PARTS:
        for p in prefixes:
            if name.startswith(p) if p[0] != "*" else p[1:] in name:
                return label
    return "other kernel"


def per_send(w):
    """A window's instructions per send, by part, and "all"."""
    sends = sum(w["calls"].values())
    by = {}
    for k, n in w["insns"].items():
        by[part(k)] = by.get(part(k), 0) + n / sends
    by["all"] = w["total"] / sends
    return by


# The workloads budget() splits, each with its windows' names (before the
# size) for plain TCP, the Unix socket and the sockmap path.
BUDGETS = (
    ("A stream's write (bench/pingpong stream)",
     (("plain TCP", "stream-tcp"), ("TCP_NODELAY", "stream-tcp-nodelay"),
      ("Unix socket", "stream-uds")), "stream-sockmap"),
    ("Ping-pong, half a round trip (sockperf --tcp; the Unix socket: bench/pingpong)",
     (("plain TCP", "sockperf-tcp"), ("Unix socket", "pingpong-uds")), "sockperf-sockmap"),
    ("Ping-pong, half a round trip, one tool (bench/pingpong)",
     (("plain TCP", "pingpong-tcp"), ("Unix socket", "pingpong-uds")), "pingpong-sockmap"),
)


def budget(args):
    """Per send, by part (PARTS), for each workload and size: plain TCP and
    the Unix socket (on the first kernel that has them: the unpatched one),
    then the sockmap path on each kernel."""
    (d,) = args
    runs = {os.path.basename(p)[:-len(".json")]: json.load(open(p))
            for p in glob.glob(os.path.join(d, "*.json"))}
    order = [v for v in ("vanilla", "anchor", "patched") if v in runs]
    order += sorted(v for v in runs if v not in order)
    print("# Where a send's instructions go\n")
    print("Instruction-counted boots (bench/insnprof.c): per send (one SIZE-byte write"
          " and its share of the reader's work; in a ping-pong, half a round trip), by"
          " part of the kernel (scripts/insnprof.py PARTS).\n")

    # Each kernel's windows that counted sends, split by part once.
    split = {v: {m: per_send(w) for m, w in runs[v].items() if w.get("calls")} for v in order}
    for title, controls, sockmap in BUDGETS:
        sizes = sorted({int(m.rsplit("-", 1)[1]) for run in runs.values() for m in run
                        if m.rsplit("-", 1)[0] == sockmap})
        for size in sizes:
            cols = []
            for name, prefix in controls:
                v = next((v for v in order if f"{prefix}-{size}" in split[v]), None)
                if v:
                    cols.append((f"{name} ({v})", split[v][f"{prefix}-{size}"]))
            cols += [(f"sockmap, {v}", split[v][f"{sockmap}-{size}"]) for v in order
                     if f"{sockmap}-{size}" in split[v]]
            print(f"## {title}: {size} B\n")
            print("| part | " + " | ".join(c for c, _ in cols) + " |")
            print("|---" * (len(cols) + 1) + "|")
            for label in ["all"] + [p for p, _ in PARTS] + ["other kernel"]:
                b = "**" if label == "all" else ""
                print(f"| {b}{label}{b} | "
                      + " | ".join(f"{by.get(label, 0):,.0f}" for _, by in cols) + " |")
            print()


def lines(args):
    txt, bench, vmlinux, measurement, *funcs = args
    name_of, entry = symbols(os.path.join(os.path.dirname(vmlinux), "System.map"))
    blocks = raw_windows(txt, bench).get(measurement)
    if blocks is None or not funcs:
        sys.exit(f"insnprof: no measurement {measurement} or no function named")
    sends = sum(e for a, (_, e) in blocks.items() if entry.get(a) in SENDS)
    mine = sorted(a for a in blocks if name_of(a) in funcs)
    # addr2line -i prints each address's inline chain, innermost first,
    # after the address itself (-a), as "function" and "file:line" pairs.
    out = subprocess.run(["addr2line", "-a", "-f", "-i", "-e", vmlinux] +
                         [hex(a) for a in mine], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    where, i = {}, 0
    for a in mine:
        assert int(out[i], 16) == a
        where[a] = f"{out[i + 1]} ({out[i + 2].split(' ')[0].split('/linux/')[-1]})"
        i += 3
        while i < len(out) and out[i] and not out[i].startswith("0x"):
            i += 2
    by = {}
    for a in mine:
        by[where[a]] = by.get(where[a], 0) + blocks[a][0] / sends
    print(f"{measurement}: {', '.join(funcs)}, {sum(by.values()):,.1f} instructions a send\n")
    print("| line (innermost function) | per send |")
    print("|---|---|")
    for k, n in sorted(by.items(), key=lambda kv: -kv[1]):
        if n >= 0.5:
            print(f"| {k} | {n:,.1f} |")


if __name__ == "__main__":
    cmds = {"windows": windows, "report": report, "budget": budget, "lines": lines}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])
