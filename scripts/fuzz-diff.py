#!/usr/bin/env python3
"""Compare two kernels' sequence-tester traces, seed by seed.

    fuzz-diff.py [--known FILE] REFERENCE_TRACES TESTED_TRACES

Each argument is a directory of SEED.trace files (sockmap_fuzz --trace-dir)
or one file holding several ('=== label' sections, --trace). For every
sequence both kernels ran it prints how each ended and the first
difference of their outcomes, after normalisation: what the kernel may
legitimately decide differently is left out (how many bytes a send took,
whether bytes sent over TCP had arrived yet, byte counts of reads), and
what follows from an earlier legitimate difference (a read the model
expected something different for, an operation skipped in one run only)
is counted apart as derived. A missing wake-up the series' moderation
allows ('moderated') against an event is listed apart too.

A failure of the reference whose kind FILE lists is a known fault of it
(tests/fuzz/known-faults.txt), as is one whose KIND@LABEL it lists (a
fault found in that sequence alone, a regression list's), or whose
KIND~"PATTERN" (a failure of that kind whose message holds the pattern:
a kernel log line, in any sequence); one it does not list is printed as
new.
Exit status 1 if the tested kernel failed any sequence or a difference
remains that is neither legitimate nor derived.
"""
import argparse
import pathlib
import re
import sys

OP = re.compile(r"^\s*(\d+) (\S+)\s+(.*?)\s+=> (.*)$")
FAIL = re.compile(r"^FAIL (\S+): (.*)$")
NOTE = re.compile(r"^  (known|unsure|late): (.*)$")


def sections(path):
    """{label: [lines]} of a trace directory or file."""
    path = pathlib.Path(path)
    # failed-LABEL.trace: a kept copy of a failed run of LABEL (the tester's
    # --trace-dir), not a sequence of its own.
    files = (sorted(f for f in path.glob("*.trace") if not f.name.startswith("failed-"))
             if path.is_dir() else [path])
    out = {}
    for f in files:
        label = None
        for line in f.read_text(errors="replace").splitlines():
            m = re.match(r"^=== (\S+)$", line)
            if m:
                label = m.group(1)
                out[label] = []
            elif label:
                out[label].append(line)
    return out


def norm(kind, result):
    """(normalised outcome, the model's expectation) of one operation."""
    exp = ""
    m = re.search(r" exp=(\S+)$", result)
    if m:
        exp, result = m.group(1), result[:m.start()]
    result = result.replace(" sigio-moderated", "")
    words = re.sub(r"\d+(/\d+)?", "", result).replace("nb:", "").split()
    first = words[0] if words else ""
    if kind in ("send", "sendfile"):
        # How much a send took is each kernel's own (the series has
        # backpressure); a send that waited for room may also be cut
        # short by a signal the tester's O_ASYNC sockets got meanwhile.
        sent = ("ok", "partial", "eagain", "err:EINTR")
        return ("sent" if first in sent else first), exp
    if kind != "read":
        return first, exp
    if "moderated" in result:
        return "moderated", exp
    if re.search(r"\beof\b", result):
        return "eof", exp
    if "reset" in result or "err:" in result:
        return " ".join(w for w in words if w.startswith("err:") or w == "reset"), exp
    if exp in ("ing", "eof"):
        return " ".join(words), exp
    return "any", exp   # TCP bytes in flight, or nothing due: timing


def parse(lines):
    ops, fail, notes = [], None, []
    for line in lines:
        m = OP.match(line)
        if m:
            ops.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
            continue
        m = FAIL.match(line)
        if m and not fail:
            fail = (m.group(1), m.group(2))
            continue
        m = NOTE.match(line)
        if m:
            notes.append((m.group(1), m.group(2)))
    return ops, fail, notes


def compare(ref, tst):
    """(first unexplained difference or None, legitimate count, derived count, first any)."""
    legit = derived = 0
    first_any = None
    for a, b in zip(ref, tst):
        na, ea = norm(a[1], a[3])
        nb, eb = norm(b[1], b[3])
        if (na, ea) == (nb, eb):
            continue
        what = f"op {a[0]} {a[1]} {a[2]}: {a[3]!r} vs {b[3]!r}"
        first_any = first_any or what
        if {na, nb} <= {"moderated", "event:data", "late:data", "any"} or (
                "moderated" in (na, nb)):
            legit += 1
        elif ea != eb or na.startswith("skip:") or nb.startswith("skip:"):
            derived += 1
        else:
            return what, legit, derived, first_any
    return None, legit, derived, first_any


def load_known(path):
    """[(kind, label, pattern, what)] of FILE's lines: KIND, KIND@LABEL or
    KIND~"PATTERN", then what the fault is."""
    known = []
    if path and pathlib.Path(path).exists():
        for line in pathlib.Path(path).read_text().splitlines():
            m = re.match(r'^(\S+?)(?:@(\S+)|~"([^"]+)")?\s+(.*)$', line.strip())
            if m and not line.startswith("#"):
                known.append((m[1], m[2], m[3], m[4]))
    return known


def known_fault(known, kind, label, message):
    """What FILE says of a reference failure, or None: its KIND@LABEL line
    first, then a KIND~"PATTERN" line whose pattern the message holds, then
    its KIND line."""
    for match in (lambda lab, pat: lab == label, lambda lab, pat: pat and pat in message,
                  lambda lab, pat: not lab and not pat):
        for k, lab, pat, what in known:
            if k == kind and match(lab, pat):
                return what
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--known", help="known faults of the reference kernel")
    ap.add_argument("reference")
    ap.add_argument("tested")
    args = ap.parse_args()
    known = load_known(args.known)
    ref, tst = sections(args.reference), sections(args.tested)
    bad = 0
    counts = {"same": 0, "legit": 0, "differ": 0}
    for label in sorted(set(ref) & set(tst), key=lambda s: (len(s), s)):
        (ro, rf, rn), (to, tf, tn) = parse(ref[label]), parse(tst[label])
        diff, legit, derived, first_any = compare(ro, to)
        ends = []
        if rf:
            what = known_fault(known, rf[0], label, rf[1])
            tag = f"known: {what}" if what else "NEW to the list"
            ends.append(f"reference FAIL {rf[0]} ({tag}): {rf[1]}")
        if tf:
            ends.append(f"tested FAIL {tf[0]}: {tf[1]}")
            bad = 1
        line = f"{label}: " + ("; ".join(ends) if ends else "both OK")
        if diff:
            counts["differ"] += 1
            line += f"; first difference: {diff}"
            bad = 1
        elif first_any:
            counts["legit"] += 1
            line += f"; {legit} legitimate and {derived} derived difference(s), first: {first_any}"
        else:
            counts["same"] += 1
            line += "; same outcomes"
        kn = sum(1 for k, _ in tn if k == "known")
        if kn:
            line += f"; tested: {kn} known base behaviour(s)"
        print(line)
    only = sorted(set(ref) ^ set(tst))
    if only:
        print("run on one kernel only:", " ".join(only))
    print(f"fuzz-diff: {len(set(ref) & set(tst))} sequences compared: {counts['same']} the same, "
          f"{counts['legit']} with legitimate differences only, {counts['differ']} differing")
    return bad


if __name__ == "__main__":
    sys.exit(main())
