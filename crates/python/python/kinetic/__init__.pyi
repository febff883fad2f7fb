"""Type stubs for the kinetic module (Kinetic's Python API over the Rust engine)."""

import enum
import subprocess
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, TypeVar

from kinetic import debug as debug

_F = TypeVar("_F", bound=Callable[..., Any])

class JobStatus(enum.Enum):
    """Observable status of a remote job."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    NOT_FOUND = "NOT_FOUND"
    @property
    def is_terminal(self) -> bool: ...

class Data:
    """A reference to data that should be available on the remote pod."""

    def __init__(self, path: str, fuse: bool = False, hf_trust_remote_code: bool = False) -> None: ...
    @property
    def path(self) -> str: ...
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

class RemoteTraceback(Exception):
    """The remote traceback, chained as ``__cause__`` of a rebuilt exception."""

    tb: str
    def __init__(self, tb: str) -> None: ...

class ClientOnlyError(RuntimeError):
    """A client-only call (run_async, attach, list_jobs, …) made inside a job."""

class RemoteError(RuntimeError):
    """A job's error whose type cannot be rebuilt here."""

    type_name: str
    remote_traceback: Optional[str]
    job_id: str
    phase: Optional[str]
    def __init__(self, type_name: str, message: str) -> None: ...

class DebugSession(subprocess.Popen[str]):
    """The process forwarding a local port to a debug job's debugger (from
    JobHandle.debug_attach), a subprocess.Popen; kinetic.debug.cleanup_port_forward(proc),
    close() or leaving a with block stops it."""
    job_id: str
    local_port: int
    launch_config: Dict[str, Any]
    @property
    def forwarding(self) -> bool:
        """True until closed or the job ended."""
    def close(self) -> None:
        """Stop forwarding (idempotent); the job keeps running."""
    def __enter__(self) -> DebugSession: ...
    def __exit__(self, *exc: Any) -> None: ...

class JobHandle:
    """Durable description of a submitted remote job."""

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
    group_id: Optional[str]
    group_kind: Optional[str]
    group_index: Optional[int]
    debug: bool
    def __init__(self, job_id: str, backend: str, project: str, cluster_name: str, zone: str, namespace: str,
                 bucket_name: str, k8s_name: str, image_uri: str, accelerator: str, func_name: str,
                 display_name: str, created_at: str, group_id: Optional[str] = None,
                 group_kind: Optional[str] = None, group_index: Optional[int] = None,
                 debug: bool = False) -> None: ...
    @classmethod
    def from_job_context(cls, ctx: Any, backend_name: str, namespace: str, k8s_name: str) -> JobHandle:
        """Build a JobHandle from a live JobContext (job_id, project, cluster_name, zone,
        bucket_name, image_uri, accelerator, func, display_name, debug)."""
    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> JobHandle:
        """Reconstruct a JobHandle from a plain dict (unknown keys ignored)."""
    def to_dict(self) -> Dict[str, Any]:
        """Serialize the handle to a JSON-safe payload."""
    def status(self) -> JobStatus:
        """Return the current execution status of the job."""
    def status_reason(self) -> Optional[str]:
        """Why the job is in its current status (what a PENDING job waits
        for, why a FAILED one ended), or None."""
    def logs(self, follow: bool = False) -> Optional[str]:
        """Return logs or stream them to stdout until the job terminates."""
    def tail(self, n: int = 100) -> str:
        """Return the last n log lines."""
    def debug_attach(self, local_port: int = 5678, working_dir: Optional[str] = None,
                     timeout: float = 600) -> DebugSession:
        """Wait until a debug=True job's debugpy server listens, forward
        localhost:local_port (0: any free port) to it, print the VS Code
        launch configuration (local root: working_dir, default
        ${workspaceFolder}); RuntimeError if the job ends first,
        TimeoutError after timeout seconds."""
    def result(self, timeout: Optional[float] = None, cleanup: Optional[bool] = None,
               cleanup_timeout: float = 180, cleanup_poll_interval: float = 2,
               stream_logs: Optional[bool] = None,
               on_status_change: Optional[Callable[[JobStatus], None]] = None) -> Any:
        """Wait for the job result and return it or re-raise the user exception.
        cleanup=None means ``not debug``: a debug job is kept."""
    def cancel(self, cleanup_timeout: float = 180, cleanup_poll_interval: float = 2) -> None:
        """Cancel the running job by deleting its backend object."""
    def cleanup(self, k8s: bool = True, gcs: bool = True, cleanup_timeout: float = 180,
                cleanup_poll_interval: float = 2) -> None:
        """Clean up backend resources and/or stored artifacts."""

