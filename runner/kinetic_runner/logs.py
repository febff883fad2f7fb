"""Stored logs: the job's output copied to the store in chunks while it runs."""

from __future__ import annotations

import re
import threading
import time

from .protocol import STARTUP, warn
from .gcs import Storage
from .redaction import write_all
from .attempts import host_index_from_env


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
                write_all(2, ("[kinetic] logs: warning: cannot copy output to %s: %s: %s (will retry)\n"
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


def start_log_upload(spec_doc: dict, storage: Storage, environ, fresh: bool = False):
    """A LogUploader for this host when spec.json names a log prefix for it, else None.
    Not being able to list the prefix only costs the numbering: it starts at 0.
    ``fresh``: the job was just made (a block's attempt, run once): nothing
    is under its prefix, so it is not listed."""
    host_index, _ = host_index_from_env(environ)
    prefix = log_prefix(spec_doc, host_index)
    if prefix is None:
        return None
    if fresh:
        return LogUploader(storage, prefix, 0)
    try:
        seq = next_log_seq(storage, prefix)
    except Exception as err:  # noqa: BLE001 - copying logs never stops a job
        warn(STARTUP, "cannot list %s: %s: %s; numbering its log chunks from 0" % (prefix, type(err).__name__, err))
        seq = 0
    return LogUploader(storage, prefix, seq)
