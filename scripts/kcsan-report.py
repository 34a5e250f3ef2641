#!/usr/bin/env python3
"""Sort the KCSAN reports of a guest's kernel log by whose code they are in.

kcsan-report.py BZIMAGE LOG...

BZIMAGE is the guest's kernel, built by scripts/build-kernel.sh in
TREE/out-CONFIG: its vmlinux is beside it there, and TREE is a git checkout
whose tag "base" is the base, as scripts/tree.sh makes it. A report is the series' when a frame among the first few
of either access (or a function inlined there, found with addr2line in
VMLINUX) lies in a function that the series adds or changes (base..HEAD,
outside tools/), and the base's otherwise. Prints one line per distinct
report ("series" or "base", the title, how often), and exits 1 if any is
the series', 0 otherwise (also when the logs hold no KCSAN report).

A kernel built with KCSAN's KUnit suite (CONFIG_KCSAN_KUNIT_TEST,
kernel/kcsan/kcsan_test.c; scripts/vm-run.sh has it run while booting)
shows in the same logs that the detector catches races here: the reports
the suite provokes are counted apart, and the run fails unless the suite
passed and provoked some.
"""
import collections
import pathlib
import re
import subprocess
import sys

FRAMES = 4  # frames of each access that are looked at
TITLE = re.compile(r"BUG: KCSAN: (.*)$")
# An access line: "read to ...", "write (marked) to ...", "assert no accesses
# to ..." (ASSERT_EXCLUSIVE_*()), "race at unknown origin, with read to ...".
ACCESS = re.compile(r"(read|write|read-write|assert|race at unknown origin).* by (task|interrupt)")
FRAME = re.compile(r"^\s*(?:\[[ \d.]+\]\s*)?([A-Za-z_][\w.]*\+0x[0-9a-f]+/0x[0-9a-f]+)")
# A function definition's first line: at column 0, a name then "(".
DEF = re.compile(r"^[A-Za-z_].*?\b([A-Za-z_]\w*)\s*\(")
SUITE_FILE = "kernel/kcsan/kcsan_test.c"
# KTAP: the suite's result line and its totals.
SUITE_RESULT = re.compile(r"\b(not ok|ok) \d+ kcsan\s*$")
SUITE_TOTALS = re.compile(r"# kcsan: pass:(\d+) fail:(\d+) skip:(\d+) total:(\d+)")


def suite_result(paths):
    """("ok" or "not ok", totals text) of the kcsan KUnit suite, or None."""
    result, totals = None, ""
    for path in paths:
        try:
            text = open(path, errors="replace").read().splitlines()
        except FileNotFoundError:
            continue
        for line in text:
            m = SUITE_RESULT.search(line)
            if m:
                result = m.group(1)
            m = SUITE_TOTALS.search(line)
            if m:
                totals = "pass {}, fail {}, skip {} of {}".format(*m.groups())
    return (result, totals) if result else None


def changed_functions(tree):
    """{file: [(first line, last line, name)]} of the functions (in the
    tree as it is) that hold a line the series added or changed."""
    diff = subprocess.run(["git", "-C", tree, "diff", "-U0", "base", "HEAD", "--", "*.c", "*.h",
                           ":!tools"], capture_output=True, text=True, check=True).stdout
    lines, path = collections.defaultdict(set), None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            path = line[6:] if line.startswith("+++ b/") else None
        m = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
        if m and path:
            start, count = int(m.group(1)), int(m.group(2) or 1)
            lines[path].update(range(start, start + max(count, 1)))
    funcs = {}
    for path, changed in lines.items():
        with open(f"{tree}/{path}", errors="replace") as f:
            text = f.read().splitlines()
        spans, name, start = [], None, None
        for i, line in enumerate(text, 1):
            m = DEF.match(line)
            if m and not line.rstrip().endswith(";"):
                name, start = m.group(1), i
            elif line.startswith("}") and name:
                if any(start <= n <= i for n in changed):
                    spans.append((start, i, name))
                name = None
        funcs[path] = spans
    return funcs


