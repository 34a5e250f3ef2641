"""docs/results.md from results/: bench-report.py --results-md results/
(make results-md). See bench-report.py."""
import glob
import os
import re
import sys

from benchrun import VARIANTS, Run, Table

RESULTS_HEADER = ("<!-- Generated from results/ by make results-md (scripts/bench-report.py "
                  "--results-md results/ > docs/results.md): edit results/NOTE.md, "
                  "results/<run>/NOTE.md or the script, not this file. -->")
# Where results/NOTE.md places the runs' sections: "<!-- runs -->", every
# run not yet placed, or "<!-- runs from NAME -->", those of them named NAME
# or later.
RUNS = re.compile(r"^<!-- runs(?: from (\S+))? -->$")
# Where a run's NOTE.md places tables of its report: "<!-- table TITLE |
# ROW | ... -->", those whose title starts with TITLE, with the rows named
# ROW alone (see row_test()), or whole without any ROW.
TABLE = re.compile(r"^<!-- table (.+?) -->$")
# What a run without a NOTE.md shows of its report: each table whose title
# starts with the first, with the rows named the rest (the whole table
# without any).
DIGEST = (
    ("Throughput: iperf3", "ratio {b}/{a}"),
    ("Stream to a reader", "ratio {b}/{a}"),
    ("Latency: sockperf", "change{vs}"),
    ("Selftests bench", "ratio{vs}"),
    ("Real server: redis", "SET ratio {b}/{a}", "GET ratio {b}/{a}"),
    ("Real server: wrk", "ratio {b}/{a}"),
    ("Many flows",),
    ("Instruction-counted", "ratio {b}/{a}", "change{vs}"),
    ("Instruction-counted system calls",),
    ("Sockets in a sockmap that do not redirect",),
)


def row_test(title, *rows):
    """Whether a table's row, named NAME, is wanted: test(table, name). The
    table's title starts with TITLE and NAME is one of ROWS, in which {v},
    {a} and {b} stand for any kernel and {vs} for any comparison or none;
    every row is, without ROWS."""
    kernel = "(?:" + "|".join(VARIANTS) + ")"
    stand = {"{v}": kernel, "{a}": kernel, "{b}": kernel, "{vs}": f"(?: {kernel}/{kernel})?"}
    names = re.compile("|".join("".join(stand.get(part, re.escape(part))
                                        for part in re.split(r"(\{\w+\})", row))
                                for row in rows))
    return lambda table, name: (table.title.startswith(title)
                                and (not rows or bool(names.fullmatch(name))))


def pick(tables, *tests):
    """The TABLES with rows that pass one of TESTS (row_test()), with those
    rows alone."""
    picked = []
    for t in tables:
        rows = [row for row in t.rows if any(test(t, row[0]) for test in tests)]
        if rows:
            picked.append(Table(t.title, t.columns, rows, t.text))
    return picked


def read_tables(path):
    """The tables of a report.md, as report() gives them."""
    tables = []
    for block in open(path).read().split("\n## ")[1:]:
        title, _, body = block.partition("\n")
        lines = body.split("\n")
        rows = [line[2:-2].split(" | ") for line in lines if line.startswith("| ")]
        if rows:
            start = next(i for i, line in enumerate(lines) if line.startswith("|"))
            tables.append(Table(title, rows[0], [(row[0], row[1:]) for row in rows[1:]],
                                [line + "\n" for line in lines[:start] if line]))
    return tables


def run_section(d, report):
    """The lines of run D's section: its NOTE.md, with the tables it names,
    or a line on its boots and its DIGEST. The tables are rendered from its
    raw data (a measurement missing there shows as missing, as it did in
    the runs before it was measured), or read from its report.md if it has
    none."""
    name = os.path.basename(os.path.normpath(d))
    if glob.glob(os.path.join(d, "raw", "*.json")):
        r = Run(d)
        tables = [item for item in report(r) if isinstance(item, Table)]
    else:
        r, tables = None, read_tables(os.path.join(d, "report.md"))
    note = os.path.join(d, "NOTE.md")
    lines = open(note).read().split("\n") if os.path.exists(note) else []
    title = lines.pop(0)[2:] if lines and lines[0].startswith("# ") else None
    yield f"## results/{name}" + (f": {title}" if title else "") + "\n"
    if not "".join(lines).strip():
        yield boots(r, name) + "\n"
        for t in pick(tables, *(row_test(*digest) for digest in DIGEST)):
            yield from t.lines(None)
    for line in lines:
        m = TABLE.match(line)
        if not m:
            yield line
            continue
        found = pick(tables, row_test(*(part.strip() for part in m.group(1).split("|"))))
        if not found:
            sys.exit(f"bench-report: {note}: no table in the run for {line}")
        for t in found:
            yield from t.lines(None)


def boots(r, name):
    """A line on run R's boots, with a link to its report."""
    link = f"[results/{name}/report.md](../results/{name}/report.md)"
    if not r:
        return f"The run's report: {link}."
    counted = [doc["variant"] for doc in r.icdocs]
    return ("Timed boots: " + ", ".join(f"{len(r.reps[v])} of {v}" for v in r.present)
            + ("; instruction-counted: " + ", ".join(f"{counted.count(v)} of {v}" for v in
                                                    VARIANTS if v in counted) if counted else "")
            + f". The report, with the kernels, the tools and every table: {link}.")


def results_md(top, report):
    """docs/results.md: TOP/NOTE.md with the sections of TOP's runs, newest
    first, where it places them (RUNS); REPORT(run) gives a run's report
    (bench-report.py's report())."""
    runs = sorted((d for d in glob.glob(os.path.join(top, "*", ""))
                   if glob.glob(os.path.join(d, "raw", "*.json"))
                   or os.path.exists(os.path.join(d, "report.md"))), reverse=True)
    out = [RESULTS_HEADER]
    for line in open(os.path.join(top, "NOTE.md")).read().split("\n"):
        m = RUNS.match(line)
        if not m:
            out.append(line)
            continue
        since = m.group(1) or ""
        for d in [d for d in runs if os.path.basename(os.path.normpath(d)) >= since]:
            out.extend(run_section(d, report))
            out.append("")
            runs.remove(d)
    if runs:
        sys.exit(f"bench-report: {top}/NOTE.md places no section for " + ", ".join(runs))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out).strip("\n") + "\n")
