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
"""
import bisect
import glob
import json
import os
import sys

SENDS = ("__x64_sys_sendto", "__x64_sys_sendmsg", "__x64_sys_write")
ROWS = 25


def symbols(path):
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
    return addrs, names, end


def windows(args):
    txt, sysmap, bench = args
    addrs, names, etext = symbols(sysmap)
    entry = {a: n for a, n in zip(addrs, names)}
    marks = json.load(open(bench)).get("profile_windows", [])
    found = []
    cur = None
    for line in open(txt):
        if line.startswith("window"):
            cur = {"insns": {}, "calls": {}}
            found.append(cur)
            continue
        addr, insns, execs = line.split()
        addr, insns = int(addr, 16), int(insns)
        if addr < 1 << 63:
            name = "(user space)"
        elif addr < addrs[0] or addr >= etext:
            name = "(outside the kernel image: BPF programs, modules)"
        else:
            name = names[bisect.bisect_right(addrs, addr) - 1]
        cur["insns"][name] = cur["insns"].get(name, 0) + insns
        if entry.get(addr) in SENDS:
            cur["calls"][entry[addr]] = int(execs)
    # Whatever called getppid() before the first measurement (the guest's
    # start-up does, twice) only adds windows ahead of them.
    skip = len(found) - 2 * len(marks)
    if skip < 0 or skip % 2:
        sys.exit(f"insnprof: {len(found)} windows for {len(marks)} marked measurements")
    out = {}
    for i, m in enumerate(marks):
        w = found[skip + 2 * i + 1]
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


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("windows", "report"):
        sys.exit(__doc__)
    {"windows": windows, "report": report}[sys.argv[1]](sys.argv[2:])
