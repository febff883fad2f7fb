"""Data references: download (or mount) what ``spec`` names, with caching."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.parse

from .protocol import DOWNLOAD_WORKERS, NotFound, RunnerError
from .gcs import Storage, parse_uri
from .context import is_inside, unsafe_entry_reason
from .artifacts import sha256_file
from .hf import HF_SCHEME, import_datasets, load_hf_dataset


def is_data_ref(value) -> bool:
    return isinstance(value, dict) and value.get("__data_ref__") is True


def mount_target(mount_root: str, mount_path: str) -> str:
    """Where a volume mounted at ``mount_path`` is placed under ``mount_root``."""
    root = os.path.normpath(os.path.abspath(mount_root))
    target = os.path.normpath(os.path.join(root, mount_path.lstrip("/")))
    if not is_inside(root, target):
        raise RunnerError("mount path %r escapes the mount root" % mount_path)
    return target


def _single_file(directory: str) -> str | None:
    found = []
    for base, _, files in os.walk(directory):
        found.extend(os.path.join(base, f) for f in files)
        if len(found) > 1:
            return None
    return found[0] if len(found) == 1 else None


class DataResolver:
    """Materialises data references (volumes and refs in args/kwargs) as local paths."""

    def __init__(self, storage: Storage, data_root: str, mount_root: str, workspace: str | None = None) -> None:
        self.storage = storage
        self.data_root = data_root
        self.mount_root = mount_root
        self.workspace = workspace
        self._resolved = {}
        self._next = 0
        self.objects = 0
        self._datasets = None

    def resolve_volume(self, mount_path: str, ref: dict) -> str:
        _check_ref(ref)
        if ref.get("fuse"):
            return self._fuse_path(mount_path, ref, True)
        return self._materialize(ref, mount_path)

    def walk(self, value):
        """``value`` with every data reference, at any depth, replaced by its local path."""
        if is_data_ref(value):
            return self.resolve_ref(value)
        if isinstance(value, list):
            return [self.walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self.walk(v) for k, v in value.items()}
        return value

    def resolve_ref(self, ref: dict) -> str:
        _check_ref(ref)
        mount = ref.get("mount_path")
        if ref.get("fuse"):
            return self._fuse_path(mount, ref, bool(ref.get("is_dir")))
        target = self._materialize(ref, mount)
        if mount or ref.get("is_dir"):
            return target
        return _single_file(target) or target

    def _materialize(self, ref: dict, mount: str | None) -> str:
        """Fetches the reference once per (uri, mount, is_dir): into the mount, else into
        ``{data}/{n}`` (``gs://b/x`` the object and ``gs://b/x/`` the directory are two data)."""
        uri = ref["uri"]
        key = (uri, mount, bool(ref.get("is_dir")))
        target = self._resolved.get(key)
        if target is None:
            if mount:
                target = mount_target(self.mount_root, mount)
            else:
                target = os.path.join(self.data_root, str(self._next))
                self._next += 1
            marker = ref.get("cache_marker")
            if uri.startswith(HF_SCHEME):
                self._load_hf(ref, target)
            elif marker is None:
                self._fetch(uri, target, bool(ref.get("is_dir")))
            else:
                self._fetch_cached(uri, marker, target)
            self._resolved[key] = target
        return target

    def _fetch_cached(self, uri: str, marker_uri: str, target: str) -> None:
        """Fetches a data cache entry: exactly the files its marker lists,
        each checked against the size and digest the marker gives."""
        files = read_cache_marker(self.storage, uri, marker_uri)
        os.makedirs(target, exist_ok=True)
        real_target = os.path.realpath(target)
        jobs = []
        for entry in files:
            name = entry["name"]
            dest = os.path.join(target, *name.split("/"))
            if unsafe_entry_reason(name) or not is_inside(real_target, os.path.realpath(os.path.dirname(dest))):
                raise RunnerError("refusing data file %r of %s: it would land outside %s" % (name, uri, target))
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            jobs.append((entry, dest))

        def fetch(job):
            entry, dest = job
            source = "%s/%s" % (uri.rstrip("/"), urllib.parse.quote(entry["name"]) if uri.startswith("file://")
                                else entry["name"])
            try:
                self.storage.download(source, dest)
            except NotFound:
                raise RunnerError("data cache entry %s: %s is missing (the next submit repairs the entry)"
                                  % (uri, entry["name"])) from None
            size, digest = os.path.getsize(dest), entry_digest(entry["name"], dest)
            if size != entry["size"] or digest != entry["digest"]:
                raise RunnerError(
                    "data cache entry %s: %s does not match its marker (%d bytes, digest %s; the marker says %d bytes, %s): it changed after it was uploaded (the next submit repairs the entry)"
                    % (uri, entry["name"], size, digest, entry["size"], entry["digest"]))

        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(max_workers=DOWNLOAD_WORKERS) as pool:
            for _ in pool.map(fetch, jobs):
                pass
        self.objects += len(jobs)

    def _fuse_path(self, mount, ref: dict, is_dir: bool) -> str:
        """The path of a FUSE reference: its mount (placed under the mount
        root, as volumes are), or for one object the file of that name
        inside it (the mount shows the object's directory)."""
        if ref["uri"].startswith(HF_SCHEME):
            raise RunnerError("%s: fuse=True is not supported for Hugging Face datasets (hf:// URIs)" % ref["uri"])
        if not isinstance(mount, str) or not mount:
            raise RunnerError("FUSE data reference %s has no mount_path" % ref["uri"])
        target = mount_target(self.mount_root, mount)
        if not os.path.isdir(target):
            raise RunnerError("FUSE mount %s for %s is missing (the backend mounts it)" % (mount, ref["uri"]))
        if is_dir:
            return target
        name = ref["uri"].rstrip("/").rsplit("/", 1)[-1]
        path = os.path.join(target, name)
        if not name or not os.path.isfile(path):
            raise RunnerError("FUSE mount %s for %s holds no file %r" % (mount, ref["uri"], name))
        return path

    def _load_hf(self, ref: dict, target: str) -> None:
        if self._datasets is None:
            self._datasets = import_datasets(ref["uri"], self.workspace)
        load_hf_dataset(self._datasets, ref["uri"], bool(ref.get("hf_trust_remote_code")), target,
                        os.path.join(self.data_root, "hf-cache"))

    def _fetch(self, uri: str, target: str, is_dir: bool) -> None:
        parsed = parse_uri(uri)
        os.makedirs(target, exist_ok=True)
        if parsed[0] == "file":
            self._copy_local(uri, parsed[1], target)
        elif is_dir or not parsed[2].rstrip("/"):
            self._download_gcs(uri, parsed[1], parsed[2], target)
        else:
            self._download_gcs_object(parsed[1], parsed[2].rstrip("/"), target)

    def _copy_local(self, uri: str, source: str, target: str) -> None:
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
            self.objects += sum(len(files) for _, _, files in os.walk(source))
        elif os.path.isfile(source):
            shutil.copy2(source, os.path.join(target, os.path.basename(source)))
            self.objects += 1
        else:
            raise RunnerError("data %s does not exist" % uri)

    def _download_gcs_object(self, bucket: str, name: str, target: str) -> None:
        """Fetches the single object a ``gs://`` URI without a trailing slash
        names (the reference's rule), into ``target`` under its own name."""
        gcs = self.storage.gcs()
        try:
            gcs.download(bucket, name, os.path.join(target, name.rsplit("/", 1)[-1]))
        except NotFound:
            hint = ""
            if next(iter(gcs.list(bucket, name + "/")), None) is not None:
                hint = ("; objects exist under gs://%s/%s/: for that directory, end the URI with a slash "
                        "(Data(\"gs://%s/%s/\"))" % (bucket, name, bucket, name))
            raise RunnerError("data gs://%s/%s: no such object (without a trailing slash a gs:// URI names "
                              "a single object)%s" % (bucket, name, hint)) from None
        self.objects += 1

    def _download_gcs(self, uri: str, bucket: str, name: str, target: str) -> None:
        gcs = self.storage.gcs()
        base = name.rstrip("/")
        prefix = base + "/" if base else ""
        real_target = os.path.realpath(target)
        jobs = []
        for object_name in gcs.list(bucket, prefix):
            if object_name.endswith("/"):
                continue
            rel = object_name[len(prefix):]
            dest = os.path.join(target, *rel.split("/"))
            if unsafe_entry_reason(rel) or not is_inside(real_target, os.path.realpath(os.path.dirname(dest))):
                raise RunnerError("refusing data object gs://%s/%s: it would land outside %s" % (bucket, object_name, target))
            jobs.append((object_name, dest))
        if not jobs and base:
            # A directory (a trailing slash) with nothing under it: an error,
            # never the object of the same name fetched instead.
            hint = ""
            if gcs.exists(bucket, base):
                hint = ("; gs://%s/%s is a single object: to fetch it, leave out the trailing slash"
                        % (bucket, base))
            raise RunnerError("data gs://%s/%s/: no objects under this directory%s" % (bucket, base, hint))
        for _, dest in jobs:
            os.makedirs(os.path.dirname(dest), exist_ok=True)
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(max_workers=DOWNLOAD_WORKERS) as pool:
            futures = [pool.submit(gcs.download, bucket, object_name, dest) for object_name, dest in jobs]
            try:
                for future in concurrent.futures.as_completed(futures):
                    future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        self.objects += len(jobs)


def entry_digest(name: str, path: str) -> str:
    """``SHA-256(name ‖ 0x00 ‖ bytes)``: a file's part of a content hash."""
    return sha256_file(path, prefix=name.encode("utf-8") + b"\0")


def read_cache_marker(storage: Storage, uri: str, marker_uri: str) -> list:
    """The files a data cache entry holds, from its marker; RunnerError when
    the marker is missing or does not describe the entry (its listing must
    hash to the entry's content hash, the last part of both URIs)."""
    expected = uri.rstrip("/").rsplit("/", 1)[-1]
    try:
        raw = storage.read_bytes(marker_uri)
    except NotFound:
        raise RunnerError("data cache entry %s has no marker at %s (its upload never finished, or it was removed)"
                          % (uri, marker_uri)) from None
    except (OSError, RunnerError) as err:
        raise RunnerError("data cache marker %s cannot be read: %s" % (marker_uri, err)) from None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except ValueError as err:
        raise RunnerError("data cache marker %s is not JSON: %s" % (marker_uri, err)) from None
    files = doc.get("files") if isinstance(doc, dict) else None
    kind = doc.get("kind") if isinstance(doc, dict) else None
    if (not isinstance(files, list) or kind not in ("dir", "file") or doc.get("hash") != expected
            or marker_uri.rstrip("/").rsplit("/", 1)[-1] != expected):
        raise RunnerError("data cache marker %s does not describe the entry %s" % (marker_uri, uri))
    import hashlib
    listing = hashlib.sha256(b"dir:" if kind == "dir" else b"file:")
    for entry in files:
        if (not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]
                or type(entry.get("size")) is not int or not isinstance(entry.get("digest"), str)
                or not re.match(r"^[0-9a-f]{64}$", entry["digest"])):
            raise RunnerError("data cache marker %s has an unusable file entry: %r" % (marker_uri, entry))
        listing.update(bytes.fromhex(entry["digest"]))
    if listing.hexdigest() != expected:
        raise RunnerError("data cache marker %s lists files that do not hash to %s" % (marker_uri, expected))
    return files


def _check_ref(ref: dict) -> None:
    if not isinstance(ref.get("uri"), str) or not ref["uri"]:
        raise RunnerError("data reference without a 'uri': %r" % (ref,))
    mount = ref.get("mount_path")
    if mount is not None and not (isinstance(mount, str) and mount.startswith("/")):
        raise RunnerError("data reference %s: mount_path must be an absolute path, not %r" % (ref["uri"], mount))
