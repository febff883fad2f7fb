"""The protocol's constants (version, phases, exit codes, limits), the
runner's own log lines on stderr, its errors, and the spec field reader."""

from __future__ import annotations

import sys


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


_MISSING = object()


def spec_field(doc: dict, key: str, kind: type, default=_MISSING, where: str = "spec."):
    value = doc.get(key)
    if value is None:
        if default is _MISSING:
            raise RunnerError("%s%s is required" % (where, key))
        return default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise RunnerError("%s%s must be a %s" % (where, key, kind.__name__))
    return value
