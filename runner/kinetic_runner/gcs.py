"""Storage: ``gs://`` (GCS XML API), ``file://`` and absolute paths; where
the result goes."""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
import urllib.parse

from .protocol import CHUNK, DEFAULT_GCS_ENDPOINT, NotFound, RunnerError, StorageError, TOKEN_PATH


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
    partial = "%s.%d.%d.part" % (path, os.getpid(), threading.get_ident())
    try:
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        except FileNotFoundError:
            # Its folder is made only when missing: a result's is there
            # already (its spec.json is), and a map writes one per input.
            os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        with open(fd, "wb") as f:
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
