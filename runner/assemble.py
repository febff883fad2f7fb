"""Builds the one file the engine ships, ``kinetic_runner.py``, from the
package ``kinetic_runner/`` and the job-side module ``kinetic_job.py``.

The same rules as crates/runner/build.rs (which builds the engine's copy;
a test of that crate checks that both give the same bytes):

* the file is ``#!/usr/bin/env python3``, the package's ``__init__.py``
  without its ``from .module import *`` lines (which give the modules'
  order), a note, ``from __future__ import annotations``, then each module
  under a ``# ---- kinetic_runner/{module}.py`` line, without its
  ``from __future__`` line and its ``from .module import ...`` lines;
* a module imports only modules listed before it, and only by name
  (``from .x import a``); no two modules define the same top-level name;
* the one ``JOB_MODULE_SOURCE = None`` line gets the job module's text as a
  Python string literal.

Usage: ``python3 runner/assemble.py OUT`` (``-`` for stdout).
"""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "kinetic_runner"
FUTURE = "from __future__ import annotations"
PLACEHOLDER = "\nJOB_MODULE_SOURCE = None\n"
ORDER_LINE = re.compile(r"^from \.(\w+) import \*")
IMPORT_LINE = re.compile(r"^from \.(\w*) import (.*)$")
DEFINED = re.compile(r"^(?:def|class) (\w+)|^(\w+)\s*(?::[^=]*)?=(?!=)")
NOTE = ("# Built from runner/kinetic_runner/ (one module per concern, in the\n"
        "# order of its __init__.py) and runner/kinetic_job.py: edit those, not this file.\n")


class AssemblyError(Exception):
    pass


def python_string(text):
    """``text`` as a double-quoted Python literal, escaped as build.rs does."""
    out = ['"']
    for c in text:
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 0x20 or c == "\x7f":
            out.append("\\x%02x" % ord(c))
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def module_body(name, text, earlier):
    """The module's lines without its intra-package imports and its
    ``from __future__`` line; checks that it imports only ``earlier`` modules."""
    kept = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        match = IMPORT_LINE.match(line)
        if line == FUTURE:
            i += 1
            continue
        if match:
            source, names = match.group(1), match.group(2)
            if not source or names.strip() == "*":
                raise AssemblyError("%s/%s.py: %r: import names from a module (from .module import name)"
                                    % (PACKAGE, name, line))
            if source not in earlier:
                raise AssemblyError("%s/%s.py imports .%s, which is not listed before it in __init__.py"
                                    % (PACKAGE, name, source))
            if names.strip().startswith("("):
                while ")" not in lines[i]:
                    i += 1
                    if i == len(lines):
                        raise AssemblyError("%s/%s.py: unclosed %r" % (PACKAGE, name, line))
            i += 1
            continue
        if line.startswith(("from .", "import .")):
            raise AssemblyError("%s/%s.py: %r: import names from a module (from .module import name)"
                                % (PACKAGE, name, line))
        kept.append(line)
        i += 1
    return "\n".join(kept).strip("\n") + "\n"


def assemble(root=HERE):
    package = os.path.join(root, PACKAGE)
    with open(os.path.join(package, "__init__.py"), encoding="utf-8") as f:
        init = f.read()
    with open(os.path.join(root, "kinetic_job.py"), encoding="utf-8") as f:
        job_module = f.read()
    order = []
    head = []
    for line in init.split("\n"):
        match = ORDER_LINE.match(line)
        if match:
            order.append(match.group(1))
        else:
            head.append(line)
    if not order:
        raise AssemblyError("%s/__init__.py lists no module (from .module import *)" % PACKAGE)
    parts = ["#!/usr/bin/env python3\n", "\n".join(head).strip("\n") + "\n", NOTE, "\n", FUTURE + "\n"]
    defined = {}
    for index, name in enumerate(order):
        with open(os.path.join(package, name + ".py"), encoding="utf-8") as f:
            body = module_body(name, f.read(), order[:index])
        for line in body.split("\n"):
            match = DEFINED.match(line)
            if match:
                symbol = match.group(1) or match.group(2)
                owner = defined.setdefault(symbol, name)
                if owner != name:
                    raise AssemblyError("%s is defined by both %s/%s.py and %s/%s.py"
                                        % (symbol, PACKAGE, owner, PACKAGE, name))
        parts.append("\n\n# ---- %s/%s.py\n" % (PACKAGE, name))
        parts.append(body)
    text = "".join(parts)
    if text.count(PLACEHOLDER) != 1:
        raise AssemblyError("the package must hold exactly one `JOB_MODULE_SOURCE = None` line")
    return text.replace(PLACEHOLDER, "\nJOB_MODULE_SOURCE = %s\n" % python_string(job_module), 1)


def main(argv):
    if len(argv) != 1:
        sys.stderr.write("usage: python3 runner/assemble.py OUT (a path, or - for stdout)\n")
        return 2
    try:
        text = assemble()
    except AssemblyError as err:
        sys.stderr.write("runner/assemble.py: %s\n" % err)
        return 1
    if argv[0] == "-":
        sys.stdout.write(text)
    else:
        with open(argv[0], "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
