#!/usr/bin/env python3
"""The GPU tests read their model and golden paths through tests/cuda/test_paths.h.

tests/device/check.sh runs the GPU test binaries from a copied tree on another machine, where the
paths compiled in (KVAUDIT_*_DIR, KVAUDIT_*_DEFAULT: the source tree that built them) do not
exist; it sets environment variables instead, which only the functions of test_paths.h read. A
test that uses one of those macros directly loads from the build machine's path and fails there
(every capture test did once). This check names each such use: file:line and the macro.

Usage: check_gpu_test_paths.py --root SOURCE_DIR   (exit 0: none; 1: problems listed)
"""
import argparse
import pathlib
import re
import sys

MACRO = re.compile(r"\bKVAUDIT_[A-Z0-9_]*(?:_DIR|_DEFAULT)\b")
ALLOWED = {"tests/cuda/test_paths.h"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    a = ap.parse_args()
    root = pathlib.Path(a.root)
    problems = checked = 0
    for path in sorted((root / "tests" / "cuda").rglob("*")):
        if path.suffix not in (".cpp", ".cu", ".h", ".cuh"):
            continue
        rel = path.relative_to(root).as_posix()
        checked += 1
        if rel in ALLOWED:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("//", 1)[0]
            for m in MACRO.finditer(code):
                print("%s:%d: uses %s directly; read the path through tests/cuda/test_paths.h"
                      % (rel, number, m.group(0)))
                problems += 1
    print("check_gpu_test_paths: %d files checked, %d problem%s"
          % (checked, problems, "" if problems == 1 else "s"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
