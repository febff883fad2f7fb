"""Redaction of secret values in the job's output and the runner's."""

from __future__ import annotations

import os
import select
import threading

from .protocol import flush_streams


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
            write_all(target, data)

    def close(self, timeout: float = 5.0) -> None:
        """Puts the descriptors back and waits for what is in the pipes."""
        flush_streams()
        for fd, target, _ in self.streams:
            os.dup2(target, fd)
        for _, target, thread in self.streams:
            thread.join(timeout)
            os.close(target)
        self.streams = []


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
