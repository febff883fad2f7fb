#!/usr/bin/env python3
"""Reference side of the Rust packager tests.

Writes a context.zip following the archive rules of the Kinetic behaviour
reference (section 11.2) with nothing but the standard library's zipfile:
files through ZipFile.write (so ZipInfo.from_file decides name, date_time,
external_attr and create_system), empty directories through writestr with a
ZipInfo, the plan through writestr with a name. It also dumps the entries of
any zip as JSON so the Rust tests can compare both archives field by field.

Usage:
  zip_reference.py pack ROOT OUT [--exclude PATH]... [--plan-json JSON]
                   [--no-default-excludes]
  zip_reference.py dump ZIP

One intended difference from Kinetic: directories are listed in sorted
order (Kinetic takes the file system's order; the Rust port sorts so that
archives are reproducible), so the entry order can be compared too.
"""

import fnmatch
import hashlib
import json
import os
import sys
import zipfile

NEVER_DIRS = {".git", "__pycache__"}
DEFAULT_DIRS = {
    ".venv",
    "venv",
    "node_modules",
    ".tox",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".ipynb_checkpoints",
}
DEFAULT_FILES = {".DS_Store"}
PLAN_NAME = ".kinetic/plan.json"


def ignore_rules(root):
    path = os.path.join(root, ".kineticignore")
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    rules = []
    for line in text.splitlines():
        pattern = line.strip()
        if not pattern or pattern.startswith("#"):
            continue
        dirs_only = pattern.endswith("/")
        pattern = pattern.rstrip("/").lstrip("/")
        if pattern:
            rules.append((pattern, dirs_only))
    return rules


def is_ignored(rel, rules, is_dir):
    base = rel.rsplit("/", 1)[-1]
    for pattern, dirs_only in rules:
        if dirs_only and not is_dir:
            continue
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(base, pattern):
            return True
    return False


def join(rel_dir, name):
    return name if not rel_dir else rel_dir + "/" + name


def pack(root, out, excludes, plan, defaults):
    root = os.path.normpath(os.path.abspath(root))
    excludes = {os.path.normpath(os.path.abspath(p)) for p in excludes}
    skip_dirs = NEVER_DIRS | (DEFAULT_DIRS if defaults else set())
    skip_files = DEFAULT_FILES if defaults else set()
    rules = ignore_rules(root)
    root_stat = os.stat(root)
    visited = {(root_stat.st_dev, root_stat.st_ino)}
    warnings = []

    with zipfile.ZipFile(
        out, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False
    ) as archive:
        for here, subdirs, names in os.walk(root, followlinks=True):
            subdirs.sort()
            names.sort()
            rel_here = os.path.relpath(here, root)
            rel_here = "" if rel_here == "." else rel_here

            kept = []
            for name in subdirs:
                full = os.path.join(here, name)
                rel = join(rel_here, name)
                if name in skip_dirs or os.path.normpath(full) in excludes:
                    continue
                if is_ignored(rel, rules, True):
                    continue
                try:
                    st = os.stat(full)
                except OSError:
                    warnings.append(["unreadable_dir", rel])
                    continue
                if (st.st_dev, st.st_ino) in visited:
                    warnings.append(["symlink_loop", rel])
                    continue
                visited.add((st.st_dev, st.st_ino))
                kept.append(name)
            subdirs[:] = kept

            wrote_any = False
            for name in names:
                full = os.path.join(here, name)
                rel = join(rel_here, name)
                if name in skip_files or os.path.normpath(full) in excludes:
                    continue
                if is_ignored(rel, rules, False):
                    continue
                if plan is not None and rel == PLAN_NAME:
                    continue
                if os.path.islink(full) and not os.path.exists(full):
                    warnings.append(["broken_symlink", rel])
                    continue
                try:
                    archive.write(full, rel)
                except OSError:
                    warnings.append(["unreadable_file", rel])
                    continue
                wrote_any = True

            if not wrote_any and not kept and here != root:
                info = zipfile.ZipInfo(rel_here + "/")
                info.external_attr = (0o40755 << 16) | 0x10
                archive.writestr(info, b"")

        if plan is not None:
            archive.writestr(PLAN_NAME, json.dumps(plan, indent=2))

    print(json.dumps({"warnings": warnings}))


def dump(path):
    with zipfile.ZipFile(path) as archive:
        first_bad = archive.testzip()
        entries = []
        for info in archive.infolist():
            data = archive.read(info)
            entries.append(
                {
                    "name": info.filename,
                    "is_dir": info.is_dir(),
                    "file_size": info.file_size,
                    "crc": info.CRC,
                    "external_attr": info.external_attr,
                    "create_system": info.create_system,
                    "compress_type": info.compress_type,
                    "compress_size": info.compress_size,
                    "date_time": list(info.date_time),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
    print(json.dumps({"testzip": first_bad, "entries": entries}))


def main(argv):
    if len(argv) >= 2 and argv[0] == "dump":
        dump(argv[1])
        return 0
    if len(argv) >= 3 and argv[0] == "pack":
        root, out, rest = argv[1], argv[2], argv[3:]
        excludes, plan, defaults = [], None, True
        i = 0
        while i < len(rest):
            if rest[i] == "--exclude":
                excludes.append(rest[i + 1])
                i += 2
            elif rest[i] == "--plan-json":
                plan = json.loads(rest[i + 1])
                i += 2
            elif rest[i] == "--no-default-excludes":
                defaults = False
                i += 1
            else:
                raise SystemExit(f"unknown argument {rest[i]!r}")
        pack(root, out, excludes, plan, defaults)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
