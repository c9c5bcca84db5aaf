#!/usr/bin/env python3
"""Checks the unity batches of a build directory against the rules of cmake/unity_build.cmake.

A unity build compiles the files of one library in batches (CMake writes
CMakeFiles/<target>.dir/Unity/unity_<n>_cxx.cxx, one #include per source), so a file shares its
translation unit with the files before it. Which file lands in which batch changes whenever a file
is added, so the rules hold for a whole library, not only for today's batches:
  1. A name declared at the top level of an anonymous namespace is declared by one file of the
     library only. (Two definitions with one signature fail to compile; two overloads compile, and
     a call may silently pick the neighbour's.) Namespace and type aliases may repeat when their
     declarations are identical.
  2. No using-directive at namespace scope; every macro a file #defines it also #undefs.
  3. No function compiled for another instruction set (__attribute__((target(...))),
     target_clones, KVAUDIT_VECTOR_CLONES): such files are compiled alone.
The parsing is line-based and relies on the project's clang-format style (namespace members start
in column 0, bodies are indented). Prints 'file:line: problem' for each problem and exits 1; exits
0 when every batch keeps the rules; exits 77 (ctest: skipped) when the build has no unity batches.

Usage: check_unity_build.py --build DIR [--root DIR]   (--root: the sources to check; default the
repository; batch entries outside it, e.g. generated sources, are ignored)
"""
import argparse
import collections
import glob
import os
import re
import sys

SKIP = 77
ANON_OPEN = re.compile(r"^namespace \{")
ANON_CLOSE = re.compile(r"^\}  // namespace\s*$")
ALIAS = re.compile(r"^(?:namespace (\w+) = .*;|using (\w+) = .*;)\s*$")
TYPE = re.compile(r"^(?:template <.*> )?(?:struct|class|enum class|enum|union) (\w+)")
# A function: its name is the last identifier before the first '(' of a column-0 line.
FUNCTION = re.compile(
    r"^(?:template <.*> )?(?:\[\[\w+\]\] )?(?:static |constexpr |inline |consteval )*"
    r"[\w:<>,\s\*&]+?[\s\*&](\w+)\(")
# A variable or constant: `type name = ...`, `type name{...}`, `type name[...]`.
VARIABLE = re.compile(
    r"^(?:static |constexpr |const |inline |thread_local )*[\w:<>,\s\*&]+?[\s\*&](\w+)\s*"
    r"(?:\[[^\]]*\]\s*)?(?:=|\{|;)")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "operator"}
ISA = re.compile(r"__attribute__\(\(target(?:_clones)?\(|\bKVAUDIT_VECTOR_CLONES\b")
USING_DIRECTIVE = re.compile(r"^using namespace ")
DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)")
UNDEF = re.compile(r"^\s*#\s*undef\s+(\w+)")


def anonymous_names(lines):
    """[(name, line number, declaration text, is_alias)] at the top level of anonymous namespaces."""
    names = []
    inside = False
    for number, line in enumerate(lines, 1):
        if ANON_OPEN.match(line):
            inside = True
            continue
        if inside and ANON_CLOSE.match(line):
            inside = False
            continue
        if not inside or not line.strip() or line[0] in " \t/#}":
            continue
        alias = ALIAS.match(line)
        if alias:
            names.append((alias.group(1) or alias.group(2), number, line.strip(), True))
            continue
        for pattern in (TYPE, FUNCTION, VARIABLE):
            match = pattern.match(line)
            if match and match.group(1) not in KEYWORDS:
                if pattern is VARIABLE and "(" in line.split("=")[0]:
                    break
                names.append((match.group(1), number, line.strip(), False))
                break
    return names


def file_problems(shown, lines):
    problems = []
    defined = {}
    undefined = set()
    for number, line in enumerate(lines, 1):
        if USING_DIRECTIVE.match(line):
            problems.append(f"{shown}:{number}: a using-directive at namespace scope reaches the "
                            "files after it in its batch")
        if ISA.search(line):
            problems.append(f"{shown}:{number}: compiled for another instruction set; such files "
                            "must be compiled alone (cmake/unity_build.cmake)")
        match = DEFINE.match(line)
        if match:
            defined.setdefault(match.group(1), number)
        match = UNDEF.match(line)
        if match:
            undefined.add(match.group(1))
    for macro, number in defined.items():
        if macro not in undefined:
            problems.append(f"{shown}:{number}: macro {macro} is not #undef'd at the end of the "
                            "file; it would reach the files after it in its batch")
    return problems


def batches(build):
    """{target directory: [batched source paths]} from the Unity/ folders of a build tree."""
    by_target = collections.defaultdict(list)
    pattern = os.path.join(build, "**", "Unity", "unity_*")
    for unity in sorted(glob.glob(pattern, recursive=True)):
        if not unity.endswith((".c", ".cxx")):  # the batches, not their objects
            continue
        with open(unity, encoding="utf-8") as f:
            for include in re.findall(r'^#include "([^"]+)"', f.read(), re.M):
                by_target[os.path.dirname(unity)].append(include)
    return by_target


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", required=True)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)))
    args = parser.parse_args()
    root = os.path.realpath(args.root)
    by_target = batches(args.build)
    if not by_target:
        print(f"check_unity_build: SKIPPED: {args.build} has no unity batches "
              "(configured with KVAUDIT_UNITY_BUILD=OFF, or a sanitizer or fuzz build)")
        return SKIP
    problems = []
    files = 0
    for target, sources in sorted(by_target.items()):
        seen = collections.defaultdict(list)  # name -> [(shown, line, text, is_alias)]
        for source in sources:
            path = os.path.realpath(source if os.path.isabs(source) else os.path.join(root, source))
            if not path.startswith(root + os.sep):
                continue
            files += 1
            shown = os.path.relpath(path, root)
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
            problems += file_problems(shown, lines)
            for name, number, text, is_alias in anonymous_names(lines):
                seen[name].append((shown, number, text, is_alias))
        for name, places in sorted(seen.items()):
            files_declaring = {shown for shown, _, _, _ in places}
            if len(files_declaring) < 2:
                continue
            if all(is_alias for *_, is_alias in places) and len({t for _, _, t, _ in places}) == 1:
                continue
            first = places[0]
            for shown, number, _, _ in places[1:]:
                if shown != first[0]:
                    problems.append(f"{shown}:{number}: '{name}' is also declared in an anonymous "
                                    f"namespace of {first[0]}:{first[1]} (same library, "
                                    f"{os.path.basename(os.path.dirname(target))})")
    for problem in problems:
        print(problem)
    print(f"check_unity_build: {len(by_target)} libraries, {files} batched files checked, "
          f"{len(problems)} problem{'s' if len(problems) != 1 else ''}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
