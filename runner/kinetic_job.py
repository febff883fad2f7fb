"""Kinetic, as a job sees it: the ``kinetic`` module inside every job.

The runner places this file on the job's ``sys.path`` as ``kinetic``, ahead
of anything else (a ``kinetic`` the image or the local interpreter has
installed included), so the user's ``import kinetic`` works in every image
and gives the remote side of the API:

* a function decorated with ``@kinetic.run(...)`` and called inside a job
  runs there, in-process, once: a job never submits a copy of itself;
* ``kinetic.Data``, ``kinetic.JobStatus`` and the error classes are here;
* what only a client can do (``run_async``, ``run_async_map``, ``attach``,
  ``attach_batch``, ``list_jobs``, a ``JobHandle`` or ``BatchHandle``)
  raises :class:`ClientOnlyError`, which says why.

Plain Python, standard library only. The engine embeds this file beside the
runner (``crates/core/src/protocol.rs``).
"""

import enum
import functools
import os

__all__ = [
    "BatchError",
    "BatchHandle",
    "ClientOnlyError",
    "Data",
    "DebugSession",
    "JobHandle",
    "JobStatus",
    "RemoteError",
    "RemoteTraceback",
    "attach",
    "attach_batch",
    "list_jobs",
    "run",
]

#: True in a job: this module is the job's ``kinetic``, not the client's.
IN_JOB = True


class ClientOnlyError(RuntimeError):
    """A call only a client can make, made inside a job."""


def _client_only(what: str):
    return ClientOnlyError(
        "%s cannot be called inside a Kinetic job (job %s): a job does not submit or manage jobs. "
        "Call it from the client, or call the decorated function directly to run it here, in this job"
        % (what, os.environ.get("KINETIC_JOB_ID", "?")))


class RemoteTraceback(Exception):
    """The remote traceback, chained as ``__cause__`` of a rebuilt exception."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return "\n\n" + self.tb.rstrip("\n")


class RemoteError(RuntimeError):
    """A job's error whose type cannot be rebuilt (or a runner phase's own)."""

    def __init__(self, type_name: str, message: str):
        super().__init__("%s: %s" % (type_name, message))
        self.type_name = type_name


class BatchError(Exception):
    """A batch's failure (raised by clients; here for ``except`` clauses)."""

    def __init__(self, group_id: str = "", failures=(), partial_results=(), message: str = ""):
        super().__init__(message or "batch %s failed" % group_id)
        self.group_id = group_id
        self.failures = list(failures)
        self.partial_results = list(partial_results)


class JobStatus(enum.Enum):
    """Observable status of a remote job."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    NOT_FOUND = "NOT_FOUND"

    @property
    def is_terminal(self) -> bool:
        """Whether the job has ended (``SUCCEEDED``, ``FAILED`` or ``NOT_FOUND``)."""
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.NOT_FOUND)


class Data:
    """A reference to data. Inside a job a ``Data`` argument has already
    become a plain path; one made here stands for its path."""

    __slots__ = ("_raw", "_path", "_fuse", "_hf_trust_remote_code")

    def __init__(self, path, fuse: bool = False, hf_trust_remote_code: bool = False):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("kinetic.Data(path): expected a str path or gs:// URI, got %s" % type(path).__name__)
        raw = os.fspath(path)
        if not raw:
            raise ValueError("kinetic.Data(path): the path is empty")
        self._raw, self._fuse, self._hf_trust_remote_code = raw, bool(fuse), bool(hf_trust_remote_code)

    @property
    def path(self) -> str:
        """The path or URI as given."""
        return self._raw

    @property
    def fuse(self) -> bool:
        """Whether FUSE mounting was asked for."""
        return self._fuse

    def __fspath__(self) -> str:
        return self._raw

    def __repr__(self) -> str:
        return "Data(%r)" % self._raw


class _ClientOnlyObject:
    """A client's object (a handle, a debug session): none exists in a job."""

    def __init__(self, *args, **kwargs):
        raise _client_only("kinetic.%s" % type(self).__name__)


class JobHandle(_ClientOnlyObject):
    """A client's handle on a job."""

    @classmethod
    def from_dict(cls, d):
        raise _client_only("kinetic.JobHandle.from_dict")


class BatchHandle(_ClientOnlyObject):
    """A client's handle on a batch."""


class DebugSession(_ClientOnlyObject):
    """A client's debug session."""


def attach(job_id, *args, **kwargs):
    """Client only: raises :class:`ClientOnlyError`."""
    raise _client_only("kinetic.attach(%r)" % (job_id,))


def attach_batch(group_id, *args, **kwargs):
    """Client only: raises :class:`ClientOnlyError`."""
    raise _client_only("kinetic.attach_batch(%r)" % (group_id,))


def list_jobs(*args, **kwargs):
    """Client only: raises :class:`ClientOnlyError`."""
    raise _client_only("kinetic.list_jobs()")


def run(accelerator: str = "tpu-v5e-1", **options):
    """``@kinetic.run(...)`` inside a job: the decorated function, called,
    runs here, in this process, once. ``run_async`` and ``run_async_map``
    raise :class:`ClientOnlyError`."""
    if callable(accelerator) and not options:
        raise TypeError("@kinetic.run needs its parentheses: @kinetic.run(accelerator=...)")

    def decorator(fn):
        fn = getattr(fn, "__kinetic_function__", fn)
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "function")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)

        def run_async(*args, **kwargs):
            raise _client_only("%s.run_async" % name)

        def run_async_map(*args, **kwargs):
            raise _client_only("%s.run_async_map" % name)

        wrapper.__kinetic_function__ = fn
        wrapper.__kinetic_options__ = dict(options, accelerator=accelerator)
        wrapper.run_async = run_async
        wrapper.run_async_map = run_async_map
        return wrapper

    return decorator


def _rebuild_remote(fn, options):
    """A decorated function that travelled by value (see the client's
    ``kinetic._rebuild_remote``): decorated again, here."""
    return run(**options)(fn)


def _alias_submodules():
    """The client's ``kinetic`` is a package (``kinetic.data``,
    ``kinetic.job_status``, …); a value pickled there (a ``Data``, a
    ``JobStatus``) names its class by those modules: here they are this one."""
    import sys
    for name in ("core", "data", "jobs", "batch", "job_status", "_errors"):
        sys.modules.setdefault(__name__ + "." + name, sys.modules[__name__])


_alias_submodules()
