"""Safe extraction of ``context.zip``: entry names, links and size limits."""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile

from .protocol import (
    CHUNK, DEFAULT_EXTRACT_LIMITS, EXTRACT_LIMIT_SETTINGS, MAX_SYMLINK_HOPS, MAX_SYMLINK_TARGET, RunnerError,
)


def is_inside(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` or below it (both already normalised)."""
    try:
        return os.path.commonpath([root, path]) == root
    except ValueError:
        return False


def unsafe_entry_reason(name: str) -> str | None:
    """Why a zip entry name would land outside the workspace, or None when it is safe."""
    if not name or "\x00" in name:
        return "empty or NUL in the name"
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name):
        return "absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "'..' in the path"
    return None


def _limit_error(what: str, key: str, limits: dict) -> RunnerError:
    return RunnerError("refusing context.zip: %s, more than the limit of %s (set by %s)"
                       % (what, _limit_text(key, limits[key]), EXTRACT_LIMIT_SETTINGS[key]))


def _limit_text(key: str, value: int) -> str:
    if key == "max_bytes":
        return "%d bytes (%.1f MiB)" % (value, value / (1 << 20))
    if key == "max_ratio":
        return "%d:1" % value
    return "%d entries" % value


def _resolve_virtual(parts: list, links: dict):
    """Where ``parts`` (components from the workspace root) lead when the
    archive's own symlinks (``links``: path -> target) are followed; None
    when the path leaves the workspace or loops."""
    stack = list(reversed(parts))
    current = []
    hops = 0
    while stack:
        part = stack.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return None
            current.pop()
            continue
        current.append(part)
        target = links.get("/".join(current))
        if target is not None:
            hops += 1
            if hops > MAX_SYMLINK_HOPS or target.startswith("/"):
                return None
            current.pop()
            stack.extend(reversed(target.split("/")))
    return current


def check_archive(archive: zipfile.ZipFile, limits: dict) -> None:
    """Refuses, before anything is written, an archive beyond ``limits``
    (entries, total expanded size, expansion ratio), an entry whose name
    would land outside the workspace, and a symlink whose target leaves it
    once every symlink of the archive is followed, whatever their order."""
    entries = archive.infolist()
    for info in entries:
        reason = unsafe_entry_reason(info.filename)
        if reason:
            raise RunnerError("refusing context entry %r: %s" % (info.filename, reason))
    if len(entries) > limits["max_entries"]:
        raise _limit_error("it holds %d entries" % len(entries), "max_entries", limits)
    expanded = sum(info.file_size for info in entries)
    if expanded > limits["max_bytes"]:
        raise _limit_error("it expands to %d bytes" % expanded, "max_bytes", limits)
    packed = sum(info.compress_size for info in entries)
    if expanded > limits["max_ratio"] * max(packed, 1):
        raise _limit_error("it expands %d bytes into %d (%.0f:1)" % (packed, expanded, expanded / max(packed, 1)),
                           "max_ratio", limits)
    links = {}
    for info in entries:
        mode = (info.external_attr >> 16) if info.create_system == 3 else 0
        if stat.S_ISLNK(mode) and not info.is_dir():
            if info.file_size > MAX_SYMLINK_TARGET:
                raise RunnerError("refusing context entry %r: a symlink target of %d bytes" % (info.filename, info.file_size))
            name = "/".join(p for p in info.filename.split("/") if p not in ("", "."))
            links[name] = archive.read(info).decode("utf-8", "surrogateescape")
    for name, target in links.items():
        parent = name.split("/")[:-1]
        if target.startswith("/") or _resolve_virtual(parent + target.split("/"), links) is None:
            raise RunnerError("refusing context entry %r: symlink to %r points out of the workspace" % (name, target))


def extract_context(zip_path: str, workspace: str, limits: dict | None = None) -> int:
    """Extracts every entry under ``workspace`` once ``check_archive`` passed."""
    os.makedirs(workspace)
    root = os.path.realpath(workspace)
    dir_modes = []
    count = 0
    with zipfile.ZipFile(zip_path) as archive:
        check_archive(archive, limits or DEFAULT_EXTRACT_LIMITS)
        for info in archive.infolist():
            parts = [p for p in info.filename.split("/") if p not in ("", ".")]
            if not parts:
                continue
            target = os.path.join(workspace, *parts)
            parent = os.path.dirname(target)
            if not is_inside(root, os.path.realpath(parent)):
                raise RunnerError("refusing context entry %r: it goes through a symlink out of the workspace" % info.filename)
            os.makedirs(parent, exist_ok=True)
            mode = (info.external_attr >> 16) if info.create_system == 3 else 0
            perms = mode & 0o777
            if info.is_dir():
                if os.path.islink(target):
                    os.unlink(target)
                os.makedirs(target, exist_ok=True)
                if perms:
                    dir_modes.append((target, perms))
            elif stat.S_ISLNK(mode):
                link = archive.read(info).decode("utf-8", "surrogateescape")
                resolved = os.path.realpath(os.path.join(os.path.realpath(parent), link))
                if os.path.isabs(link) or not is_inside(root, resolved):
                    raise RunnerError("refusing context entry %r: symlink to %r points out of the workspace" % (info.filename, link))
                if os.path.lexists(target):
                    os.unlink(target)
                os.symlink(link, target)
            else:
                if os.path.islink(target):
                    os.unlink(target)  # never write through a link
                with archive.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst, CHUNK)
                if perms:
                    os.chmod(target, perms)
            count += 1
    for path, perms in reversed(dir_modes):
        os.chmod(path, perms)
    return count
