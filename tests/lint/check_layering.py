#!/usr/bin/env python3
"""Checks every quoted #include of the repository against the layering rules.

The rules are written once, in the fenced ```layering block of docs/ARCHITECTURE.md: one line per
area (a directory, ending in '/'), then ':' and what its sources may include besides their own
area -- directories (ending in '/'), single files, or '*' for anything. An include is checked when
its path starts with one of the repository's top-level source directories; the longest matching
area decides. Prints every offending include as 'file:line: includes X, which AREA may not use
(allowed: ...)' and exits 1; exits 0 when all includes keep the rules.

Also refused: an included file that does not exist (a rename left behind), and a source file in no
area (every directory must have a rule).

Usage: check_layering.py [--root DIR] [--rules FILE]   (defaults: the repository, its ARCHITECTURE)
"""
import argparse
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inc")
TOP_LEVEL = ("base", "methods", "runners", "statistics", "suite", "tests", "bench", "fuzz", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIPPED_DIRS = {".git", "__pycache__"}


def read_rules(path):
    """{area: [allowed entries]} from the ```layering block of `path`."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    block = re.search(r"```layering\n(.*?)```", text, re.S)
    if not block:
        sys.exit(f"{path}: no ```layering block")
    rules = {}
    for number, line in enumerate(block.group(1).splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            sys.exit(f"{path}: layering line {number}: expected 'AREA/ : allowed ...'")
        areas, allowed = line.split(":", 1)
        entries = allowed.split()
        for area in areas.split():
            if not area.endswith("/"):
                sys.exit(f"{path}: layering line {number}: area '{area}' must end in '/'")
            rules[area] = entries
    return rules


def area_of(path, rules):
    best = None
    for area in rules:
        if path.startswith(area) and (best is None or len(area) > len(best)):
            best = area
    return best


def allowed(target, area, rules):
    if target.startswith(area):
        return True
    for entry in rules[area]:
        if entry == "*":
            return True
        if entry.endswith("/") and target.startswith(entry):
            return True
        if target == entry:
            return True
    return False


def sources(root):
    for top in TOP_LEVEL:
        base = os.path.join(root, top)
        for directory, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build"))
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    full = os.path.join(directory, name)
                    yield os.path.relpath(full, root).replace(os.sep, "/")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    parser.add_argument("--rules", default=None, help="default: ROOT/docs/ARCHITECTURE.md")
    options = parser.parse_args()
    root = options.root
    rules = read_rules(options.rules or os.path.join(root, "docs", "ARCHITECTURE.md"))

    problems = []
    checked = 0
    for path in sources(root):
        area = area_of(path, rules)
        if area is None:
            problems.append(f"{path}: in no layering area (add a rule to docs/ARCHITECTURE.md)")
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = match.group(1)
                if target.split("/", 1)[0] not in TOP_LEVEL:
                    continue  # a system-style or generated include
                checked += 1
                if not os.path.isfile(os.path.join(root, target)):
                    problems.append(f"{path}:{number}: includes {target}, which does not exist")
                elif not allowed(target, area, rules):
                    problems.append(f"{path}:{number}: includes {target}, which {area} may not use "
                                    f"(allowed: {' '.join(rules[area]) or 'nothing of ours'})")
    for problem in problems:
        print(problem)
    print(f"check_layering: {checked} includes checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
