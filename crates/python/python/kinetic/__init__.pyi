"""Type stubs for the kinetic module (Kinetic's Python API over the Rust engine).

Checked against the module by ``python -m mypy.stubtest kinetic`` in the test
command: a public name, parameter or default of the module that these stubs
do not give fails the check. Stubs are never executed, so they use the newest
syntax; ``ParamSpec`` comes from ``typing_extensions`` (which type checkers
carry) for Python 3.9 only.
"""

import dataclasses
import enum
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Literal, TypeVar, overload

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:
    from typing_extensions import ParamSpec

_P = ParamSpec("_P")
_R = TypeVar("_R")

from kinetic import debug as debug

__version__: str
"""The package's version (that of the ``kinetic-rs`` distribution)."""

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

class Data:
    """A reference to data that should be available on the remote pod: a
    local file or directory, a ``gs://`` URI or an ``hf://`` dataset."""

    def __init__(self, path: str | os.PathLike[str], fuse: bool = False, hf_trust_remote_code: bool = False) -> None: ...
    @property
    def path(self) -> str:
        """The absolute local path, or the URI as given."""
    @property
    def fuse(self) -> bool: ...
    @property
    def hf_trust_remote_code(self) -> bool: ...
    @property
    def is_gcs(self) -> bool: ...
    @property
    def is_hf(self) -> bool: ...
    @property
    def is_dir(self) -> bool: ...
    def content_hash(self) -> str:
        """SHA-256 hash of all file contents in deterministic order."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class RemoteTraceback(Exception):
    """The remote traceback, chained as ``__cause__`` of a rebuilt exception."""

    tb: str
    def __init__(self, tb: str) -> None: ...

class ClientOnlyError(RuntimeError):
    """A client-only call (run_async, attach, list_jobs, …) made inside a job."""

class RemoteError(RuntimeError):
    """A job's error whose type cannot be rebuilt here."""

    type_name: str
    remote_traceback: str | None
    job_id: str
    phase: str | None
    def __init__(self, type_name: str, message: str) -> None: ...

class DebugSession(subprocess.Popen[str]):
    """The process forwarding a local port to a debug job's debugger (from
    JobHandle.debug_attach), a subprocess.Popen;
    kinetic.debug.cleanup_port_forward(proc), close() or leaving a with block
    stops it."""

    job_id: str
    local_port: int
    launch_config: dict[str, Any]
    def __init__(self, record: dict[str, Any], local_port: int, working_dir: str | None,
                 timeout: float | None) -> None:
        """Made by :meth:`JobHandle.debug_attach`, not by users."""
    @property
    def forwarding(self) -> bool:
        """True until closed or the job ended."""
    def close(self) -> None:
        """Stop forwarding (idempotent); the job keeps running."""
    def __enter__(self) -> DebugSession: ...
    def __exit__(self, *exc: object) -> None: ...

