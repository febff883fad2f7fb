#!/usr/bin/env python3
"""Kinetic runner, protocol v1 (see docs/runner-protocol.md).

Runs one job inside a pod (or as a local child process): downloads and
verifies the job's artifacts, installs requirements, extracts the context,
applies the packaging plan, sets the environment, resolves data references,
calls the user's function (or runs the user's command) and writes a JSON
result. Python 3.9+, standard library only.

    python3 -u kinetic_runner.py --spec URI [--workdir DIR] [--mount-root DIR]

Runner log lines go to stderr as ``[kinetic] {phase}: ...``; the user's
stdout and stderr pass through untouched. Environment values are never
printed.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import stat
import sys
import threading
import time
import urllib.parse
import zipfile

# Modules only some jobs need (commands, requirements, pickles, errors,
# data caches, big artifacts) are imported where they are used: every import
# here is paid by every job before it starts.

PROTOCOL = 1

STARTUP = "startup"
DOWNLOAD = "artifact download"
VERIFY = "artifact verification"
INSTALL = "requirements install"
EXTRACT = "context extract"
ENVIRONMENT = "environment setup"
DATA = "data resolve"
LOAD = "entrypoint load"
DEBUG = "debugger setup"
EXECUTE = "execute"
SERIALIZE = "result serialization"
UPLOAD = "result upload"  # log only: an upload failure cannot be reported in a result

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INVOCATION = 2

CHUNK = 1 << 20
# What context.zip may expand to, unless spec.extract_limits says otherwise
# (the client's KINETIC_CONTEXT_MAX_MB, _MAX_FILES and _MAX_RATIO settings).
DEFAULT_EXTRACT_LIMITS = {"max_bytes": 4 << 30, "max_entries": 50000, "max_ratio": 200}
# The settings that set each limit, named in the errors.
EXTRACT_LIMIT_SETTINGS = {"max_bytes": "KINETIC_CONTEXT_MAX_MB", "max_entries": "KINETIC_CONTEXT_MAX_FILES",
                          "max_ratio": "KINETIC_CONTEXT_MAX_RATIO"}
MAX_SYMLINK_TARGET = 4096
MAX_SYMLINK_HOPS = 40
DOWNLOAD_WORKERS = 8
REPR_LIMIT = 2000
STDERR_TAIL_LINES = 40
DEFAULT_GCS_ENDPOINT = "https://storage.googleapis.com"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
_HOST_INDEX_RE = re.compile(r"^[+-]?[0-9]+$")


# --------------------------------------------------------------------------
# Logging


def log(phase: str, message: str) -> None:
    """Runner lines on the real stderr, whatever the user did to sys.stderr.

    Every line of a multi-line message (a traceback) carries the prefix, so
    a reader can tell the runner's lines from the job's own output.
    """
    stream = sys.__stderr__ or sys.stderr
    first, *rest = message.rstrip("\n").split("\n")
    text = "[kinetic] %s: %s\n" % (phase, first) + "".join("[kinetic]   %s\n" % line for line in rest)
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def write_stderr(text: str) -> None:
    """``text`` on the real stderr, as far as it goes: a full disk or a
    closed stream must not keep the runner from writing its result."""
    try:
        stream = sys.__stderr__ or sys.stderr
        stream.write(text)
        stream.flush()
    except (OSError, ValueError, AttributeError):
        pass


def warn(phase: str, message: str) -> None:
    log(phase, "warning: " + message)


def flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


class RunnerError(Exception):
    """A failure the runner detected itself; reported with type ``RunnerError``."""


class StorageError(RunnerError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class NotFound(StorageError):
    pass


# --------------------------------------------------------------------------
# Storage: gs:// (GCS XML API), file:// and absolute paths


def parse_uri(uri: str) -> tuple:
    """``("gs", bucket, name)`` or ``("file", path)``; RunnerError otherwise."""
    if not isinstance(uri, str) or not uri:
        raise RunnerError("not a storage URI: %r" % (uri,))
    if uri.startswith("gs://"):
        bucket, _, name = uri[len("gs://"):].partition("/")
        if not bucket:
            raise RunnerError("gs:// URI without a bucket: %r" % uri)
        return ("gs", bucket, name)
    if uri.startswith("file://"):
        parts = urllib.parse.urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise RunnerError("file:// URI with a remote host: %r" % uri)
        path = urllib.parse.unquote(parts.path)
        if not os.path.isabs(path):
            raise RunnerError("file:// URI without an absolute path: %r" % uri)
        return ("file", path)
    if os.path.isabs(uri):
        return ("file", uri)
    raise RunnerError("unsupported URI (expected gs://, file:// or an absolute path): %r" % uri)


def import_http() -> None:
    """Imports the HTTP, TLS and XML modules that only ``gs://`` and the
    metadata server need, on first use: a job on ``file://`` never loads them."""
    global ElementTree, _TRANSIENT_ERRORS, http, socket, urllib
    import http.client
    import socket
    import urllib.error
    import urllib.request
    import xml.etree.ElementTree as ElementTree
    _TRANSIENT_ERRORS = (
        urllib.error.URLError,
        http.client.HTTPException,
        ConnectionError,
        TimeoutError,
        socket.timeout,
    )


def _no_proxy_opener() -> urllib.request.OpenerDirector:
    import_http()
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Retrying:
    """Runs a request function, retrying transient failures with backoff.

    Transient: HTTP 429 and 5xx, connection errors and timeouts. 404 raises
    NotFound at once; other HTTP errors raise StorageError at once.
    """

    def __init__(self, attempts: int = 5, base_delay: float = 0.25, max_delay: float = 8.0) -> None:
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay

    def call(self, what: str, fn, on_unauthorized=None):
        import_http()
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            try:
                return fn()
            except urllib.error.HTTPError as err:
                detail = _http_error_detail(err)
                if err.code == 404:
                    raise NotFound("%s: not found (HTTP 404)" % what, 404) from None
                if err.code == 401 and on_unauthorized is not None and not refreshed:
                    refreshed = True
                    on_unauthorized()
                    attempt -= 1
                    continue
                if err.code != 429 and not 500 <= err.code <= 599:
                    raise StorageError("%s: HTTP %d %s" % (what, err.code, detail), err.code) from None
                last = "HTTP %d %s" % (err.code, detail)
                status = err.code
            except _TRANSIENT_ERRORS as err:
                last = "%s: %s" % (type(err).__name__, err)
                status = None
            if attempt >= self.attempts:
                raise StorageError("%s: failed after %d attempts: %s" % (what, attempt, last), status)
            time.sleep(min(self.base_delay * (2 ** (attempt - 1)), self.max_delay))


def _http_error_detail(err: urllib.error.HTTPError) -> str:
    try:
        body = err.read(2000).decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the detail is best effort
        body = ""
    finally:
        try:
            err.close()
        except Exception:  # noqa: BLE001
            pass
    match = re.search(r"<Code>([^<]*)</Code>", body)
    return match.group(1) if match else (err.reason or "")


class MetadataToken:
    """OAuth token from the GCE metadata server, cached until near expiry."""

    def __init__(self, host: str | None = None, retrying: Retrying | None = None, clock=time.monotonic) -> None:
        self.host = host or os.environ.get("GCE_METADATA_HOST") or "metadata.google.internal"
        self.retrying = retrying or Retrying()
        self.clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        self._lock = threading.Lock()  # data downloads run in a thread pool
        self._opener = _no_proxy_opener()  # the metadata server is never behind a proxy

    def invalidate(self) -> None:
        self._token = None

    def authorization(self) -> str:
        with self._lock:
            if self._token is None or self.clock() >= self._expires_at - 60:
                self._fetch()
            return "Bearer " + str(self._token)

    def _fetch(self) -> None:
        url = "http://%s%s" % (self.host, TOKEN_PATH)

        def get():
            req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
            with self._opener.open(req, timeout=10) as resp:
                return json.loads(resp.read().decode("utf-8"))

        doc = self.retrying.call("metadata server token", get)
        if not isinstance(doc, dict) or not isinstance(doc.get("access_token"), str):
            raise StorageError("metadata server token: unexpected answer")
        self._token = doc["access_token"]
        self._expires_at = self.clock() + float(doc.get("expires_in") or 0)


