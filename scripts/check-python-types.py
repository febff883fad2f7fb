#!/usr/bin/env python3
"""The kinetic module's types, checked (scripts/test.sh runs this with the
test venv's interpreter, the module installed in it):

1. ``mypy.stubtest kinetic``: the stubs (``kinetic/__init__.pyi``) against
   the module at run time: every public name, parameter and default of the
   module must be in the stubs, as it is;
2. mypy (``--strict``) over ``crates/python/typing/examples.py``: a
   decorated function keeps its parameters and return type, handles carry
   it, and calls the stubs must reject are rejected;
3. mypy over the README's ```python blocks, each written to a file of its
   own, as a user copies it (untyped, so ``check_untyped_defs``): what the
   README shows type-checks against the stubs;
4. mypy over the test project's functions (``crates/python/tests/project``).

Usage: python scripts/check-python-types.py [--keep DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TYPING = os.path.join(REPO, "crates", "python", "typing")
CONFIG = os.path.join(TYPING, "mypy.ini")
ALLOWLIST = os.path.join(TYPING, "stubtest-allowlist.txt")

# What every README block may use without importing it: the blocks after
# the first continue it (``import kinetic``) and use ``os`` freely; names a
# block leaves to the reader are declared in README_PRELUDE below.
README_PRELUDE = '''\
"""Names the README's blocks use without defining them."""

import os
from typing import Any

import kinetic


def load_checkpoint() -> Any:
    """The reader's own checkpoint loading (the retry example)."""
'''


def python_blocks(markdown: str):
    """(first line number, code) of each ```python block of ``markdown``."""
    blocks, code, start = [], None, 0
    for number, line in enumerate(markdown.splitlines(), 1):
        if code is None:
            if re.match(r"^```python\s*$", line):
                code, start = [], number + 1
        elif line.startswith("```"):
            blocks.append((start, "\n".join(code) + "\n"))
            code = None
        else:
            code.append(line)
    if code is not None:
        raise SystemExit("README.md: the ```python block at line %d is not closed" % (start - 1))
    return blocks


def run(step: str, argv) -> bool:
    print("--- %s" % step, flush=True)
    return subprocess.call(argv) == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", help="write the README's blocks to DIR (kept) instead of a temporary folder")
    args = parser.parse_args()
    cache = os.path.join(REPO, "target", "mypy-cache")
    mypy = [sys.executable, "-m", "mypy", "--config-file", CONFIG, "--cache-dir", cache, "--no-error-summary"]
    ok = True

    stubtest = [sys.executable, "-m", "mypy.stubtest", "--mypy-config-file", CONFIG, "kinetic"]
    if os.path.exists(ALLOWLIST):
        stubtest += ["--allowlist", ALLOWLIST]
    # Run from a folder without a kinetic/ of its own, so the installed
    # module (and its stubs) is the one checked.
    with tempfile.TemporaryDirectory() as empty:
        print("--- stubtest: kinetic/__init__.pyi against the module", flush=True)
        ok &= subprocess.call(stubtest, cwd=empty) == 0

    ok &= run("mypy --strict: crates/python/typing/examples.py",
              mypy + ["--strict", os.path.join(TYPING, "examples.py")])

    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        blocks = python_blocks(f.read())
    if not blocks:
        raise SystemExit("README.md has no ```python block: nothing to check")
    with tempfile.TemporaryDirectory(prefix="kinetic-readme-") as scratch:
        ok &= check_readme(mypy, blocks, args.keep or scratch)

    project = os.path.join(REPO, "crates", "python", "tests", "project")
    ok &= run("mypy: the test project's functions (crates/python/tests/project)",
              mypy + ["--check-untyped-defs", project])
    print("types: %s" % ("ok" if ok else "FAILED"), flush=True)
    return 0 if ok else 1


def check_readme(mypy, blocks, folder: str) -> bool:
    """mypy over the README's blocks, each written to a file in ``folder``."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "_readme_prelude.py"), "w", encoding="utf-8") as f:
        f.write(README_PRELUDE)
    files = []
    for start, code in blocks:
        # One line of prelude, so README line = start + file line - 2.
        path = os.path.join(folder, "readme_line_%d.py" % start)
        with open(path, "w", encoding="utf-8") as f:
            f.write("from _readme_prelude import *  # noqa: F403\n" + code)
        files.append(path)
    print("--- mypy: README.md's %d python blocks (line L of readme_line_S.py is README.md line S + L - 2; in %s)"
          % (len(blocks), folder), flush=True)
    return subprocess.call(mypy + ["--check-untyped-defs", "--warn-return-any"] + files, cwd=folder) == 0


if __name__ == "__main__":
    sys.exit(main())
