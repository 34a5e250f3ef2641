#!/usr/bin/env python3
"""Check the workbench's sizes: check-size.py [--list]

No function in scripts/ or guest/ over 120 lines (Python: from its def to
its last line, nested functions included; shell: from "name() {" to the
closing "}" at the start of a line), and no source file over 800 lines in
scripts/, guest/, bench/ or tests/. Prints each one over and exits 1 if
there is any; with --list, prints every function's length, longest first.
"""
import ast
import pathlib
import re
import sys

TOP = pathlib.Path(__file__).resolve().parent.parent
MAX_FUNCTION = 120
MAX_FILE = 800
FUNCTION_DIRS = ("scripts", "guest")
FILE_DIRS = ("scripts", "guest", "bench", "tests")
SOURCE = {".py", ".sh", ".c", ".h"}
SHELL_FUNCTION = re.compile(r"^([A-Za-z_][\w-]*)\s*\(\)\s*\{")


def kind(path):
    """"python", "shell" or None, by the file's ending or its #! line."""
    if path.suffix == ".py":
        return "python"
    if path.suffix == ".sh":
        return "shell"
    try:
        first = path.open(errors="replace").readline()
    except OSError:
        return None
    if first.startswith("#!") and "python" in first:
        return "python"
    if first.startswith("#!") and re.search(r"\b(ba)?sh\b", first):
        return "shell"
    return None


def python_functions(path):
    """(name, first line, length) of every function, nested ones too."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node.lineno, node.end_lineno - node.lineno + 1


def shell_functions(path):
    """(name, first line, length) of every function defined at the start
    of a line: to the first "}" that starts a line after it, or one line
    if it closes where it opens."""
    lines = path.read_text().split("\n")
    for i, line in enumerate(lines):
        m = SHELL_FUNCTION.match(line)
        if not m:
            continue
        if line.rstrip().endswith("}"):
            yield m.group(1), i + 1, 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("}")),
                   len(lines) - 1)
        yield m.group(1), i + 1, end - i + 1


def files(dirs):
    for d in dirs:
        for path in sorted((TOP / d).rglob("*")):
            if path.is_file():
                yield path


def functions():
    for path in files(FUNCTION_DIRS):
        k = kind(path)
        found = {"python": python_functions, "shell": shell_functions}.get(k)
        for name, line, length in found(path) if found else ():
            yield path.relative_to(TOP), name, line, length


def main():
    every = sorted(functions(), key=lambda f: -f[3])
    if "--list" in sys.argv[1:]:
        for path, name, line, length in every:
            print(f"{length:5} {path}:{line} {name}()")
        return
    over = [f"{path}:{line}: {name}() is {length} lines (at most {MAX_FUNCTION})"
            for path, name, line, length in every if length > MAX_FUNCTION]
    for path in files(FILE_DIRS):
        if path.suffix in SOURCE or kind(path):
            n = len(path.read_text(errors="replace").splitlines())
            if n > MAX_FILE:
                over.append(f"{path.relative_to(TOP)}: {n} lines (at most {MAX_FILE})")
    for line in over:
        print(line)
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