@dataclasses.dataclass
class JobHandle(Generic[_R]):
    """Durable description of a submitted remote job, generic in the value
    its ``result()`` returns (``Any`` when attached by id)."""

    job_id: str
    backend: str
    project: str
    cluster_name: str
    zone: str
    namespace: str
    bucket_name: str
    k8s_name: str
    image_uri: str
    accelerator: str
    func_name: str
    display_name: str
    created_at: str
    group_id: str | None = None
    group_kind: str | None = None
    group_index: int | None = None
    debug: bool = False
    @classmethod
    def from_job_context(cls, ctx: Any, backend_name: str, namespace: str, k8s_name: str) -> JobHandle[Any]:
        """Build a JobHandle from a live JobContext (job_id, project, cluster_name, zone,
        bucket_name, image_uri, accelerator, func, display_name, debug)."""
    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobHandle[Any]:
        """Reconstruct a JobHandle from a plain dict (unknown keys ignored)."""
    def to_dict(self) -> dict[str, Any]:
        """Serialize the handle to a JSON-safe payload."""
    def status(self) -> JobStatus:
        """Return the current execution status of the job."""
    def status_reason(self) -> str | None:
        """Why the job is in its current status (what a PENDING job waits
        for, why a FAILED one ended), or None."""
    def attempts(self) -> list[dict[str, Any]]:
        """Each attempt of the job (number, host, started, ended, outcome,
        reason), first first."""
    @overload
    def logs(self, follow: Literal[False] = False) -> str:
        """Return the job's logs."""
    @overload
    def logs(self, follow: Literal[True]) -> None:
        """Stream the job's logs to stdout until the job terminates."""
    @overload
    def logs(self, follow: bool) -> str | None: ...
    def tail(self, n: int = 100) -> str:
        """Return the last n log lines."""
    def debug_attach(self, local_port: int = 5678, working_dir: str | None = None, timeout: float = 600) -> DebugSession:
        """Wait until a debug=True job's debugpy server listens, forward
        localhost:local_port (0: any free port) to it, print the VS Code
        launch configuration (local root: working_dir, default
        ${workspaceFolder}); RuntimeError if the job ends first,
        TimeoutError after timeout seconds."""
    def result(
        self,
        timeout: float | None = None,
        cleanup: bool | None = None,
        cleanup_timeout: float = 180,
        cleanup_poll_interval: float = 2,
        stream_logs: bool | None = None,
        on_status_change: Callable[[JobStatus], object] | None = None,
    ) -> _R:
        """Wait for the job result and return it or re-raise the user exception.
        cleanup=None means ``not debug``: a debug job is kept."""
    def cancel(self, cleanup_timeout: float = 180, cleanup_poll_interval: float = 2) -> None:
        """Cancel the running job by deleting its backend object."""
    def cleanup(self, k8s: bool = True, gcs: bool = True, cleanup_timeout: float = 180, cleanup_poll_interval: float = 2) -> None:
        """Clean up backend resources and/or stored artifacts."""

class BatchError(Exception):
    """Raised when a batch collection has failed children."""

    group_id: str
    failures: list[JobHandle[Any]]
    partial_results: list[Any]
    submission_failures: dict[int, Exception]
    def __init__(
        self,
        group_id: str,
        failures: list[JobHandle[Any]],
        partial_results: list[Any],
        submission_failures: dict[int, Exception] | None = None,
        message: str | None = None,
    ) -> None: ...