def reports(paths):
    """(title, [frames of the first access], [frames of the second])."""
    for path in paths:
        try:
            text = open(path, errors="replace").read().splitlines()
        except FileNotFoundError:
            continue
        i = 0
        while i < len(text):
            m = TITLE.search(text[i])
            if not m:
                i += 1
                continue
            title, stacks, j = m.group(1), [], i + 1
            while j < len(text) and "=====" not in text[j] and not TITLE.search(text[j]):
                if ACCESS.search(text[j]):
                    stacks.append([])
                else:
                    f = FRAME.match(text[j])
                    if f and stacks and len(stacks[-1]) < FRAMES:
                        stacks[-1].append(f.group(1))
                j += 1
            yield title, stacks
            i = j


def resolve(vmlinux, tree, frames):
    """{frame: [(file, line)]}: where each "func+0x1/0x2" frame is, with the
    functions inlined there, from one nm and one addr2line over VMLINUX."""
    syms = {}
    for line in subprocess.run(["nm", vmlinux], capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            syms.setdefault(parts[2], int(parts[0], 16))
    addrs = {}
    for frame in frames:
        name, off = frame.split("+")
        if name in syms:
            # The return address of a call frame: look just before it.
            addrs[frame] = syms[name] + max(int(off.split("/")[0], 16) - 1, 0)
    if not addrs:
        return {}
    # -a: each address's lines (its own, then one per inlining) follow it.
    out = subprocess.run(["addr2line", "-a", "-i", "-e", vmlinux] + [hex(a) for a in addrs.values()],
                         capture_output=True, text=True).stdout.splitlines()
    groups = []
    for line in out:
        if line.startswith("0x"):
            groups.append([])
        elif groups:
            groups[-1].append(line)
    result = {}
    for frame, group in zip(addrs, groups):
        locs = []
        for line in group:
            m = re.match(r"(\S+?):(\d+)", line)
            if m:
                path = re.sub(r"^.*?/(?=(?:net|include|kernel|mm|lib|arch|fs|drivers)/)", "",
                              m.group(1))
                locs.append((path, int(m.group(2))))
        result[frame] = locs
    return result


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1]).resolve().parents[3]  # out/arch/x86/boot/bzImage
    tree, vmlinux, logs = str(out.parent), str(out / "vmlinux"), sys.argv[2:]
    funcs = changed_functions(tree)
    names = {name for spans in funcs.values() for _, _, name in spans}
    found = collections.OrderedDict()
    for title, stacks in reports(logs):
        if title in found:
            found[title][1] += 1
        else:
            found[title] = [stacks, 1]
    locs = resolve(vmlinux, tree, {f for stacks, _ in found.values() for s in stacks for f in s})
    seen, provoked = collections.OrderedDict(), 0
    for title, (stacks, n) in found.items():
        hits = set()
        frames = [f for s in stacks for f in s]
        if any(path == SUITE_FILE for f in frames for path, _ in locs.get(f, [])):
            provoked += n
            continue
        for frame in frames:
            if frame.split("+")[0] in names:
                hits.add(frame.split("+")[0])
            for path, line in locs.get(frame, []):
                hits.update(name for a, b, name in funcs.get(path, []) if a <= line <= b)
        seen[title] = [sorted(hits), n]
    bad = suite_bad = 0
    with open(out / ".config") as f:
        has_suite = "CONFIG_KCSAN_KUNIT_TEST=y\n" in f.read()
    if has_suite:
        suite = suite_result(logs)
        if not suite:
            print("kcsan: detector self-test: no result of the kcsan KUnit suite in the log")
            suite_bad = 1
        else:
            good = suite[0] == "ok" and provoked > 0
            suite_bad = not good
            print(f"kcsan: detector self-test: kcsan KUnit suite {suite[0]} ({suite[1]}),"
                  f" {provoked} report(s) provoked{'' if good else ': FAIL'}")
    for title, (hits, n) in seen.items():
        owner = "series" if hits else "base"
        bad += bool(hits)
        extra = f" (in {', '.join(hits)})" if hits else ""
        print(f"kcsan: {owner}: {title}: {n} time(s){extra}")
    print(f"kcsan: {len(seen)} distinct report(s), {bad} in code the series adds or changes")
    return 1 if bad or suite_bad else 0


if __name__ == "__main__":
    sys.exit(main())