class Gcs:
    """The few GCS XML API calls the runner needs."""

    def __init__(self, endpoint: str, token: MetadataToken | None = None, retrying: Retrying | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.retrying = retrying or Retrying()
        import_http()
        self._opener = urllib.request.build_opener()

    def _object_url(self, bucket: str, name: str) -> str:
        return "%s/%s/%s" % (self.endpoint, bucket, urllib.parse.quote(name, safe="/"))

    def _open(self, method: str, url: str, data: bytes | None = None, headers: dict | None = None):
        headers = dict(headers or {})
        if self.token is not None:
            headers["Authorization"] = self.token.authorization()
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        return self._opener.open(req, timeout=60)

    def _call(self, what: str, fn):
        return self.retrying.call(what, fn, self.token.invalidate if self.token else None)

    def download(self, bucket: str, name: str, dest: str) -> int:
        """Streams one object to ``dest`` (through ``dest.part``); returns its size."""
        url = self._object_url(bucket, name)
        partial = dest + ".part"

        def get():
            with self._open("GET", url) as resp, open(partial, "wb") as out:
                expected = resp.headers.get("Content-Length")
                size = 0
                while True:
                    chunk = resp.read(CHUNK)
                    if not chunk:
                        break
                    out.write(chunk)
                    size += len(chunk)
                if expected is not None and not resp.headers.get("Content-Encoding") and int(expected) != size:
                    raise http.client.IncompleteRead(b"", int(expected) - size)
            os.replace(partial, dest)
            return size

        try:
            return self._call("download gs://%s/%s" % (bucket, name), get)
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    def exists(self, bucket: str, name: str) -> bool:
        """Whether the object exists (a HEAD request)."""
        url = self._object_url(bucket, name)

        def head():
            with self._open("HEAD", url) as resp:
                resp.read()

        try:
            self._call("head gs://%s/%s" % (bucket, name), head)
        except NotFound:
            return False
        return True

    def read(self, bucket: str, name: str) -> bytes:
        url = self._object_url(bucket, name)

        def get():
            with self._open("GET", url) as resp:
                return resp.read()

        return self._call("read gs://%s/%s" % (bucket, name), get)

    def upload(self, bucket: str, name: str, data: bytes, content_type: str, if_generation_match=None) -> None:
        """Writes one object; with ``if_generation_match`` only if its generation
        is that (``0``: only if absent), else StorageError with status 412."""
        url = self._object_url(bucket, name)
        headers = {"Content-Type": content_type}
        if if_generation_match is not None:
            headers["x-goog-if-generation-match"] = str(if_generation_match)

        def put():
            with self._open("PUT", url, data=data, headers=headers) as resp:
                resp.read()

        self._call("upload gs://%s/%s" % (bucket, name), put)

    def list(self, bucket: str, prefix: str):
        """Yields the names of every object under ``prefix``, following continuation tokens."""
        token = None
        while True:
            query = [("list-type", "2"), ("prefix", prefix)]
            if token:
                query.append(("continuation-token", token))
            url = "%s/%s?%s" % (self.endpoint, bucket, urllib.parse.urlencode(query, quote_via=urllib.parse.quote))

            def get():
                with self._open("GET", url) as resp:
                    return resp.read()

            root = ElementTree.fromstring(self._call("list gs://%s/%s" % (bucket, prefix), get))
            truncated = False
            token = None
            for element in root:
                tag = _local_tag(element.tag)
                if tag == "Contents":
                    for child in element:
                        if _local_tag(child.tag) == "Key" and child.text:
                            yield child.text
                elif tag == "IsTruncated":
                    truncated = (element.text or "").strip().lower() == "true"
                elif tag == "NextContinuationToken":
                    token = element.text
            if not truncated or not token:
                return


def _local_tag(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class Storage:
    """Reads and writes job objects by URI (``gs://``, ``file://``, absolute path)."""

    def __init__(self, environ=None, gcs: Gcs | None = None) -> None:
        self.environ = os.environ if environ is None else environ
        self._gcs = gcs

    def gcs(self) -> Gcs:
        if self._gcs is None:
            endpoint = self.environ.get("KINETIC_GCS_ENDPOINT")
            if endpoint:
                self._gcs = Gcs(endpoint)
            else:
                self._gcs = Gcs(DEFAULT_GCS_ENDPOINT, MetadataToken())
        return self._gcs

    def read_bytes(self, uri: str) -> bytes:
        """The object's bytes; NotFound when there is none, here as on GCS."""
        parsed = parse_uri(uri)
        if parsed[0] == "gs":
            return self.gcs().read(parsed[1], parsed[2])
        try:
            with open(parsed[1], "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise NotFound("%s: no such file" % uri) from None

    def download(self, uri: str, dest: str) -> int:
        parsed = parse_uri(uri)
        if parsed[0] == "gs":
            return self.gcs().download(parsed[1], parsed[2], dest)
        if not os.path.isfile(parsed[1]):
            raise NotFound("%s: no such file" % uri)
        shutil.copyfile(parsed[1], dest)
        return os.path.getsize(dest)

    def list_names(self, uri: str) -> list:
        """The URIs of the objects whose URI starts with ``uri`` (gs:// or a
        local directory prefix ending in ``/``)."""
        parsed = parse_uri(uri)
        if parsed[0] == "gs":
            return ["gs://%s/%s" % (parsed[1], name) for name in self.gcs().list(parsed[1], parsed[2])]
        directory = parsed[1] if parsed[1].endswith("/") else os.path.dirname(parsed[1])
        if not os.path.isdir(directory):
            return []
        return sorted(os.path.join(directory, n) for n in os.listdir(directory)
                      if os.path.join(directory, n).startswith(parsed[1]))

    def create_bytes(self, uri: str, data: bytes, content_type: str = "application/json") -> bool:
        """Writes ``uri`` only if no object is there: True when this call
        created it, False when one was there already. Atomic: of two
        callers creating the same URI at once, exactly one gets True (GCS
        ``ifGenerationMatch=0``; a hard link of a complete file locally)."""
        parsed = parse_uri(uri)
        if parsed[0] == "gs":
            try:
                self.gcs().upload(parsed[1], parsed[2], data, content_type, if_generation_match=0)
            except StorageError as err:
                if err.status == 412:
                    return False
                raise
            return True
        path = parsed[1]
        partial = _write_partial(path, data)
        try:
            os.link(partial, path)
        except FileExistsError:
            return False
        finally:
            os.unlink(partial)
        return True

    def write_bytes(self, uri: str, data: bytes, content_type: str = "application/json") -> None:
        parsed = parse_uri(uri)
        if parsed[0] == "gs":
            self.gcs().upload(parsed[1], parsed[2], data, content_type)
            return
        path = parsed[1]
        os.replace(_write_partial(path, data), path)


def _write_partial(path: str, data: bytes) -> str:
    """Writes ``data`` beside ``path`` under a name of this process and
    thread, for the caller to move into place whole; gives that name."""
    os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
    partial = "%s.%d.%d.part" % (path, os.getpid(), threading.get_ident())
    try:
        with open(partial, "wb") as f:
            f.write(data)
    except BaseException:
        # A full disk leaves no half-written file behind.
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise
    return partial


def result_target(spec_doc: dict, host_index: int):
    """Where this host writes its result, as spec.json names it: ``result_uri``
    for the leader, entry N-1 of ``worker_result_uris`` for host N > 0; None
    when the spec names no place for this host (the runner never derives a key)."""
    if host_index == 0:
        return spec_doc["result_uri"]
    uris = spec_doc.get("worker_result_uris")
    if isinstance(uris, list) and host_index <= len(uris) and isinstance(uris[host_index - 1], str):
        return uris[host_index - 1]
    return None


# --------------------------------------------------------------------------
# Redaction of secret values
#
# The values of the variables spec.secret_names lists (found in the runner's
# environment) never leave the job as they are: every occurrence in the
# user's output and the runner's (both go through a pipe the runner reads),
# and in a failure's message and traceback, becomes REDACTED.

REDACTED = "<redacted>"
# Values shorter than this many characters are not redacted: too short to be
# a credential, and replacing them mangles the output (a one-character value
# would replace that character everywhere). The engine keeps the same floor
# (kinetic_core::env::MIN_REDACTED_CHARS) and tells the submitter which
# variables it leaves alone.
MIN_REDACTED_CHARS = 8
# A line not yet ended is written anyway after this long without more
# output (a tail that may be the start of a secret is held until the rest).
REDACT_FLUSH_SECONDS = 0.1
# A partial line longer than this is written without waiting for its end.
PUMP_MAX_PARTIAL = 1 << 16


class Redactor:
    """Replaces the exact secret values in text and bytes."""

    def __init__(self, values) -> None:
        unique = sorted({v for v in values if v and len(v) >= MIN_REDACTED_CHARS}, key=len, reverse=True)
        self.values = unique
        self.raw = [v.encode("utf-8", "surrogateescape") for v in unique]
        self.marker = REDACTED.encode("ascii")

    @classmethod
    def from_spec(cls, spec_doc: dict, environ) -> "Redactor":
        names = spec_doc.get("secret_names")
        if not isinstance(names, list):
            return cls([])
        return cls(environ.get(n) for n in names if isinstance(n, str))

    def __bool__(self) -> bool:
        return bool(self.values)

    def text(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, REDACTED)
        return text

    def data(self, data: bytes) -> bytes:
        for value in self.raw:
            data = data.replace(value, self.marker)
        return data

    def held_back(self, data: bytes) -> int:
        """How many bytes at the end of ``data`` could be the start of a secret."""
        longest = 0
        for value in self.raw:
            for n in range(min(len(value) - 1, len(data)), longest, -1):
                if data.endswith(value[:n]):
                    longest = n
                    break
        return longest

    def error(self, error: dict) -> dict:
        return {k: self.text(v) if isinstance(v, str) else v for k, v in error.items()}


class RedactedOutput:
    """Routes file descriptors 1 and 2 through pipes whose readers write the
    redacted output to where they pointed before: the user's prints, C
    extensions, subprocesses and the runner's own lines alike. With a
    ``sink`` (a LogUploader), the same redacted bytes are handed to it too."""

    def __init__(self, redactor: Redactor, sink=None) -> None:
        self.redactor = redactor
        self.sink = sink
        self.lock = threading.Lock()
        self.streams = []
        flush_streams()
        for fd in (1, 2):
            target = os.dup(fd)
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            thread = threading.Thread(target=self._pump, args=(read_end, target),
                                      name="kinetic-redact-%d" % fd, daemon=True)
            thread.start()
            self.streams.append((fd, target, thread))

    def _pump(self, source: int, target: int) -> None:
        held = b""
        try:
            while True:
                # After a pause, a line not yet ended is written; a tail that
                # may be the start of a secret never is, however long the
                # pause, until what follows shows whether it is one (or the
                # output ends): every copy (the pod log, output.log, the
                # stored chunks) is written from here.
                ready = len(held) - self.redactor.held_back(held)
                if ready and not select.select([source], [], [], REDACT_FLUSH_SECONDS)[0]:
                    self._emit(target, held[:ready])
                    held = held[ready:]
                    continue
                chunk = os.read(source, 1 << 16)
                if not chunk:
                    break
                data = self.redactor.data(held + chunk)
                end = len(data) - self.redactor.held_back(data)
                # Whole lines only (a print's text and its newline can come
                # in two writes, and the other stream must not land between
                # them), unless a long line keeps coming without one.
                if end < PUMP_MAX_PARTIAL:
                    end = max(data.rfind(b"\n", 0, end), data.rfind(b"\r", 0, end)) + 1
                self._emit(target, data[:end])
                held = data[end:]
            self._emit(target, held)
        except OSError:
            pass
        finally:
            os.close(source)

    def _emit(self, target: int, data: bytes) -> None:
        if not data:
            return
        with self.lock:
            if self.sink is not None:
                self.sink.append(data)
            _write_all(target, data)

    def close(self, timeout: float = 5.0) -> None:
        """Puts the descriptors back and waits for what is in the pipes."""
        flush_streams()
        for fd, target, _ in self.streams:
            os.dup2(target, fd)
        for _, target, thread in self.streams:
            thread.join(timeout)
            os.close(target)
        self.streams = []


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# --------------------------------------------------------------------------
# Stored logs
#
# When spec.log_uris names a prefix for this host, the job's output (what
# goes through RedactedOutput, so already redacted) is copied there in
# chunks while it runs: objects {prefix}/{seq:08d}, numbered on from what
# the prefix already holds (a retried pod appends), the last one of a run
# named {prefix}/{seq:08d}.end. GCS objects cannot be appended to, so each
# chunk is a new object; readers list the prefix and join them in order.

# How long output waits before it is copied, by how long the job has run:
# lines show up within a second at first, and a long job makes fewer objects.
LOG_INTERVALS = ((300.0, 1.0), (3600.0, 5.0), (None, 15.0))
# A chunk is copied at once when this much output waits.
LOG_CHUNK_BYTES = 4 << 20
LOG_CHUNK_RE = re.compile(r"^([0-9]{8})(\.end)?$")


def log_prefix(spec_doc: dict, host_index: int):
    """The prefix this host copies its output to, as spec.json names it, or None."""
    uris = spec_doc.get("log_uris")
    if isinstance(uris, list) and host_index < len(uris) and isinstance(uris[host_index], str) and uris[host_index]:
        return uris[host_index].rstrip("/")
    return None


def next_log_seq(storage: Storage, prefix: str) -> int:
    """One more than the highest chunk number already under ``prefix`` (0 when none)."""
    highest = -1
    for name in storage.list_names(prefix + "/"):
        match = LOG_CHUNK_RE.match(name.rsplit("/", 1)[-1])
        if match:
            highest = max(highest, int(match.group(1)))
    return highest + 1


class LogUploader:
    """Copies output handed to ``append`` to ``{prefix}/{seq}`` objects from a
    background thread; ``close`` copies the rest as the ``.end`` chunk.

    A failed copy keeps its bytes for the next attempt (and says so once on
    the real stderr); nothing is dropped while the job runs."""

    def __init__(self, storage: Storage, prefix: str, seq: int = 0, clock=time.monotonic,
                 intervals=LOG_INTERVALS, chunk_bytes: int = LOG_CHUNK_BYTES) -> None:
        self.storage = storage
        self.prefix = prefix
        self.seq = seq
        self.clock = clock
        self.intervals = intervals
        self.chunk_bytes = chunk_bytes
        self.started = clock()
        self.buffer = bytearray()
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.closing = False
        self.warned = False
        self.copied_bytes = 0
        self.thread = threading.Thread(target=self._loop, name="kinetic-log-upload", daemon=True)
        self.thread.start()

    def interval(self) -> float:
        elapsed = self.clock() - self.started
        for until, every in self.intervals:
            if until is None or elapsed < until:
                return every
        return self.intervals[-1][1]

    def append(self, data: bytes) -> None:
        with self.lock:
            self.buffer += data
            if len(self.buffer) >= self.chunk_bytes:
                self.wake.notify()

    def _loop(self) -> None:
        while True:
            with self.lock:
                if not self.closing:
                    self.wake.wait(self.interval())
                if self.closing:
                    return
                if not self.buffer:
                    continue
                data = bytes(self.buffer)
            if self._copy(data, last=False):
                with self.lock:
                    del self.buffer[:len(data)]

    def _copy(self, data: bytes, last: bool) -> bool:
        uri = "%s/%08d%s" % (self.prefix, self.seq, ".end" if last else "")
        try:
            self.storage.write_bytes(uri, data, "text/plain; charset=utf-8")
        except Exception as err:  # noqa: BLE001 - the job goes on; the bytes are kept
            if not self.warned:
                self.warned = True
                _write_all(2, ("[kinetic] logs: warning: cannot copy output to %s: %s: %s (will retry)\n"
                               % (uri, type(err).__name__, err)).encode("utf-8", "replace"))
            return False
        self.seq += 1
        self.copied_bytes += len(data)
        return True

    def close(self, timeout: float = 30.0) -> bool:
        """Stops the thread and copies what is left as the ``.end`` chunk;
        False when that last copy failed."""
        with self.lock:
            self.closing = True
            self.wake.notify()
        self.thread.join(timeout)
        with self.lock:
            data = bytes(self.buffer)
            self.buffer.clear()
        return self._copy(data, last=True)


def start_log_upload(spec_doc: dict, storage: Storage, environ):
    """A LogUploader for this host when spec.json names a log prefix for it, else None.
    Not being able to list the prefix only costs the numbering: it starts at 0."""
    host_index, _ = host_index_from_env(environ)
    prefix = log_prefix(spec_doc, host_index)
    if prefix is None:
        return None
    try:
        seq = next_log_seq(storage, prefix)
    except Exception as err:  # noqa: BLE001 - copying logs never stops a job
        warn(STARTUP, "cannot list %s: %s: %s; numbering its log chunks from 0" % (prefix, type(err).__name__, err))
        seq = 0
    return LogUploader(storage, prefix, seq)


# --------------------------------------------------------------------------
# Attempt number
#
# Every attempt of a Kubernetes Job runs the same pod template and a pod
# cannot ask the API server about its Job, so a run learns which attempt it
# is from the store: it claims the next number under spec.starts_uri
# (``{job_id}/starts/{N:08}``) by creating that marker only if absent. The
# claim is what makes it race-free: of two runs that try the same number at
# once exactly one creates the marker (GCS answers the other 412), and the
# loser moves on to the next number. Counting the markers listed, or ordering
# them by creation time, would not be: two runs that list at the same moment
# see the same markers, and two markers can share a timestamp. The listing
# only says where to start trying.

ATTEMPT_ENV = "KINETIC_ATTEMPT"
POD_NAME_ENV = "KINETIC_POD_NAME"
START_MARKER_RE = re.compile(r"^([0-9]{8})$")
# More runs than any failure budget allows (100 + 100 + 1): past it the
# markers are not ours to count.
MAX_START_CLAIMS = 1000


def claim_attempt(storage: Storage, prefix: str, pod: str, token: str | None = None, clock=time.time) -> int:
    """Claims this run's attempt number under ``prefix`` (1 for the first run):
    one more than the highest marker there, or the next free one after it.
    A marker that holds this run's ``token`` is its own (an answer lost after
    the create landed, retried), and its number is this run's."""
    import uuid
    token = token or uuid.uuid4().hex
    prefix = prefix.rstrip("/")
    highest = 0
    for name in storage.list_names(prefix + "/"):
        match = START_MARKER_RE.match(name.rsplit("/", 1)[-1])
        if match:
            highest = max(highest, int(match.group(1)))
    body = json.dumps({"pod": pod, "run": token, "started": clock()}).encode("utf-8")
    for attempt in range(highest + 1, highest + 1 + MAX_START_CLAIMS):
        uri = "%s/%08d" % (prefix, attempt)
        if storage.create_bytes(uri, body):
            return attempt
        try:
            held = json.loads(storage.read_bytes(uri).decode("utf-8"))
        except (NotFound, ValueError):
            continue
        if isinstance(held, dict) and held.get("run") == token:
            return attempt
    raise RunnerError("cannot claim an attempt number under %s: %d numbers after %d are taken"
                      % (prefix, MAX_START_CLAIMS, highest))


def attempt_from_env(spec, environ):
    """The attempt number the backend set in KINETIC_ATTEMPT (the local
    supervisor counts its own runs), or None. A value the job captured from
    the client's environment (listed in spec.env_names) is not the backend's."""
    raw = environ.get(ATTEMPT_ENV)
    if raw is None or ATTEMPT_ENV in spec.env_names:
        return None
    value = raw.strip()
    if not value.isdigit() or int(value) < 1:
        raise RunnerError("%s=%r: expected a whole number from 1 (the backend sets it)" % (ATTEMPT_ENV, raw))
    return int(value)


def resolve_attempt(spec, storage: Storage, environ, host_index: int) -> tuple:
    """``(number, how)``: the backend's KINETIC_ATTEMPT, else the number this run
    claims under spec.starts_uri (host 0 only: a slice's hosts are one run),
    else 1; plus spec.attempt_offset, the runs before this job (a batch
    input's earlier attempts), so an input's retries count on as a job's do."""
    number, how = _own_attempt(spec, storage, environ, host_index)
    offset = spec.attempt_offset
    if offset:
        return offset + number, "%s, after %d earlier run(s) of this batch input" % (how, offset)
    return number, how


def _own_attempt(spec, storage: Storage, environ, host_index: int) -> tuple:
    given = attempt_from_env(spec, environ)
    if given is not None:
        return given, "set by the backend"
    if spec.starts_uri is not None and host_index == 0:
        pod = environ.get(POD_NAME_ENV) or "%s-%d" % (os.uname().nodename, os.getpid())
        return claim_attempt(storage, spec.starts_uri, pod), "claimed under %s" % spec.starts_uri
    return 1, "the job is run once" if spec.starts_uri is None else "host %d of a slice" % host_index


# --------------------------------------------------------------------------
# Host index


def host_index_from_env(environ) -> tuple:
    """``(index, warnings)``: first valid of TPU_WORKER_ID, LWS_WORKER_INDEX, else 0."""
    warnings = []
    for name in ("TPU_WORKER_ID", "LWS_WORKER_INDEX"):
        raw = environ.get(name)
        if raw is None or not raw.strip():
            continue
        value = raw.strip()
        if not _HOST_INDEX_RE.match(value):
            warnings.append("ignoring %s=%r: not an integer" % (name, raw))
            continue
        index = int(value)
        if index < 0:
            warnings.append("ignoring %s=%r: negative" % (name, raw))
            continue
        return index, warnings
    return 0, warnings


# --------------------------------------------------------------------------
# Topology: the SkyPilot-style variables every host of a job gets


# How long a host of a slice waits for its hosts' names to resolve (the
# cluster's DNS publishes a pod once it has an address, and a slice's pods
# start together but not at once) before it gives up on addresses.
RESOLVE_TIMEOUT_SECONDS = 300.0


def lws_host_addresses(environ) -> list:
    """The addresses of a LeaderWorkerSet group's hosts, leader first, from
    the variables its controller sets: the leader is ``LWS_LEADER_ADDRESS``
    (``{set}-{group}.{subdomain}.{namespace}``) and worker ``i`` (1 to
    ``LWS_GROUP_SIZE - 1``) is ``{set}-{group}-{i}`` in the same subdomain.
    Empty when either variable is missing or malformed."""
    leader = (environ.get("LWS_LEADER_ADDRESS") or "").strip()
    size = (environ.get("LWS_GROUP_SIZE") or "").strip()
    if not leader or "$(" in leader or not size.isdigit() or int(size) < 1:
        return []
    head, dot, rest = leader.partition(".")
    if not head:
        return []
    return [leader] + ["%s-%d%s%s" % (head, i, dot, rest) for i in range(1, int(size))]


def _is_ip(text: str) -> bool:
    import ipaddress
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _lookup(name: str) -> str:
    """The first address ``name`` resolves to (IPv4 first), as the system's
    resolver (the cluster's DNS in a pod) answers; ``OSError`` when it does not."""
    import socket
    infos = socket.getaddrinfo(name, None, 0, socket.SOCK_STREAM)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)
    if not infos:
        raise OSError("no address for %s" % name)
    return infos[0][4][0]


def resolve_hosts(names, lookup=None, timeout=RESOLVE_TIMEOUT_SECONDS, clock=time.monotonic,
                  sleep=time.sleep) -> tuple:
    """``(addresses, unresolved)``: each name's address, in the names' order,
    looked up again (waits growing from 0.1 s to 2 s) until every name
    resolves or ``timeout`` seconds have passed; an unresolved name stays as
    it is and is listed in ``unresolved``. An address is kept as it is.
    ``lookup`` (a name to its address) is :func:`_lookup` unless given."""
    lookup = lookup or _lookup
    found = {name: name for name in names if _is_ip(name)}
    deadline = clock() + timeout
    wait = 0.1
    while True:
        for name in names:
            if name not in found:
                try:
                    found[name] = _lookup_checked(lookup, name)
                except (OSError, UnicodeError):  # a label IDNA refuses is no name either
                    pass
        missing = [name for name in names if name not in found]
        if not missing or clock() >= deadline:
            return [found.get(name, name) for name in names], missing
        sleep(min(wait, max(0.0, deadline - clock())))
        wait = min(wait * 2, 2.0)


def _lookup_checked(lookup, name: str) -> str:
    address = lookup(name)
    if not isinstance(address, str) or not _is_ip(address):
        raise OSError("%s resolved to %r, not an address" % (name, address))
    return address


def node_addresses(spec, environ) -> list:
    """The addresses of the job's hosts, in rank order: the
    backend's ``KINETIC_NODE_IPS`` (one per line), else the spec's, else a
    LeaderWorkerSet group's host names resolved to addresses (the same list
    on every host of the group)."""
    if environ.get("KINETIC_NODE_IPS", "").strip() and "KINETIC_NODE_IPS" not in spec.env_names:
        return [line.strip() for line in environ["KINETIC_NODE_IPS"].splitlines() if line.strip()]
    if spec.node_ips:
        return list(spec.node_ips)
    names = lws_host_addresses(environ)
    if not names:
        return []
    addresses, unresolved = resolve_hosts(names)
    if unresolved:
        warn(ENVIRONMENT, "%d of %d host name%s did not resolve in %ds (%s): KINETIC_NODE_IPS names them" % (
            len(unresolved), len(names), "" if len(names) == 1 else "s", RESOLVE_TIMEOUT_SECONDS,
            ", ".join(unresolved)))
    return addresses


def gpus_given(spec, environ) -> int:
    """The GPUs the job holds on its host: on the local backend, the devices
    it was given (``CUDA_VISIBLE_DEVICES`` as the backend set it, not as
    the job captured it); elsewhere the accelerator's count, which is what
    the job's pod requests."""
    raw = environ.get("CUDA_VISIBLE_DEVICES")
    if spec.cloud != "local" or raw is None or "CUDA_VISIBLE_DEVICES" in spec.env_names:
        return spec.num_gpus_per_node
    devices = []
    for entry in raw.split(","):
        entry = entry.strip()
        # CUDA stops at the first entry that names no device.
        if not entry or entry.startswith("-"):
            break
        devices.append(entry)
    return len(devices)


# The SkyPilot names of the variables, for tasks written for SkyPilot.
SKYPILOT_NAMES = {
    "KINETIC_NODE_RANK": "SKYPILOT_NODE_RANK",
    "KINETIC_NODE_IPS": "SKYPILOT_NODE_IPS",
    "KINETIC_NUM_NODES": "SKYPILOT_NUM_NODES",
    "KINETIC_NUM_GPUS_PER_NODE": "SKYPILOT_NUM_GPUS_PER_NODE",
    "KINETIC_TASK_ID": "SKYPILOT_TASK_ID",
    "KINETIC_CLUSTER_INFO": "SKYPILOT_CLUSTER_INFO",
}


def topology_env(spec, host_index: int, environ) -> dict:
    """``KINETIC_*`` topology variables for this host, and the same facts
    under SkyPilot's names (``SKYPILOT_*``): its rank, the hosts' IP
    addresses in rank order (:func:`node_addresses`), the number of hosts,
    GPUs (:func:`gpus_given`) and accelerators per host, a task id that
    stays the same when the job is retried or its hosts are restarted (the
    job id), and a JSON description of the cluster (its name, cloud,
    region and zone, with all of the above) in ``KINETIC_CLUSTER_INFO``."""
    node_ips = node_addresses(spec, environ)
    if node_ips and len(node_ips) != spec.num_nodes:
        warn(ENVIRONMENT, "%d host address%s for %d host%s" % (
            len(node_ips), "" if len(node_ips) == 1 else "es", spec.num_nodes, "" if spec.num_nodes == 1 else "s"))
    gpus = gpus_given(spec, environ)
    task_id = spec.job_id
    env = {
        "KINETIC_NODE_RANK": str(host_index),
        "KINETIC_NUM_NODES": str(spec.num_nodes),
        "KINETIC_NODE_IPS": "\n".join(node_ips),
        "KINETIC_NUM_GPUS_PER_NODE": str(gpus),
        "KINETIC_NUM_ACCELERATORS_PER_NODE": str(spec.num_accelerators_per_node),
        "KINETIC_TASK_ID": task_id,
        "KINETIC_CLUSTER_INFO": json.dumps({
            "cluster_name": spec.cluster_name,
            "cloud": spec.cloud,
            "region": spec.region,
            "zone": spec.zone,
            "job_id": spec.job_id,
            "task_id": task_id,
            "node_rank": host_index,
            "num_nodes": spec.num_nodes,
            "node_ips": node_ips,
            "num_gpus_per_node": gpus,
            "num_accelerators_per_node": spec.num_accelerators_per_node,
            "accelerator": spec.accelerator,
        }),
    }
    for name, alias in SKYPILOT_NAMES.items():
        env[alias] = env[name]
    return env


# --------------------------------------------------------------------------
# Spec


class Spec:
    """The validated fields of spec.json the runner uses."""

    def __init__(self, doc: dict) -> None:
        self.job_id = _field(doc, "job_id", str)
        self.entrypoint = _entrypoint(doc.get("entrypoint"))
        self.args = _field(doc, "args", list, [])
        self.kwargs = _field(doc, "kwargs", dict, {})
        named = [("argument %d" % i, v) for i, v in enumerate(self.args)]
        for where, value in named + [("keyword argument %r" % k, v) for k, v in self.kwargs.items()]:
            number = out_of_range_number(value)
            if number is not None:
                raise RunnerError("%s: the number %s is out of the range of a float (Python would read it as %r); "
                                  "pass a number a float can hold, or a string" % (where, number.text, float(number)))
        self.volumes = _volumes(_field(doc, "volumes", list, []))
        self.env_names = _field(doc, "env_names", list, [])
        if not all(isinstance(n, str) and n for n in self.env_names):
            raise RunnerError("spec.env_names must be a list of non-empty strings")
        self.secret_names = _field(doc, "secret_names", list, [])
        if not all(isinstance(n, str) and n for n in self.secret_names):
            raise RunnerError("spec.secret_names must be a list of non-empty strings")
        output_dir = doc.get("output_dir")
        if output_dir is not None and not isinstance(output_dir, str):
            raise RunnerError("spec.output_dir must be a string or null")
        self.output_dir = output_dir
        self.context = _artifact(doc.get("context"), "context")
        self.extract_limits = _extract_limits(doc.get("extract_limits"))
        requirements = doc.get("requirements")
        self.requirements = None if requirements is None else _artifact(requirements, "requirements")
        self.plan = doc.get("plan")
        cluster = _field(doc, "cluster", dict, {})
        self.accelerator = _field(cluster, "accelerator", str, "cpu", "spec.cluster.")
        self.num_nodes = _field(cluster, "num_nodes", int, 1, "spec.cluster.")
        self.num_gpus_per_node = _field(cluster, "num_gpus_per_node", int, 0, "spec.cluster.")
        self.num_accelerators_per_node = _field(cluster, "num_accelerators_per_node", int,
                                                self.num_gpus_per_node, "spec.cluster.")
        self.node_ips = _field(cluster, "node_ips", list, [], "spec.cluster.")
        if not all(isinstance(ip, str) for ip in self.node_ips):
            raise RunnerError("spec.cluster.node_ips must be a list of strings")
        self.cluster_name = _field(cluster, "cluster_name", str, "", "spec.cluster.")
        self.cloud = _field(cluster, "cloud", str, "GCP", "spec.cluster.")
        self.region = _field(cluster, "region", str, None, "spec.cluster.")
        self.zone = _field(cluster, "zone", str, None, "spec.cluster.")
        python_values = doc.get("python_values")
        if python_values is not None and not isinstance(python_values, str):
            raise RunnerError("spec.python_values must be a Python version string ('3.11') or null")
        self.python_values = python_values
        self.debug = _debug(doc.get("debug"))
        starts_uri = doc.get("starts_uri")
        if starts_uri is not None and (not isinstance(starts_uri, str) or not starts_uri):
            raise RunnerError("spec.starts_uri must be a non-empty string or null")
        self.starts_uri = starts_uri
        attempt_offset = doc.get("attempt_offset", 0)
        if isinstance(attempt_offset, bool) or not isinstance(attempt_offset, int) or attempt_offset < 0:
            raise RunnerError("spec.attempt_offset must be a whole number, zero or more, or absent")
        self.attempt_offset = attempt_offset


_MISSING = object()


def _debug(doc):
    """``spec.debug``: ``None``, or where the readiness marker goes, the port and the wait."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise RunnerError("spec.debug must be an object or null")
    ready_uri = _field(doc, "ready_uri", str, where="spec.debug.")
    port = _field(doc, "port", int, where="spec.debug.")
    wait = _field(doc, "wait_timeout_seconds", int, where="spec.debug.")
    leader_ready_uri = _field(doc, "leader_ready_uri", str, None, where="spec.debug.")
    if not 0 < port < 65536 or wait < 0:
        raise RunnerError("spec.debug.port must be a port (1-65535) and wait_timeout_seconds >= 0")
    return {"ready_uri": ready_uri, "port": port, "wait_timeout_seconds": wait, "leader_ready_uri": leader_ready_uri}


# A multi-host debug job runs its debugger on the leader (host 0) alone.
# The other hosts, told so by KINETIC_DEBUG_WAIT_LEADER=1 (the workers of a
# Pathways slice), wait before their call until the leader's debugger has a
# client, so that the user sets breakpoints before any host runs the
# function. The leader says so by writing spec.debug.leader_ready_uri
# (``{job_id}/.leader_ready``, empty) just before its call; every host
# reads the job's store prefix, so each worker polls that object. A worker
# stops waiting with a failure when the leader's result appears first (the
# leader ended without a client: no debugger attached in time, or its
# setup failed), or after the leader's wait for a client plus
# LEADER_SETUP_GRACE_SECONDS for its own setup.
WAIT_LEADER_ENV = "KINETIC_DEBUG_WAIT_LEADER"
LEADER_SETUP_GRACE_SECONDS = 60
LEADER_POLL_SECONDS = 2.0


def waits_for_leader(environ) -> bool:
    """Whether ``KINETIC_DEBUG_WAIT_LEADER`` tells this host to wait for the leader's debugger."""
    value = environ.get(WAIT_LEADER_ENV, "")
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise RunnerError("%s must be 1 (wait for the leader's debugger) or 0, got %r" % (WAIT_LEADER_ENV, value))


def object_exists(storage, uri: str) -> bool:
    try:
        storage.read_bytes(uri)
    except NotFound:
        return False
    return True


def wait_for_leader(storage, leader_ready_uri: str, leader_result_uri, bound: float,
                    poll: float = LEADER_POLL_SECONDS, clock=time.monotonic, sleep=time.sleep) -> float:
    """Wait until ``leader_ready_uri`` exists; gives the seconds waited. A RunnerError
    when the leader's result (``leader_result_uri``) appears first, or after ``bound`` seconds."""
    started = clock()
    deadline = started + bound
    while True:
        if object_exists(storage, leader_ready_uri):
            return clock() - started
        if leader_result_uri is not None and object_exists(storage, leader_result_uri):
            raise RunnerError("the leader ended before its debugger had a client (its result is at %s); "
                              "this host did not run the function" % leader_result_uri)
        now = clock()
        if now >= deadline:
            raise RunnerError("the leader's debugger had no client within %ds (the leader's wait, "
                              "spec.debug.wait_timeout_seconds, plus %ds for its setup): %s was not written; "
                              "this host did not run the function" % (bound, LEADER_SETUP_GRACE_SECONDS,
                                                                      leader_ready_uri))
        sleep(min(poll, deadline - now))


def import_debugpy():
    """debugpy, which a debug job needs in its image or requirements (it is never installed here)."""
    try:
        import debugpy  # noqa: PLC0415 - only debug jobs need it
    except ImportError as err:
        raise RunnerError(
            "this job runs under a debugger but the debugpy package cannot be imported (%s); "
            "add `debugpy` to the project's requirements (or install it in the image)" % err) from None
    return debugpy


def debug_listen_address(settings: dict, environ) -> tuple:
    """Where debugpy listens: ``KINETIC_DEBUG_HOST`` (the pod's IP) or loopback, at
    ``KINETIC_DEBUG_PORT`` when the backend set one, else the spec's port."""
    host = environ.get("KINETIC_DEBUG_HOST") or "127.0.0.1"
    port = settings["port"]
    override = environ.get("KINETIC_DEBUG_PORT")
    if override:
        try:
            port = int(override)
        except ValueError:
            raise RunnerError("KINETIC_DEBUG_PORT must be a port number, got %r" % override) from None
    return host, port


def _field(doc: dict, key: str, kind: type, default=_MISSING, where: str = "spec."):
    value = doc.get(key)
    if value is None:
        if default is _MISSING:
            raise RunnerError("%s%s is required" % (where, key))
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RunnerError("%s%s must be a %s" % (where, key, kind.__name__))
    return value


def _entrypoint(entry) -> dict:
    if not isinstance(entry, dict):
        raise RunnerError("spec.entrypoint must be an object")
    kind = entry.get("kind")
    if kind == "function":
        function = entry.get("function")
        if not isinstance(function, str) or not function:
            raise RunnerError("spec.entrypoint.function must be a non-empty string")
        module, path = entry.get("module"), entry.get("path")
        if (module is None) == (path is None):
            raise RunnerError("spec.entrypoint needs exactly one of 'module' and 'path'")
        if not isinstance(module or path, str) or not (module or path):
            raise RunnerError("spec.entrypoint.module/path must be a non-empty string")
        return entry
    if kind == "command":
        argv = entry.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise RunnerError("spec.entrypoint.argv must be a non-empty list of strings")
        return entry
    raise RunnerError("spec.entrypoint.kind must be 'function' or 'command', not %r" % (kind,))


def _artifact(doc, name: str) -> dict:
    if not isinstance(doc, dict):
        raise RunnerError("spec.%s must be an object with 'uri' and 'sha256'" % name)
    parse_uri(doc.get("uri"))
    sha = doc.get("sha256")
    if not isinstance(sha, str) or not re.match(r"^[0-9a-fA-F]{64}$", sha):
        raise RunnerError("spec.%s.sha256 must be 64 hex digits" % name)
    return {"uri": doc["uri"], "sha256": sha.lower()}


def _extract_limits(doc) -> dict:
    limits = dict(DEFAULT_EXTRACT_LIMITS)
    if doc is None:
        return limits
    if not isinstance(doc, dict):
        raise RunnerError("spec.extract_limits must be an object")
    for key in limits:
        value = doc.get(key)
        if value is None:
            continue
        if type(value) is not int or value <= 0:
            raise RunnerError("spec.extract_limits.%s must be a positive integer, not %r" % (key, value))
        limits[key] = value
    return limits


def _volumes(volumes: list) -> list:
    for volume in volumes:
        if not isinstance(volume, dict):
            raise RunnerError("spec.volumes entries must be objects")
        mount = volume.get("mount_path")
        if not isinstance(mount, str) or not mount.startswith("/"):
            raise RunnerError("spec.volumes mount_path must be an absolute path, not %r" % (mount,))
        if not is_data_ref(volume.get("data")):
            raise RunnerError("spec.volumes[%r].data must be a data reference" % mount)
    return volumes


class OutOfRangeNumber(float):
    """A JSON number beyond a float's range (``1e999``, ``1e-999``), which
    ``json`` would read as ``inf`` or ``0.0``; keeps its text so that
    ``Spec`` refuses it in an argument, naming both."""

    def __new__(cls, text: str) -> "OutOfRangeNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number


def parse_json_float(text: str) -> float:
    """``json``'s ``parse_float``: the float, or an ``OutOfRangeNumber``."""
    value = float(text)
    mantissa = re.split("[eE]", text, maxsplit=1)[0]
    if value in (float("inf"), float("-inf")) or (value == 0.0 and re.search("[1-9]", mantissa)):
        return OutOfRangeNumber(text)
    return value


def out_of_range_number(value):
    """The first ``OutOfRangeNumber`` in ``value`` (lists and dicts), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, OutOfRangeNumber):
            return item
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return None


def load_spec(storage: Storage, uri: str) -> dict:
    """Reads spec.json; RunnerError when unreadable, not protocol 1, or without a result URI."""
    try:
        raw = storage.read_bytes(uri)
    except (OSError, RunnerError) as err:
        raise RunnerError("cannot read spec %s: %s" % (uri, err)) from None
    try:
        with unlimited_int_digits():
            doc = json.loads(raw.decode("utf-8"), parse_float=parse_json_float)
    except ValueError as err:
        raise RunnerError("spec %s is not JSON: %s" % (uri, err)) from None
    if not isinstance(doc, dict):
        raise RunnerError("spec %s is not a JSON object" % uri)
    protocol = doc.get("protocol")
    if type(protocol) is not int or protocol != PROTOCOL:
        raise RunnerError("spec %s has protocol %r; this runner speaks protocol %d" % (uri, protocol, PROTOCOL))
    try:
        parse_uri(doc.get("result_uri"))
    except RunnerError as err:
        raise RunnerError("spec %s has no usable result_uri: %s" % (uri, err)) from None
    return doc


# --------------------------------------------------------------------------
# Context extraction and plan


def _inside(root: str, path: str) -> bool:
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
            if not _inside(root, os.path.realpath(parent)):
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
                if os.path.isabs(link) or not _inside(root, resolved):
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


class PlanActions:
    """What applying a plan does: sys.path entries to put first, and where to chdir."""

    def __init__(self, sys_path: list, cwd: str | None, legacy: bool, warnings: list) -> None:
        self.sys_path = sys_path
        self.cwd = cwd
        self.legacy = legacy
        self.warnings = warnings


def read_plan(spec_plan, workspace: str):
    """The spec's plan when it has one, else ``.kinetic/plan.json`` from the context (or None)."""
    if spec_plan is not None:
        return spec_plan
    try:
        with open(os.path.join(workspace, ".kinetic", "plan.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def plan_actions(plan, workspace: str) -> PlanActions:
    """Kinetic's plan application, as a pure function of the plan and the extracted workspace."""
    root = os.path.normpath(os.path.abspath(workspace))
    if not isinstance(plan, dict) or not plan:
        return PlanActions([root], None, True, [])
    warnings = []
    real_root = os.path.realpath(root)

    def under_root(rel: str):
        path = root if rel in ("", ".") else os.path.normpath(os.path.join(root, rel))
        return path, _inside(real_root, os.path.realpath(path))

    rels = plan.get("sys_path_rel")
    if not isinstance(rels, list):
        warnings.append("plan sys_path_rel is not a list (%s); using only the workspace root" % type(rels).__name__)
        rels = []
    kept = []
    for rel in rels:
        if isinstance(rel, str):
            kept.append(rel)
        else:
            warnings.append("dropping non-string plan sys_path_rel entry %r" % (rel,))
    if "" not in kept:
        kept.insert(0, "")
    entries = []
    for rel in kept:
        path, inside = under_root(rel)
        if not inside:
            warnings.append("rejecting plan sys_path_rel entry %r: it escapes the workspace" % rel)
        elif os.path.isdir(path) and path not in entries:
            entries.append(path)

    cwd_rel = plan.get("client_cwd_rel")
    cwd = root
    if isinstance(cwd_rel, str) and cwd_rel:
        path, inside = under_root(cwd_rel)
        if not inside:
            warnings.append("plan client_cwd_rel %r escapes the workspace; staying at the workspace root" % cwd_rel)
        elif not os.path.isdir(path):
            warnings.append("plan client_cwd_rel %r is not a directory in the context; staying at the workspace root" % cwd_rel)
        else:
            cwd = path
    elif cwd_rel not in ("", None):
        warnings.append("plan client_cwd_rel is a %s, not a string; staying at the workspace root" % type(cwd_rel).__name__)
    return PlanActions(entries, cwd, False, warnings)


# --------------------------------------------------------------------------
# Pickled Python values

PICKLE_KEY = "__kinetic_pickle__"


def python_minor() -> str:
    return "%d.%d" % sys.version_info[:2]


def is_pickled(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get(PICKLE_KEY), str)


def decode_python_values(value):
    """``value`` with every pickled leaf (``{"__kinetic_pickle__": base64, "python": "3.11"}``) unpickled.

    A value pickled by another Python minor version is refused: pickles of
    the standard library's and of most packages' objects differ between them.
    """
    if is_pickled(value):
        made_by = value.get("python")
        if made_by != python_minor():
            raise PhaseFailure(DATA, "PythonVersionMismatch",
                               "an argument was pickled by Python %s but this job runs Python %s; "
                               "pass JSON values, or run the client on Python %s" % (made_by, python_minor(), python_minor()), "")
        import base64
        import pickle
        return pickle.loads(base64.b64decode(value[PICKLE_KEY]))
    if isinstance(value, list):
        return [decode_python_values(v) for v in value]
    if isinstance(value, dict):
        return {k: decode_python_values(v) for k, v in value.items()}
    return value


RUNNER_MODULE = "__kinetic_runner__"

# --------------------------------------------------------------------------
# The job's `kinetic` module

# The text of the job-side `kinetic` module (runner/kinetic_job.py). The
# engine's copy of the runner carries it on the next line (crates/core/build.rs
# writes it there); run from a checkout, the runner reads the file beside it.
JOB_MODULE_SOURCE = None
JOB_MODULE_FILE = "kinetic_job.py"
# The directory the job's ``kinetic`` package is written under (its frames
# are the library's, not the user's: see ``_user_traceback``).
JOB_MODULE_DIR = "kinetic-module"


def job_module_source() -> str:
    """The job-side ``kinetic`` module's source: embedded, or the file beside the runner."""
    if JOB_MODULE_SOURCE is not None:
        return JOB_MODULE_SOURCE
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), JOB_MODULE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise RunnerError("the job's kinetic module is neither embedded in the runner nor beside it (%s): %s"
                          % (path, err)) from None


def place_job_module(run_dir: str) -> str:
    """Writes the job's ``kinetic`` package under ``run_dir`` and puts it
    first on ``sys.path``, ahead of any ``kinetic`` the interpreter has
    installed (a local job's may have the client's): inside a job,
    ``import kinetic`` gives the job's side of the API, whose decorated
    functions run in-process. Returns the directory put on ``sys.path``."""
    root = os.path.join(run_dir, JOB_MODULE_DIR)
    package = os.path.join(root, "kinetic")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(job_module_source())
    for name in [n for n in sys.modules if n == "kinetic" or n.startswith("kinetic.")]:
        del sys.modules[name]
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    return root



def ensure_cloudpickle(environ) -> None:
    """A function that travelled by value was pickled with cloudpickle,
    which its unpickling needs: imported, or installed now (the images the
    build makes have it; a prebuilt or custom image may not), or an error
    that says what to add."""
    try:
        import cloudpickle  # noqa: F401
        return
    except ImportError:
        pass
    import shlex
    argv = install_command(environ, None, ["cloudpickle"])
    log(LOAD, "the function travels by value (cloudpickle) and this image has no cloudpickle; running %s"
        % shlex.join(argv))
    code, tail = run_capturing_stderr(argv)
    importlib.invalidate_caches()
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        raise RunnerError(
            "the function travels by value, pickled with cloudpickle (it is defined in __main__: a script, the "
            "interpreter's prompt or a notebook, or is a lambda or closure), and this job's Python (%s) has no "
            "cloudpickle, and installing it failed (%s exited with code %d%s); add cloudpickle to the image or "
            "to the project's requirements, or define the function in a module of the project"
            % (sys.executable, shlex.join(argv), code, ("; stderr tail:\n" + tail) if tail else "")) from None


def call_pickled(fn, *args, **kwargs):
    """The entrypoint ``__kinetic_runner__:call_pickled``: calls the function
    that came pickled by value (cloudpickle) as the first argument."""
    if not callable(fn):
        raise TypeError("__kinetic_runner__:call_pickled needs a pickled function as its first argument, got %s"
                        % type(fn).__name__)
    return fn(*args, **kwargs)


def encode_python_value(value) -> dict:
    """``value`` pickled as a leaf a Python client of the same minor version
    reads back: with cloudpickle when the job has it, so that an instance
    (or an exception) of a class that came by value from the client's
    ``__main__`` goes back as an instance of that class."""
    import base64
    import pickle
    try:
        import cloudpickle
        dumps = cloudpickle.dumps
    except ImportError:
        dumps = pickle.dumps
    return {PICKLE_KEY: base64.b64encode(dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii"),
            "python": python_minor()}


# --------------------------------------------------------------------------
# Data references


def is_data_ref(value) -> bool:
    return isinstance(value, dict) and value.get("__data_ref__") is True


def mount_target(mount_root: str, mount_path: str) -> str:
    """Where a volume mounted at ``mount_path`` is placed under ``mount_root``."""
    root = os.path.normpath(os.path.abspath(mount_root))
    target = os.path.normpath(os.path.join(root, mount_path.lstrip("/")))
    if not _inside(root, target):
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
            if unsafe_entry_reason(name) or not _inside(real_target, os.path.realpath(os.path.dirname(dest))):
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
            if unsafe_entry_reason(rel) or not _inside(real_target, os.path.realpath(os.path.dirname(dest))):
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


# --------------------------------------------------------------------------
# Hugging Face datasets (hf:// references)
#
# hf://REPO_ID[?split=S&config_name=C&revision=R] is loaded on the host with
# datasets.load_dataset (into a cache under the job's temporary directory)
# and saved with save_to_disk into the reference's directory, which the
# function receives (datasets.load_from_disk reads it back).

HF_SCHEME = "hf://"
HF_QUERY_KEYS = ("split", "config_name", "revision")


def parse_hf_uri(uri: str) -> dict:
    """``{"repo_id", "split", "config_name", "revision"}`` of an hf:// URI
    (absent query keys are None); RunnerError naming what is accepted."""
    usage = "expected hf://REPO_ID[?split=…&config_name=…&revision=…]"
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "hf" or parts.fragment:
        raise RunnerError("not a Hugging Face dataset URI: %r (%s)" % (uri, usage))
    repo_id = (parts.netloc + parts.path).strip("/")
    if not repo_id:
        raise RunnerError("%s names no dataset (%s)" % (uri, usage))
    try:
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise RunnerError("%s: unreadable query %r (%s)" % (uri, parts.query, usage)) from None
    unknown = sorted(set(query) - set(HF_QUERY_KEYS))
    if unknown:
        raise RunnerError("%s: unknown query key%s %s (accepted: %s)" % (
            uri, "" if len(unknown) == 1 else "s", ", ".join(unknown), ", ".join(HF_QUERY_KEYS)))
    out = {"repo_id": repo_id}
    for key in HF_QUERY_KEYS:
        values = query.get(key, [])
        if len(values) > 1 or (values and not values[0]):
            raise RunnerError("%s: %s must be given once, with a value" % (uri, key))
        out[key] = values[0] if values else None
    return out


def import_datasets(uri: str, workspace: str | None):
    """The ``datasets`` package, imported with the workspace's entries off
    sys.path, so a user's own datasets.py cannot stand in for it."""
    module = sys.modules.get("datasets")
    if module is not None and hasattr(module, "load_dataset"):
        return module
    saved = list(sys.path)
    if workspace is not None:
        root = os.path.realpath(workspace)
        sys.path[:] = [p for p in sys.path if not _inside(root, os.path.realpath(p or os.getcwd()))]
    try:
        import datasets  # noqa: PLC0415 - only jobs with hf:// data need it
    except ImportError as err:
        raise RunnerError(
            "The 'datasets' package is required to load 'hf://' URIs (%s): add 'datasets' to the job's "
            "requirements or image (%s: %s)" % (uri, type(err).__name__, err)) from None
    finally:
        sys.path[:] = saved
    return datasets


def load_hf_dataset(datasets, uri: str, trust_remote_code: bool, target: str, cache_dir: str) -> None:
    """Loads the dataset ``uri`` names and saves it into ``target``."""
    spec = parse_hf_uri(uri)
    kwargs = {"name": spec["config_name"], "split": spec["split"], "revision": spec["revision"],
              "cache_dir": cache_dir}
    if trust_remote_code:
        warn(DATA, "%s: hf_trust_remote_code=True lets the dataset's repository run its own code on this host" % uri)
        import inspect  # noqa: PLC0415 - only trusted hf:// data needs it
        if "trust_remote_code" in inspect.signature(datasets.load_dataset).parameters:
            kwargs["trust_remote_code"] = True
        else:
            log(DATA, "datasets %s runs no dataset scripts: hf_trust_remote_code allows nothing more"
                % getattr(datasets, "__version__", "?"))
    log(DATA, "loading %s (Hugging Face dataset %s%s)" % (
        uri, spec["repo_id"], "".join(", %s=%s" % (k, spec[k]) for k in HF_QUERY_KEYS if spec[k])))
    dataset = datasets.load_dataset(spec["repo_id"], **kwargs)
    os.makedirs(target, exist_ok=True)
    dataset.save_to_disk(target)


def _check_ref(ref: dict) -> None:
    if not isinstance(ref.get("uri"), str) or not ref["uri"]:
        raise RunnerError("data reference without a 'uri': %r" % (ref,))
    mount = ref.get("mount_path")
    if mount is not None and not (isinstance(mount, str) and mount.startswith("/")):
        raise RunnerError("data reference %s: mount_path must be an absolute path, not %r" % (ref["uri"], mount))


# --------------------------------------------------------------------------
# Values on the wire
#
# User values (arguments, inputs, results) travel as JSON, losslessly:
# integers of any size (the int/str digit limit is lifted while encoding and
# decoding), nesting up to MAX_JSON_DEPTH levels, and strings holding
# surrogate code points (which JSON text can escape but UTF-8, hence most
# readers, cannot hold) as {"__kinetic_str__": [pieces]}: strings and the
# integer code points of the surrogates, in order. A dict with such a key,
# or one that would read as a tag or as a pickled leaf, travels as
# {"__kinetic_dict__": [[key, value], ...]}. Both tags are turned back into
# str and dict in arguments (and by the Python client in results).
#
# A Python client (spec.python_values) gets a result JSON would change (a
# tuple, a set, a dict with non-string keys, a lone surrogate, a dict shaped
# like one of these markers) pickled instead: see ``json_keeps``.

MAX_JSON_DEPTH = 512
STR_TAG = "__kinetic_str__"
DICT_TAG = "__kinetic_dict__"
_SURROGATE = re.compile("[\ud800-\udfff]")
# What json.dumps writes for a surrogate, and the tags' own names: only
# then is a value rewritten before encoding.
_NEEDS_TAGS = re.compile(r'\\u[dD][89a-fA-F][0-9a-fA-F]{2}|"__kinetic_(?:str|dict|pickle)__"')
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


@contextlib.contextmanager
def unlimited_int_digits():
    """Lifts Python's limit on int/str conversion (3.11+) for the duration."""
    get = getattr(sys, "get_int_max_str_digits", None)
    if get is None:
        yield
        return
    previous = get()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(previous)


def json_depth(text: str) -> int:
    """How deeply the JSON ``text`` nests lists and objects."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _str_to_wire(text: str):
    if not _SURROGATE.search(text):
        return text
    pieces, run = [], []
    for char in text:
        if "\ud800" <= char <= "\udfff":
            if run:
                pieces.append("".join(run))
                run = []
            pieces.append(ord(char))
        else:
            run.append(char)
    if run:
        pieces.append("".join(run))
    return {STR_TAG: pieces}


def _looks_tagged(value: dict) -> bool:
    return (len(value) == 1 and (STR_TAG in value or DICT_TAG in value)) or PICKLE_KEY in value


# Keys that make a dict read as the protocol's rather than the user's: the
# Python client pickles a dict holding one, on the way in and back.
WIRE_MARKERS = frozenset((PICKLE_KEY, "__kinetic_data__", "__data_ref__", STR_TAG, DICT_TAG))


def json_keeps(value) -> bool:
    """Whether JSON carries ``value`` exactly, so a Python client reads back
    an equal value of the same types: ``None``, ``bool``, ``int``, finite
    ``float``, ``str`` without surrogates, lists, and dicts whose keys are
    such strings and not a marker (``WIRE_MARKERS``). The rule the client's
    ``kinetic._values.encode`` applies to arguments; subclasses do not
    count, and neither does a list or dict met twice (a cycle, or a value
    shared that JSON would copy)."""
    seen = set()
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if item is None or kind is bool or kind is int:
            continue
        if kind is float:
            if item != item or item in (float("inf"), float("-inf")):
                return False
            continue
        if kind is str:
            if _SURROGATE.search(item):
                return False
            continue
        if kind is not list and kind is not dict:
            return False
        if id(item) in seen:
            return False
        seen.add(id(item))
        if kind is list:
            stack.extend(item)
            continue
        for key in item:
            if type(key) is not str or key in WIRE_MARKERS or _SURROGATE.search(key):
                return False
        stack.extend(item.values())
    return True


def to_wire(value, depth: int = 0):
    """``value`` with the strings and dicts JSON cannot carry as they are tagged."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError("the value is nested more than %d levels deep; values are limited to %d levels"
                         % (MAX_JSON_DEPTH, MAX_JSON_DEPTH))
    if isinstance(value, str):
        return _str_to_wire(value)
    if isinstance(value, dict):
        if _looks_tagged(value) or any(isinstance(k, str) and _SURROGATE.search(k) for k in value):
            return {DICT_TAG: [[to_wire(k, depth + 2), to_wire(v, depth + 2)] for k, v in value.items()]}
        return {k: to_wire(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v, depth + 1) for v in value]
    return value


def from_wire(value):
    """The value ``to_wire`` encoded: tags turned back into str and dict."""
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(STR_TAG), list):
            pieces = value[STR_TAG]
            if all(isinstance(p, str) or (type(p) is int and 0xD800 <= p <= 0xDFFF) for p in pieces):
                return "".join(p if isinstance(p, str) else chr(p) for p in pieces)
        if len(value) == 1 and isinstance(value.get(DICT_TAG), list):
            pairs = value[DICT_TAG]
            if all(isinstance(p, list) and len(p) == 2 for p in pairs):
                return {_hashable(from_wire(k)): from_wire(v) for k, v in pairs}
        return {k: from_wire(v) for k, v in value.items()}
    return value


def _hashable(key):
    return key if isinstance(key, (str, int, float, bool)) or key is None else json.dumps(key)


def encode_value(value) -> str:
    """The JSON text of a user value, as the protocol carries it; ValueError
    or TypeError when it cannot be (NaN, infinities, objects JSON has no
    form for, nesting beyond MAX_JSON_DEPTH)."""
    limit = "values are limited to %d levels" % MAX_JSON_DEPTH
    try:
        with unlimited_int_digits():
            text = json.dumps(value, allow_nan=False)
            if _NEEDS_TAGS.search(text):
                text = json.dumps(to_wire(value), allow_nan=False)
    except RecursionError:
        raise ValueError("the value is nested too deeply to encode; " + limit) from None
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError("the value is nested %d levels deep; %s" % (depth, limit))
    return text


# --------------------------------------------------------------------------
# Failures and results


def qualified_name(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    return name if module in (None, "builtins") else "%s.%s" % (module, name)


def describe_exit(code) -> str:
    return "function called sys.exit(%r)" % (code,)


def _user_traceback(tb):
    """The user's frames of ``tb``: the runner's own frames, importlib's and
    the job-side ``kinetic`` module's (a decorated function called in the
    job passes through its wrapper) are left out wherever they are in the
    chain, when user frames remain."""
    here = os.path.abspath(__file__)
    importlib_dir = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep
    job_module = os.sep + JOB_MODULE_DIR + os.sep

    def own(filename: str) -> bool:
        return (filename == here or filename.startswith(("<frozen importlib", importlib_dir))
                or job_module in filename)

    kept = []
    current = tb
    while current is not None:
        if not own(current.tb_frame.f_code.co_filename):
            kept.append(current)
        current = current.tb_next
    if not kept:
        return tb
    import types
    chain = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


class PhaseFailure(Exception):
    """A phase failed; carries the ``error`` object of the failure result."""

    def __init__(self, phase: str, error_type: str, message: str, tb: str) -> None:
        super().__init__("%s: %s" % (error_type, message))
        self.error = {"type": error_type, "message": message, "traceback": tb, "phase": phase}

    @classmethod
    def from_exception(cls, phase: str, exc: BaseException, user_code: bool) -> PhaseFailure:
        if isinstance(exc, RunnerError):
            error_type, message = "RunnerError", str(exc)
        elif isinstance(exc, SystemExit):
            error_type, message = "SystemExit", describe_exit(exc.code)
        elif user_code or not isinstance(exc, Exception):
            error_type, message = qualified_name(type(exc)), _safe_str(exc)
        else:
            error_type, message = "RunnerError", "%s: %s" % (qualified_name(type(exc)), _safe_str(exc))
        tb = exc.__traceback__
        if user_code:
            tb = _user_traceback(tb)
        import traceback
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        return cls(phase, error_type, message, text)


def _safe_str(value) -> str:
    try:
        return str(value)
    except Exception as err:  # noqa: BLE001
        return "<unprintable %s: %s>" % (type(value).__name__, type(err).__name__)


def _safe_repr(value) -> str:
    try:
        text = repr(value)
    except Exception as err:  # noqa: BLE001
        text = "<unreprable %s: %s>" % (type(value).__name__, _safe_str(err))
    return text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT] + "..."


def success_document(value, host_index: int) -> str:
    """result.json for ``value``; raises ValueError (or TypeError) when the
    value cannot travel as JSON (see ``encode_value``)."""
    return '{"protocol": %d, "success": true, "value": %s, "host_index": %d}' % (
        PROTOCOL, encode_value(value), host_index)


def pickled_document(value, host_index: int) -> str:
    """result.json for ``value`` pickled (``encode_python_value``): the leaf
    is the protocol's own, so it is written as it is, never tagged."""
    return '{"protocol": %d, "success": true, "value": %s, "host_index": %d}' % (
        PROTOCOL, json.dumps(encode_python_value(value)), host_index)


def failure_document(error: dict, host_index: int) -> str:
    return json.dumps({"protocol": PROTOCOL, "success": False, "host_index": host_index, "error": error})


# --------------------------------------------------------------------------
# The run


class Runner:
    def __init__(self, spec_doc: dict, storage: Storage, workdir: str | None, mount_root: str, environ=None) -> None:
        self.spec_doc = spec_doc
        self.redactor = Redactor.from_spec(spec_doc, os.environ if environ is None else environ)
        self.storage = storage
        self.workdir = workdir
        self.mount_root = mount_root
        self.environ = os.environ if environ is None else environ
        self.result_uri = spec_doc["result_uri"]
        self.host_index = 0
        self.attempt = 1
        self.tmp: str | None = None
        self.spec: Spec | None = None
        self.plan: PlanActions | None = None
        self.job_module_dir: str | None = None

    # -- driver

    def run(self) -> int:
        success = False
        try:
            self._phase(STARTUP, self.startup)
            self._phase(DOWNLOAD, self.download)
            self._phase(VERIFY, self.verify)
            if self.spec.requirements is not None:
                self._phase(INSTALL, self.install)
            self._phase(EXTRACT, self.extract)
            self._phase(ENVIRONMENT, self.setup_environment)
            args, kwargs = self._phase(DATA, self.resolve_data)
            if self.spec.entrypoint["kind"] == "command":
                if self.spec.debug is not None:
                    self._phase(DEBUG, self.refuse_command_debug)
                value = self._phase(EXECUTE, self.run_command)
            else:
                fn = self._phase(LOAD, self.load_entrypoint, user_code=True)
                if self.spec.python_values is not None:
                    args, kwargs = self._phase(DATA, lambda: (decode_python_values(args), decode_python_values(kwargs)),
                                               user_code=True)
                debugger = None
                if self.spec.debug is not None and self.host_index == 0:
                    debugger = self._phase(DEBUG, self.start_debugger)
                elif self.spec.debug is not None:
                    self._phase(DEBUG, self.wait_for_leader)
                value = self.call(fn, args, kwargs, debugger)
            if self.host_index != 0:
                log(EXECUTE, "host %d succeeded (only the leader writes a success result)" % self.host_index)
                return EXIT_OK
            document = self._phase(SERIALIZE, lambda: self.serialize(value))
            success = True
        except PhaseFailure as failure:
            error = self.redactor.error(failure.error)
            log(error["phase"], "failed: %s: %s" % (error["type"], error["message"]))
            if error["traceback"]:
                write_stderr(error["traceback"])
            document = failure_document(error, self.host_index)
        target = result_target(self.spec_doc, self.host_index)
        if target is None:
            log(UPLOAD, "spec.json names no result URI for host %d (see worker_result_uris); nothing written"
                % self.host_index)
            return EXIT_FAILED
        try:
            self.storage.write_bytes(target, document.encode("utf-8"))
        except Exception as err:  # noqa: BLE001 - nothing is left to report to
            log(UPLOAD, "cannot write the result to %s: %s: %s" % (target, type(err).__name__, err))
            if success or not isinstance(err, OSError):
                return EXIT_FAILED
            # A full disk: the failure without its traceback may still fit,
            # and says what failed rather than nothing.
            error = dict(error, traceback="(traceback not kept: %s)" % _safe_str(err))
            try:
                self.storage.write_bytes(target, failure_document(error, self.host_index).encode("utf-8"))
            except Exception as again:  # noqa: BLE001
                log(UPLOAD, "cannot write the failure without its traceback either: %s: %s"
                    % (type(again).__name__, again))
                return EXIT_FAILED
            log(UPLOAD, "wrote %s (failure, without its traceback)" % target)
            return EXIT_FAILED
        log(UPLOAD, "wrote %s (%s)" % (target, "success" if success else "failure"))
        return EXIT_OK if success else EXIT_FAILED

    def _phase(self, phase: str, fn, user_code: bool = False):
        flush_streams()
        try:
            return fn()
        except PhaseFailure:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a result
            raise PhaseFailure.from_exception(phase, exc, user_code) from None
        finally:
            flush_streams()

    def cleanup(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # -- phases

    def startup(self) -> None:
        self.host_index, warnings = host_index_from_env(self.environ)
        for message in warnings:
            warn(STARTUP, message)
        self.spec = Spec(self.spec_doc)
        if self.workdir:
            self.tmp = make_run_dir(self.workdir)
        else:
            import tempfile
            self.tmp = tempfile.mkdtemp(prefix="kinetic-run-")
        log(STARTUP, "job %s, host %d, runner protocol %d, Python %s" % (
            self.spec.job_id, self.host_index, PROTOCOL, sys.version.split()[0]))
        self.attempt, how = resolve_attempt(self.spec, self.storage, self.environ, self.host_index)
        log(STARTUP, "attempt %d (%s)" % (self.attempt, how))

    def download(self) -> None:
        for name, artifact, dest in self._artifacts():
            size = self.storage.download(artifact["uri"], dest)
            log(DOWNLOAD, "%s: %s (%d bytes)" % (name, artifact["uri"], size))

    def _artifacts(self):
        yield "context", self.spec.context, os.path.join(self.tmp, "context.zip")
        if self.spec.requirements is not None:
            yield "requirements", self.spec.requirements, os.path.join(self.tmp, "requirements.txt")

    def verify(self) -> None:
        for name, artifact, path in self._artifacts():
            got = sha256_file(path)
            if got != artifact["sha256"]:
                raise RunnerError(
                    "%s SHA-256 mismatch: expected %s, got %s; refusing to run (the file may have been tampered with)"
                    % (name, artifact["sha256"], got))
        log(VERIFY, "SHA-256 verified")

    def install(self) -> None:
        import shlex
        path = os.path.join(self.tmp, "requirements.txt")
        with open(path, "rb") as f:
            if not f.read().strip():
                log(INSTALL, "requirements file is empty; nothing to install")
                return
        argv = install_command(self.environ, path)
        log(INSTALL, "running %s" % shlex.join(argv))
        code, tail = run_capturing_stderr(argv)
        if code != 0:
            raise RunnerError("%s exited with code %d%s" % (
                shlex.join(argv), code, ("; stderr tail:\n" + tail) if tail else ""))

    def extract(self) -> None:
        workspace = os.path.join(self.tmp, "workspace")
        count = extract_context(os.path.join(self.tmp, "context.zip"), workspace, self.spec.extract_limits)
        log(EXTRACT, "%d entries extracted" % count)
        plan = read_plan(self.spec.plan, workspace)
        self.plan = plan_actions(plan, workspace)
        for message in self.plan.warnings:
            warn(EXTRACT, message)
        sys.path[0:0] = self.plan.sys_path
        self.job_module_dir = place_job_module(self.tmp)
        if self.plan.legacy:
            log(EXTRACT, "no usable plan; workspace root first on sys.path, cwd unchanged")
        else:
            os.chdir(self.plan.cwd)
            log(EXTRACT, "plan applied: %d sys.path entr%s, cwd %s" % (
                len(self.plan.sys_path), "y" if len(self.plan.sys_path) == 1 else "ies",
                os.path.relpath(self.plan.cwd, workspace)))

    def setup_environment(self) -> None:
        spec = self.spec
        missing = [name for name in spec.env_names if name not in self.environ]
        if missing:
            raise RunnerError("missing environment variables listed in spec.env_names: %s" % ", ".join(missing))
        env = self.environ
        env["KINETIC_JOB_ID"] = spec.job_id
        env[ATTEMPT_ENV] = str(self.attempt)
        if spec.output_dir is not None:
            env["KINETIC_OUTPUT_DIR"] = spec.output_dir
        env.update(topology_env(spec, self.host_index, env))
        volumes = {}
        for volume in spec.volumes:
            mount = volume["mount_path"]
            volumes[mount] = mount_target(self.mount_root, mount)
        env["KINETIC_VOLUMES"] = json.dumps(volumes)
        log(ENVIRONMENT, "%d captured variable%s present; KINETIC_* set" % (
            len(spec.env_names), "" if len(spec.env_names) == 1 else "s"))

    def resolve_data(self) -> tuple:
        resolver = DataResolver(self.storage, os.path.join(self.tmp, "data"), self.mount_root,
                                os.path.join(self.tmp, "workspace"))
        for volume in self.spec.volumes:
            resolver.resolve_volume(volume["mount_path"], volume["data"])
        args = resolver.walk(from_wire(self.spec.args))
        kwargs = resolver.walk(from_wire(self.spec.kwargs))
        if self.spec.volumes or resolver.objects:
            log(DATA, "%d volume%s, %d object%s fetched" % (
                len(self.spec.volumes), "" if len(self.spec.volumes) == 1 else "s",
                resolver.objects, "" if resolver.objects == 1 else "s"))
        return args, kwargs

    def load_entrypoint(self):
        entry = self.spec.entrypoint
        function = entry["function"]
        if entry.get("module") == RUNNER_MODULE and function == "call_pickled":
            ensure_cloudpickle(self.environ)
            log(LOAD, "%s.%s (a function pickled by value)" % (RUNNER_MODULE, function))
            return call_pickled
        if entry.get("module") is not None:
            owner = entry["module"]
            module = importlib.import_module(owner)
        else:
            module = self._load_path(entry["path"])
            owner = module.__name__
        target = module
        for part in function.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise RunnerError("module %r has no attribute %r" % (owner, function)) from None
        # A function decorated with the kinetic module's @kinetic.run is the
        # decorator's wrapper here; the job runs the function it wraps.
        target = getattr(target, "__kinetic_function__", target)
        if not callable(target):
            raise RunnerError("%s.%s is not callable (it is a %s)" % (owner, function, type(target).__name__))
        log(LOAD, "%s.%s" % (owner, function))
        return target

    def _load_path(self, rel: str):
        workspace = os.path.join(self.tmp, "workspace")
        path = os.path.normpath(os.path.join(workspace, rel))
        if not _inside(os.path.realpath(workspace), os.path.realpath(path)):
            raise RunnerError("entrypoint path %r is outside the workspace" % rel)
        if not os.path.isfile(path):
            raise RunnerError("entrypoint path %r is not a file in the context" % rel)
        name = module_name_for_path(os.path.relpath(path, workspace))
        existing = sys.modules.get(name)
        if existing is not None and getattr(existing, "__file__", None) != path:
            name = "_kinetic_entry_" + name.replace(".", "_")
        loader = importlib.machinery.SourceFileLoader(name, path)
        module_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module

    def refuse_command_debug(self) -> None:
        raise RunnerError("a command cannot run under the debugger; debug runs a Python function")

    def start_debugger(self):
        """Start debugpy, say where it listens, and wait for a client; gives the module."""
        settings = self.spec.debug
        debugpy = import_debugpy()
        host, port = debug_listen_address(settings, self.environ)
        self.environ["PYTHONBREAKPOINT"] = "debugpy.breakpoint"
        host, port = debugpy.listen((host, port))
        workspace = os.path.realpath(os.path.join(self.tmp, "workspace"))
        marker = json.dumps({"host": host, "port": port, "workspace": workspace})
        self.storage.write_bytes(settings["ready_uri"], marker.encode("utf-8"))
        timeout = settings["wait_timeout_seconds"]
        log(DEBUG, "debugpy listens on %s:%d; waiting up to %ds for a debugger (kinetic jobs debug %s)" % (
            host, port, timeout, self.spec.job_id))
        flush_streams()
        waiter = threading.Thread(target=debugpy.wait_for_client, name="kinetic-debug-wait", daemon=True)
        waiter.start()
        waiter.join(timeout)
        if waiter.is_alive():
            debugpy.wait_for_client.cancel()
            raise RunnerError("no debugger attached within %ds (KINETIC_DEBUG_WAIT_TIMEOUT); attach with "
                              "`kinetic jobs debug %s` while the job waits" % (timeout, self.spec.job_id))
        leader_ready = settings["leader_ready_uri"]
        if leader_ready is not None:
            # Releases the other hosts of a multi-host job (wait_for_leader).
            self.storage.write_bytes(leader_ready, b"", "application/octet-stream")
        log(DEBUG, "debugger attached; stopping before the call")
        return debugpy

    def wait_for_leader(self) -> None:
        """On a host other than the leader: wait, when told to, until the leader's debugger has a client."""
        if not waits_for_leader(self.environ):
            return
        settings = self.spec.debug
        leader_ready = settings["leader_ready_uri"]
        if leader_ready is None:
            raise RunnerError("%s=1 asks this host to wait for the leader's debugger, but spec.debug names "
                              "no leader_ready_uri to wait for" % WAIT_LEADER_ENV)
        bound = settings["wait_timeout_seconds"] + LEADER_SETUP_GRACE_SECONDS
        log(DEBUG, "host %d waits up to %ds for the leader's debugger to have a client (%s)" % (
            self.host_index, bound, leader_ready))
        flush_streams()
        waited = wait_for_leader(self.storage, leader_ready, result_target(self.spec_doc, 0), bound)
        log(DEBUG, "the leader's debugger has a client (after %.1fs); host %d runs the function" % (
            waited, self.host_index))

    def call(self, fn, args: list, kwargs: dict, debugger=None):
        """The user's call; its exceptions are reported with their own names."""
        flush_streams()
        try:
            if debugger is not None:
                # Step into the user's function from here.
                debugger.breakpoint()
            value = fn(*args, **kwargs)
        except SystemExit as exc:
            if exc.code is None or exc.code == 0:
                return None
            raise PhaseFailure.from_exception(EXECUTE, exc, True) from None
        except BaseException as exc:  # noqa: BLE001
            raise PhaseFailure.from_exception(EXECUTE, exc, True) from None
        finally:
            flush_streams()
        return value

    def run_command(self):
        import shlex
        import subprocess
        argv = self.spec.entrypoint["argv"]
        cwd = os.path.join(self.tmp, "workspace") if self.plan.legacy else self.plan.cwd
        env = dict(self.environ)
        env["PYTHONPATH"] = os.pathsep.join([self.job_module_dir] + self.plan.sys_path
                                            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        log(EXECUTE, "running %s" % shlex.join(argv))
        flush_streams()
        try:
            child = subprocess.Popen(argv, cwd=cwd, env=env)
        except OSError as err:
            raise PhaseFailure(EXECUTE, "CommandFailed", "cannot start %s: %s" % (shlex.join(argv), err), "")
        code = wait_forwarding_signals(child)
        if code == 0:
            return None
        if code < 0:
            try:
                signame = signal.Signals(-code).name
            except ValueError:
                signame = "signal %d" % -code
            message = "%s was killed by %s" % (shlex.join(argv), signame)
        else:
            message = "%s exited with code %d" % (shlex.join(argv), code)
        raise PhaseFailure(EXECUTE, "CommandFailed", message, "")

    def serialize(self, value) -> str:
        if self.spec.python_values is not None and not json_keeps(value):
            # The client reads pickles: a value JSON would change goes back pickled, exactly.
            try:
                return pickled_document(value, self.host_index)
            except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
                import traceback
                raise PhaseFailure(
                    SERIALIZE, "ResultNotJSON",
                    "the return value cannot travel as JSON without changing its types, and cannot be "
                    "pickled (%s: %s): %s" % (type(err).__name__, err, _safe_repr(value)),
                    "".join(traceback.format_exception(type(err), err, err.__traceback__))) from None
        try:
            return success_document(value, self.host_index)
        except (TypeError, ValueError, RecursionError) as err:
            advice = ("; return JSON values (dict, list, str, int, float, bool, None), e.g. list(...) "
                      "or str(...), or call the function through the Python API (kinetic.run), which "
                      "carries Python values")
            if self.spec.python_values is not None:
                advice = "; return a value that JSON or pickle can carry"
                # The client reads pickles: a value JSON cannot hold goes back pickled.
                try:
                    return pickled_document(value, self.host_index)
                except Exception as pickle_err:  # noqa: BLE001 - reported below with the JSON error
                    err = TypeError("%s; pickling it failed too: %s: %s" % (err, type(pickle_err).__name__, pickle_err))
            # The encoder's frames say nothing the message does not: no traceback.
            raise PhaseFailure(
                SERIALIZE, "ResultNotJSON",
                "the function returned %s, which cannot be encoded as JSON (%s): %s%s"
                % (_article(type(value).__name__), err, _safe_repr(value), advice),
                "") from None


def _article(name: str) -> str:
    """``a set``, ``an int``: the returned type as a sentence names it."""
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def module_name_for_path(rel: str) -> str:
    """``pkg/file.py`` → ``pkg.file``; ``pkg/__init__.py`` → ``pkg``; other characters become ``_``."""
    parts = rel.replace(os.sep, "/").split("/")
    parts[-1] = os.path.splitext(parts[-1])[0]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    cleaned = []
    for part in parts:
        part = re.sub(r"\W", "_", part)
        if not part or part[0].isdigit():
            part = "_" + part
        cleaned.append(part)
    return ".".join(cleaned)


# Files up to this size are hashed with the interpreter's own SHA-256, which
# loads in microseconds; hashlib's loads OpenSSL, which takes milliseconds
# and pays off only on larger files.
SMALL_FILE_HASH = 1 << 20


def sha256_file(path: str, prefix: bytes = b"") -> str:
    """SHA-256 of ``prefix`` then the file's bytes, as hex."""
    digest = None
    if os.path.getsize(path) <= SMALL_FILE_HASH:
        digest = builtin_sha256(prefix)
    if digest is None:
        import hashlib
        digest = hashlib.sha256(prefix)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)


def builtin_sha256(data: bytes):
    """A SHA-256 object from the interpreter's built-in module (``_sha2``
    since 3.12, ``_sha256`` before), or None when it has none."""
    for module in ("_sha2", "_sha256"):
        try:
            return __import__(module).sha256(data)
        except (ImportError, AttributeError):
            continue
    return None


def install_command(environ, requirements_path: str | None, packages: list | None = None) -> list:
    """The command that installs a requirements file (or, with
    ``requirements_path`` None, the named ``packages``)."""
    what = ["-r", requirements_path] if requirements_path is not None else list(packages or [])
    override = environ.get("KINETIC_INSTALL_COMMAND")
    if override:
        try:
            argv = json.loads(override)
        except ValueError:
            argv = None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise RunnerError("KINETIC_INSTALL_COMMAND must be a JSON list of strings")
        return argv + ([requirements_path] if requirements_path is not None else what)
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--system"] + what
    return [sys.executable, "-m", "pip", "install"] + what


def run_capturing_stderr(argv: list) -> tuple:
    """Runs ``argv`` with its stdout on our stderr and its stderr echoed; returns (code, stderr tail)."""
    import shlex
    import subprocess
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.__stderr__.fileno(), stderr=subprocess.PIPE)
    except OSError as err:
        raise RunnerError("cannot start %s: %s" % (shlex.join(argv), err)) from None
    tail = collections.deque(maxlen=STDERR_TAIL_LINES)
    out = sys.__stderr__.buffer
    for line in child.stderr:
        out.write(line)
        out.flush()
        tail.append(line.decode("utf-8", "replace").rstrip("\n"))
    child.stderr.close()
    return child.wait(), "\n".join(tail)


def wait_forwarding_signals(child: subprocess.Popen) -> int:
    """Waits for ``child``, passing SIGTERM and SIGINT on to it meanwhile."""
    previous = {}

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, forward)
    try:
        return child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# --------------------------------------------------------------------------
# Entry point


def make_run_dir(base: str) -> str:
    """A new directory ``kinetic-run-…`` only we can enter under ``base``, as
    ``tempfile.mkdtemp`` makes it (without importing tempfile and random)."""
    while True:
        path = os.path.join(base, "kinetic-run-%s" % os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.abspath(path)


# The runner's options, once for both readers below: (flag, default,
# accepted values or None, help). The attribute is the flag without its
# dashes, `-` as `_`.
RUNNER_OPTIONS = (
    ("--spec", None, None, "spec.json URI: gs://, file:// or an absolute path"),
    ("--workdir", None, None, "where to make the temporary directory (default: system temp)"),
    ("--mount-root", "/", None, "directory volume mount paths are placed under (default /)"),
    ("--log-copy", "on", ("on", "off"),
     "copy the output to spec.json's log_uris while running (default on; off when the "
     "backend keeps the output and copies it itself)"),
)


def _option_name(flag: str) -> str:
    return flag[2:].replace("-", "_")


def parse_args(argv: list):
    # What the backends pass (each option followed by its value) is read
    # here; anything else goes through argparse, for its errors and help.
    options = {flag: (default, choices) for flag, default, choices, _ in RUNNER_OPTIONS}
    if len(argv) % 2 == 0 and all(
            argv[i] in options and not argv[i + 1].startswith("-") for i in range(0, len(argv), 2)):
        args = {_option_name(flag): default for flag, (default, _) in options.items()}
        for i in range(0, len(argv), 2):
            args[_option_name(argv[i])] = argv[i + 1]
        if all(choices is None or args[_option_name(flag)] in choices
               for flag, (_, choices) in options.items()):
            import types
            return types.SimpleNamespace(**args)
    import argparse

    class _ArgumentParser(argparse.ArgumentParser):
        def error(self, message):
            log(STARTUP, "bad invocation: %s" % message)
            sys.exit(EXIT_BAD_INVOCATION)

    parser = _ArgumentParser(prog="kinetic_runner.py", allow_abbrev=False,
                             description="Runs one Kinetic job (runner protocol v1).")
    for flag, default, choices, text in RUNNER_OPTIONS:
        parser.add_argument(flag, default=default, choices=choices, help=text)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        log(STARTUP, "ignoring unknown arguments: %s" % " ".join(unknown))
    return args


def live_non_daemon_threads() -> list:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def main(argv: list | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.spec:
        log(STARTUP, "bad invocation: --spec URI is required")
        return EXIT_BAD_INVOCATION
    storage = Storage()
    try:
        spec_doc = load_spec(storage, args.spec)
    except RunnerError as err:
        log(STARTUP, "bad invocation: %s" % err)
        return EXIT_BAD_INVOCATION
    start_cwd = os.getcwd()
    runner = Runner(spec_doc, storage, args.workdir, args.mount_root)
    uploader = start_log_upload(spec_doc, storage, os.environ) if args.log_copy == "on" else None
    output = RedactedOutput(runner.redactor, uploader) if runner.redactor or uploader else None
    try:
        try:
            code = runner.run()
        finally:
            flush_streams()
            try:
                os.chdir(start_cwd)
            except OSError:
                pass
            runner.cleanup()
        threads = live_non_daemon_threads()
        if threads:
            warn(EXECUTE, "non-daemon threads still running: %s; exiting without waiting for them"
                 % ", ".join(repr(t.name) for t in threads))
            flush_streams()
            if output is not None:
                output.close()
                output = None
            finish_log_upload(uploader)
            os._exit(code)
        return code
    finally:
        if output is not None:
            output.close()
        finish_log_upload(uploader)


def finish_log_upload(uploader) -> None:
    """Copies the rest of the output as the last chunk (once)."""
    if uploader is not None and not uploader.closing:
        if not uploader.close():
            log(UPLOAD, "the end of the job's output could not be copied to %s" % uploader.prefix)


if __name__ == "__main__":
    sys.exit(main())