class BatchHandle(Generic[_R]):
    """Handle for a collection of submitted jobs, generic in each job's value
    (``Any`` when attached by id)."""

    def __init__(self, group_id: str, name: str | None, tags: dict[str, str],
                 jobs: list[JobHandle[Any] | None], _bucket_name: str = "", _project: str = "",
                 _submission_complete: threading.Event | None = None,
                 _submission_error: BaseException | None = None, _lock: Any = None,
                 _submission_errors: dict[int, Exception] | None = None,
                 _cached_failures: list[JobHandle[Any]] | None = None) -> None:
        """A batch of jobs, as Kinetic's reference constructs one (``run_async_map()`` and
        :func:`attach_batch` make them for users)."""
    @property
    def group_id(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def tags(self) -> dict[str, str]: ...
    @property
    def jobs(self) -> list[JobHandle[_R] | None]: ...
    def statuses(self) -> list[tuple[int, JobStatus]]:
        """Return (index, status) for each submitted job."""
    def status_counts(self) -> dict[str, int]:
        """Return a count of jobs in each status."""
    def wait(self, *, timeout: float | None = None) -> None:
        """Block until all jobs reach a terminal state."""
    def as_completed(self, *, poll_interval: float = 5.0, timeout: float | None = None) -> Iterator[JobHandle[_R]]:
        """Yield jobs as they reach terminal states, in completion order."""
    @overload
    def results(
        self,
        *,
        timeout: float | None = None,
        ordered: bool = True,
        cleanup: bool = True,
        return_exceptions: Literal[False] = False,
    ) -> list[_R]:
        """Collect results from all jobs; BatchError on any failure."""
    @overload
    def results(
        self, *, timeout: float | None = None, ordered: bool = True, cleanup: bool = True, return_exceptions: Literal[True]
    ) -> list[_R | BaseException]:
        """Collect results from all jobs; a failed job's place holds its exception."""
    @overload
    def results(
        self, *, timeout: float | None = None, ordered: bool = True, cleanup: bool = True, return_exceptions: bool
    ) -> list[_R | BaseException]: ...
    def failures(self) -> list[JobHandle[_R]]:
        """Return handles for jobs that failed."""
    @property
    def submission_failures(self) -> dict[int, Exception]:
        """Return a copy of per-input submission errors (index -> exception)."""
    def never_submitted(self) -> list[int]:
        """The inputs no job is known for and none is being submitted for."""
    def resume(self) -> None:
        """Submit the inputs never submitted, as the batch was submitted."""
    def cancel(self) -> None:
        """Cancel all non-terminal jobs in the collection."""
    def cleanup(self, *, k8s: bool = True, gcs: bool = True) -> None:
        """Clean up all jobs and optionally the group manifest."""

class _Remote(Generic[_P, _R]):
    """What ``@kinetic.run`` makes of a function: called, it runs the
    function as a job and returns its value; it keeps the function's
    parameters and return type. (No such class exists at run time: the
    decorator returns a function with these attributes.)"""

    __name__: str
    __qualname__: str
    __doc__: str | None
    __wrapped__: Callable[_P, _R]
    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R: ...
    def run_async(self, *args: _P.args, **kwargs: _P.kwargs) -> JobHandle[_R]:
        """Submit the job and return its handle at once."""
    def run_async_map(
        self,
        inputs: Iterable[Any],
        input_mode: Literal["auto", "single", "args", "kwargs"] = "auto",
        max_concurrent: int | None = None,
        retries: int = 0,
        fail_fast: bool = False,
        cancel_running_on_fail: bool = False,
        name: str | None = None,
        tags: dict[str, str] | None = None,
        isolation: Literal["workers", "process"] = "workers",
    ) -> BatchHandle[_R]:
        """Fan out over ``inputs``, one job each (``input_mode`` says how an
        input becomes the call's arguments: 'auto', 'single', 'args',
        'kwargs'), returning a :class:`BatchHandle`. ``isolation``: 'workers'
        (the jobs share a pool of worker processes where the backend has
        them, each importing the function once and calling it for input
        after input) or 'process' (a fresh interpreter per input)."""

def run(
    accelerator: str = "tpu-v5e-1",
    container_image: str | None = None,
    base_image_repo: str | None = None,
    zone: str | None = None,
    project: str | None = None,
    capture_env_vars: list[str] | None = None,
    cluster: str | None = None,
    backend: Literal["gke", "pathways", "local"] | None = None,
    namespace: str | None = None,
    volumes: dict[str, Data] | None = None,
    spot: bool = False,
    output_dir: str | None = None,
    debug: bool = False,
    retries: int | None = None,
    restarts: int | None = None,
) -> Callable[[Callable[_P, _R]], _Remote[_P, _R]]:
    """Execute function on remote TPU/GPU (or on this machine with ``backend="local"``)."""

def attach(job_id: str, project: str | None = None, cluster: str | None = None) -> JobHandle[Any]:
    """Reconstruct a persisted handle from the jobs bucket."""

def list_jobs(
    project: str | None = None, zone: str | None = None, cluster: str | None = None, namespace: str | None = None
) -> list[JobHandle[Any]]:
    """List live jobs by hydrating durable handles."""

def attach_batch(
    group_id: str,
    project: str | None = None,
    cluster: str | None = None,
    poll_interval: float = 10.0,
    poll_timeout: float | None = None,
) -> BatchHandle[Any]:
    """Reattach to an existing batch collection by group_id."""

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
