"""Kinetic: run Python functions on remote TPUs, GPUs and CPUs — or on this
machine — and get their values back.

::

    import kinetic

    @kinetic.run(accelerator="cpu", backend="local")
    def square(x):
        return x * x

    square(7)                       # 49, computed by a job
    job = square.run_async(7)       # a JobHandle
    job.result()                    # 49

A thin binding over the Rust engine (the same one the ``kinetic`` command
line drives): settings, packaging, hashing, batches and statuses are the
engine's.
"""

from kinetic._native import __version__
from kinetic._errors import ClientOnlyError, RemoteError, RemoteTraceback
from kinetic.batch import BatchError, BatchHandle, attach_batch
from kinetic.core import run
from kinetic.data import Data
from kinetic.job_status import JobStatus
from kinetic import debug
from kinetic.debug import DebugSession
from kinetic.jobs import JobHandle, attach, list_jobs

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
    "debug",
    "list_jobs",
    "run",
]


def _rebuild_remote(fn, options):
    """A function decorated with ``@kinetic.run`` that travelled by value
    inside a pickle, decorated again where it is unpickled (a job's own
    ``kinetic`` has the same function: there the call runs in-process)."""
    return run(**options)(fn)