class BatchError(Exception):
    """Raised when a batch collection has failed children."""

    group_id: str
    failures: List[JobHandle]
    partial_results: List[Any]
    submission_failures: Dict[int, Exception]
    def __init__(self, group_id: str, failures: List[JobHandle], partial_results: List[Any],
                 submission_failures: Optional[Dict[int, Exception]] = None,
                 message: Optional[str] = None) -> None: ...

class BatchHandle:
    """Handle for a collection of submitted jobs."""

    def __init__(self, group_id: str, name: Optional[str], tags: Dict[str, str],
                 jobs: List[Optional[JobHandle]], _bucket_name: str = "", _project: str = "",
                 _submission_complete: Optional[threading.Event] = None,
                 _submission_error: Optional[BaseException] = None, _lock: Any = None,
                 _submission_errors: Optional[Dict[int, Exception]] = None,
                 _cached_failures: Optional[List[JobHandle]] = None) -> None: ...

    @property
    def group_id(self) -> str: ...
    @property
    def name(self) -> Optional[str]: ...
    @property
    def tags(self) -> Dict[str, str]: ...
    @property
    def jobs(self) -> List[Optional[JobHandle]]: ...
    def statuses(self) -> List[Tuple[int, JobStatus]]:
        """Return (index, status) for each submitted job."""
    def status_counts(self) -> Dict[str, int]:
        """Return a count of jobs in each status."""
    def wait(self, *, timeout: Optional[float] = None) -> None:
        """Block until all jobs reach a terminal state."""
    def as_completed(self, *, poll_interval: float = 5.0, timeout: Optional[float] = None) -> Iterator[JobHandle]:
        """Yield jobs as they reach terminal states, in completion order."""
    def results(self, *, timeout: Optional[float] = None, ordered: bool = True, cleanup: bool = True,
                return_exceptions: bool = False) -> List[Any]:
        """Collect results from all jobs."""
    def failures(self) -> List[JobHandle]:
        """Return handles for jobs that failed."""
    @property
    def submission_failures(self) -> Dict[int, Exception]:
        """Return a copy of per-input submission errors (index -> exception)."""
    def never_submitted(self) -> List[int]:
        """The inputs no job is known for and none is being submitted for."""
    def resume(self) -> None:
        """Submit the inputs never submitted, as the batch was submitted."""
    def cancel(self) -> None:
        """Cancel all non-terminal jobs in the collection."""
    def cleanup(self, *, k8s: bool = True, gcs: bool = True) -> None:
        """Clean up all jobs and optionally the group manifest."""

class _Remote:
    """What ``@kinetic.run`` returns: the function, run remotely when called."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def run_async(self, *args: Any, **kwargs: Any) -> JobHandle: ...
    def run_async_map(self, inputs: Iterable[Any], input_mode: str = "auto", max_concurrent: Optional[int] = None,
                      retries: int = 0, fail_fast: bool = False, cancel_running_on_fail: bool = False,
                      name: Optional[str] = None, tags: Optional[Dict[str, str]] = None) -> BatchHandle: ...

def run(accelerator: str = "tpu-v5e-1", container_image: Optional[str] = None,
        base_image_repo: Optional[str] = None, zone: Optional[str] = None, project: Optional[str] = None,
        capture_env_vars: Optional[List[str]] = None, cluster: Optional[str] = None,
        backend: Optional[str] = None, namespace: Optional[str] = None,
        volumes: Optional[Dict[str, Data]] = None, spot: bool = False, output_dir: Optional[str] = None,
        debug: bool = False) -> Callable[[Callable[..., Any]], _Remote]:
    """Execute function on remote TPU/GPU."""

def attach(job_id: str, project: Optional[str] = None, cluster: Optional[str] = None) -> JobHandle:
    """Reconstruct a persisted handle from the jobs bucket."""

def list_jobs(project: Optional[str] = None, zone: Optional[str] = None, cluster: Optional[str] = None,
              namespace: Optional[str] = None) -> List[JobHandle]:
    """List live jobs by hydrating durable handles."""

def attach_batch(group_id: str, project: Optional[str] = None, cluster: Optional[str] = None,
                 poll_interval: float = 10.0, poll_timeout: Optional[float] = None) -> BatchHandle:
    """Reattach to an existing batch collection by group_id."""

__all__: List[str]
