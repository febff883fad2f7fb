"""Every ```python block of README.md and docs/*.md, run as a user runs a
script: with this interpreter (the module built by ``maturin develop``), in
a new folder holding a copy of the repository's ``examples/``, on the local
backend.

The blocks follow the markers of ``crates/cli/tests/docs_commands.rs``
(which runs the shell blocks): ``<!-- run -->`` just before a block runs it,
``<!-- not run: WHY -->`` skips it for that reason, and a block with neither
fails ``test_every_python_block_is_marked``."""

import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))

FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*(run|not run:\s*(.*?))\s*-->\s*\Z", re.S)


@pytest.fixture(params=["local"])
def backend(request):
    """The blocks say their backend (``backend="local"`` or the default, which
    is local without a cluster), so they run once, not on the fake cloud too."""
    return request.param


def _pages():
    docs = sorted(f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
    return ["README.md"] + ["docs/" + f for f in docs]


def _python_blocks():
    """(page:line, marker, reason, source) of each python block; marker is
    ``run``, ``not run`` or None."""
    blocks = []
    for page in _pages():
        with open(os.path.join(REPO, page)) as f:
            text = f.read()
        for m in FENCE.finditer(text):
            if m.group(1) != "python":
                continue
            line = text.count("\n", 0, m.start()) + 1
            before = text[:m.start()].rstrip("\n")
            last = before.rsplit("\n", 1)[-1]
            marked = MARKER.search(last)
            if marked is None:
                blocks.append(("%s:%d" % (page, line), None, None, m.group(2)))
            elif marked.group(1) == "run":
                blocks.append(("%s:%d" % (page, line), "run", None, m.group(2)))
            else:
                blocks.append(("%s:%d" % (page, line), "not run", marked.group(2), m.group(2)))
    return blocks


BLOCKS = _python_blocks()


def test_every_python_block_is_marked():
    unmarked = [place for place, marker, _, _ in BLOCKS if marker is None]
    assert not unmarked, "python blocks with neither <!-- run --> nor <!-- not run: WHY -->: %s" % unmarked
    not_run = [(place, why) for place, marker, why, _ in BLOCKS if marker == "not run"]
    print("%d python blocks: %d run, %d not run" % (len(BLOCKS), len(BLOCKS) - len(not_run), len(not_run)))
    for place, why in not_run:
        print("  not run: %s: %s" % (place, why))
    assert all(why for _, why in not_run)


@pytest.mark.parametrize("place,source", [(p, s) for p, marker, _, s in BLOCKS if marker == "run"],
                         ids=[p for p, marker, _, _ in BLOCKS if marker == "run"])
def test_python_block_runs(place, source, tmp_path):
    folder = tmp_path / "proj"
    shutil.copytree(os.path.join(REPO, "examples"), folder / "examples")
    script = folder / "block.py"
    script.write_text(source)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=str(folder))
    assert out.returncode == 0, "%s failed:\n%s%s" % (place, out.stdout, out.stderr)
    # What a block's comments promise it prints (`print(x)  # value`) is checked.
    for line in source.splitlines():
        promised = re.match(r"\s*print\(.*\)\s*#\s*(.+)$", line)
        if promised:
            assert promised.group(1).strip() in out.stdout.splitlines(), (place, promised.group(1), out.stdout)
