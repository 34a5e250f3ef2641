#!/usr/bin/env python3
"""Summarise selftest logs from a VM run: selftests-summary.py RESULTS_DIR

Reads test_sockmap.log, test_progs.log, apps.log, stress.log and fuzz.log
(whichever exist), prints one line per test unit that did not pass, a
table of counts per program, and a final 'N passed, N failed, N skipped' line. Exits 1 if anything failed, if a
program exited non-zero, or if a log is missing or holds no result.
The guest kernel log is one more unit: it fails on any splat (see
splat-scan.sh) or if the guest did not save it.
With --list it prints every unit and its result, for comparing runs.
"""
import os
import pathlib
import re
import subprocess
import sys

SPLAT_SCAN = pathlib.Path(__file__).with_name("splat-scan.sh")

# test_progs: "#12/3    sockmap_basic/sockmap create_update_free:OK"
# or, for a test without subtests, "#12      sockmap_ktls:OK".
PROGS_SUB = re.compile(r"^#\s*\d+/\d+\s+(\S.*?):(OK|SKIP|FAIL)\s*$")
PROGS_TEST = re.compile(r"^#\s*\d+\s+(\S+):(OK|SKIP|FAIL)")
# test_sockmap: "#12/ 3  sockmap:txmsg test ingress redir:OK"
SOCKMAP = re.compile(r"^#\s*\d+/\s*\d+\s+(\S.*):(OK|FAIL)\s*$")
# tests/stress: "stress: bytes verified: OK  # 16 streams, ..."
STRESS = re.compile(r"^stress: (\S.*?): (OK|FAIL|SKIP)(?:  # .*)?$")
# tests/fuzz: "fuzz: sequences: OK  # 9 sequences ..."
FUZZ = re.compile(r"^fuzz: (\S.*?): (OK|FAIL|SKIP)(?:  # .*)?$")
# tests/apps: "apps: nginx sendfile on, files verified: OK  # ..."
APPS = re.compile(r"^apps: (\S.*?): (OK|FAIL|SKIP)(?:  # .*)?$")


def parse_test_progs(text):
    units, tests, with_subtests, failed_subtests = {}, {}, set(), set()
    for line in text.splitlines():
        if line.startswith("All error logs:"):
            break  # failures are repeated below this line
        m = PROGS_SUB.match(line)
        if m:
            # Some tests print one subtest name more than once (an IPv4 and
            # an IPv6 run, say): number the repeats so that each counts.
            name, n = m.group(1), 1
            while name in units:
                n += 1
                name = f"{m.group(1)} [{n}]"
            units[name] = m.group(2)
            with_subtests.add(m.group(1).split("/")[0])
            if m.group(2) == "FAIL":
                failed_subtests.add(m.group(1).split("/")[0])
            continue
        m = PROGS_TEST.match(line)
        if m:
            tests[m.group(1)] = m.group(2)
    for name, result in tests.items():
        if name not in with_subtests:
            units[name] = result
        elif result == "FAIL" and name not in failed_subtests:
            # A failure outside any subtest; a test with a failed
            # subtest fails for it, and that subtest counts.
            units[name + " (outside subtests)"] = result
    return units


def by_line(regex):
    """A parser for logs with one 'name result' line a unit."""
    return lambda text: {m.group(1): m.group(2) for m in map(regex.match, text.splitlines()) if m}


PARSERS = {"test_sockmap": by_line(SOCKMAP), "test_progs": parse_test_progs,
           "apps": by_line(APPS), "stress": by_line(STRESS), "fuzz": by_line(FUZZ)}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    listing = "--list" in sys.argv
    results = pathlib.Path(args[0])
    totals = {"OK": 0, "FAIL": 0, "SKIP": 0}
    bad = False
    seen = 0
    for prog, parse in PARSERS.items():
        log = results / f"{prog}.log"
        if not log.exists():
            continue
        seen += 1
        units = parse(log.read_text(errors="replace"))
        status = (results / f"{prog}.status").read_text().strip() if (results / f"{prog}.status").exists() else "missing"
        counts = {k: sum(1 for v in units.values() if v == k) for k in totals}
        for k in totals:
            totals[k] += counts[k]
        for name, result in sorted(units.items()):
            if listing:
                print(f"{prog}: {name}: {result}")
            elif result != "OK":
                print(f"  {result:4} {prog}: {name}")
        if not listing:
            print(f"{prog}: {counts['OK']} passed, {counts['FAIL']} failed, "
                  f"{counts['SKIP']} skipped, exit status {status}")
        if not units or status != "0":
            bad = True
    # The kernel log: clean, and saved (a guest that died saves none).
    kernel = results / "kernel"  # the guest's bzImage, which KCSAN reports need
    env = dict(os.environ, SPLAT_KERNEL=kernel.read_text().strip()) if kernel.exists() else None
    scans = [subprocess.run([str(SPLAT_SCAN), *args], capture_output=True, text=True, env=env)
             for args in ([str(results / "dmesg.txt"), str(results / "kmemleak.txt")],
                          ["-k", str(results / "console.log")])]
    clean = (results / "dmesg.txt").exists() and all(s.returncode == 0 for s in scans)
    # A KCSAN kernel: the scan's sorting of its reports (the base's do not
    # fail a run).
    for line in scans[0].stdout.splitlines():
        if line.startswith("kcsan: "):
            print(f"  {line}")
    result = "OK" if clean else "FAIL"
    totals[result] += 1
    if listing:
        print(f"kernel: log without splats: {result}")
    elif not clean:
        print("  FAIL kernel: log has splats or was not saved (see dmesg.txt, console.log)")
    if not seen:
        print("no test logs found in", results)
        bad = True
    if not listing:
        print(f"{totals['OK']} passed, {totals['FAIL']} failed, {totals['SKIP']} skipped")
    return 1 if bad or totals["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
