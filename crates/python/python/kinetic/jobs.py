"""Detached jobs: :class:`JobHandle`, :func:`attach`, :func:`list_jobs`."""

import dataclasses
import json
import logging
import os
import sys
import warnings
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar

from kinetic import _native
from kinetic._errors import translate
from kinetic._values import decode
from kinetic.job_status import JobStatus

logger = logging.getLogger("kinetic")

#: The value a job's function returns (``JobHandle[int]``, ``BatchHandle[int]``).
_R = TypeVar("_R")


def _client(project=None, zone=None, cluster=None, namespace=None, base_image_repo=None,
            backend=None, accelerator=None):
    # Local jobs run on this interpreter, so they see the packages the caller sees.
    # The backend is chosen as the CLI chooses it, and the engine uses its store.
    return _native.Client(project=project, zone=zone, cluster=cluster, namespace=namespace,
                          base_image_repo=base_image_repo, local_python=sys.executable or None,
                          backend=backend, accelerator=accelerator)


def _check_seconds(name: str, value) -> None:
    if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0):
        raise ValueError("%s=%r: expected a number of seconds, zero or more" % (name, value))


def _check_cleanup_wait(cleanup_timeout, cleanup_poll_interval) -> None:
    """Kinetic's per-call bounds on waiting for a deletion. The backend waits
    for the deletion itself, under its own bound (180 s, Kinetic's default),
    so other values are checked and said not to apply, never dropped silently."""
    _check_seconds("cleanup_timeout", cleanup_timeout)
    _check_seconds("cleanup_poll_interval", cleanup_poll_interval)
    for name, value, default in (("cleanup_timeout", cleanup_timeout, 180),
                                 ("cleanup_poll_interval", cleanup_poll_interval, 2)):
        if value != default:
            warnings.warn("%s=%r is not applied per call: the backend waits for the deletion itself, "
                          "for up to 180 s" % (name, value), stacklevel=3)


def _reattach_hint(job_id: str) -> str:
    return ("kinetic: stopped waiting for job %s; the job keeps running. "
            "Reattach with kinetic.attach(%r).result() (or cancel it with kinetic.attach(%r).cancel())"
            % (job_id, job_id, job_id))


class DebugSession:
    """A local port forwarded to a debug job's debugger, returned by
    :meth:`JobHandle.debug_attach`. ``close()`` (or leaving a ``with``
    block) stops forwarding new connections and frees the port; the job
    keeps running."""

    def __init__(self, job_id: str, native) -> None:
        self.job_id = job_id
        self._native = native
        #: The local port debuggers connect to.
        self.local_port: int = native.local_port
        #: The VS Code ``launch.json`` attaching through this port.
        self.launch_config: Dict[str, Any] = json.loads(native.launch_json())

    @property
    def forwarding(self) -> bool:
        """True until closed or the job ended."""
        return self._native.is_forwarding()

    def close(self) -> None:
        """Stop forwarding (idempotent)."""
        self._native.close()

    terminate = close

    def __enter__(self) -> "DebugSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return "DebugSession(job_id=%r, local_port=%d, forwarding=%r)" % (
            self.job_id, self.local_port, self.forwarding)


@dataclasses.dataclass
class JobHandle(Generic[_R]):
    """Durable description of a submitted remote job, generic in the value
    its ``result()`` returns (``JobHandle[int]`` in annotations).

    All fields are JSON-serializable strings. No func object or closure state
    is stored — only the metadata needed to observe, collect, and clean up the
    job from any machine (the job's ``handle.json``).
    """

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
    group_id: Optional[str] = None
    group_kind: Optional[str] = None
    group_index: Optional[int] = None
    debug: bool = False
    # Not constructor parameters (nor in ``__match_args__``): the record as
    # read, and the engine's handle once made.
    _record: Dict[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)
    _job: Any = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def _from_native(cls, job) -> "JobHandle":
        handle = cls.from_dict(json.loads(job.record_json()))
        handle._job = job
        return handle

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "JobHandle":
        """Reconstruct a JobHandle from a plain dict.

        Unknown keys are silently ignored so that handles persisted by a
        future version (with extra fields) can still be loaded.
        """
        names = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
        missing = [f.name for f in dataclasses.fields(cls)
                   if f.name in names and f.default is dataclasses.MISSING and f.name not in d]
        if missing:
            raise ValueError("JobHandle.from_dict: missing field(s) %s" % ", ".join(missing))
        handle = cls(**{k: v for k, v in d.items() if k in names})
        handle._record = dict(d)
        return handle

    def to_dict(self) -> Dict[str, Any]:
        """Serialize the handle to a JSON-safe payload."""
        out = dict(self._record)
        for f in dataclasses.fields(self):
            if not f.name.startswith("_"):
                out[f.name] = getattr(self, f.name)
        return out

    def _native(self):
        if self._job is None:
            client = _client(project=self.project or None, zone=self.zone or None,
                             cluster=self.cluster_name or None, namespace=self.namespace or None)
            self._job = client.handle_from_json(json.dumps(self.to_dict()))
        return self._job

    def status(self) -> JobStatus:
        """Return the current execution status of the job."""
        status, _reason = self._native().status()
        return JobStatus(status)

    def attempts(self) -> List[Dict[str, Any]]:
        """Each attempt of the job (number, host, started, ended, outcome,
        reason), first first: kept when a failure budget ran it again, and
        kept after its Kubernetes objects are cleaned up."""
        return json.loads(self._native().attempts())

    def logs(self, follow: bool = False) -> Optional[str]:
        """Return logs, or (``follow=True``) stream them to stdout until the job terminates."""
        if not follow:
            return self._native().logs()

        def write(chunk):
            sys.stdout.write(chunk)
            sys.stdout.flush()

        try:
            self._native().follow_logs(write)
        except KeyboardInterrupt:
            print(_reattach_hint(self.job_id), file=sys.stderr)
            raise
        return None

    def tail(self, n: int = 100) -> str:
        """Return the last ``n`` log lines."""
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("tail(n=%r): expected a whole number, zero or more" % (n,))
        return self._native().tail(n)

    def debug_attach(self, local_port: int = 5678, working_dir: Optional[str] = None,
                     timeout: float = 600) -> "DebugSession":
        """Attach to a job submitted with ``debug=True``.

        Waits until the job runs and its debugpy server listens, forwards
        ``localhost:local_port`` to it (``0``: any free port), and prints
        the VS Code ``launch.json`` that attaches through it, mapping
        ``working_dir`` (default ``${workspaceFolder}``) to the job's
        workspace. Forwarding goes on in the background until the job ends
        or the returned :class:`DebugSession` is closed (``close()``, or
        leaving a ``with`` block); the job keeps running either way.

        Args:
            local_port: The local port debuggers connect to.
            working_dir: The local root of the launch configuration's path
                mappings (made absolute).
            timeout: Seconds to wait for the debugger to listen.

        Returns:
            A :class:`DebugSession` (``local_port``, ``launch_config``).

        Raises:
            RuntimeError: If the job reaches a terminal state first, or the
                port cannot be listened on.
            TimeoutError: If the debugger does not listen within ``timeout``.
            ValueError: If the job was not submitted with ``debug=True``.
        """
        if isinstance(local_port, bool) or not isinstance(local_port, int) or not 0 <= local_port <= 65535:
            raise ValueError("debug_attach(local_port=%r): expected a port number, 0 to 65535 (0: any free port)"
                             % (local_port,))
        _check_seconds("timeout", timeout)
        if working_dir is not None:
            working_dir = os.path.abspath(os.path.expanduser(working_dir))
        try:
            native = self._native().debug_attach(local_port, working_dir=working_dir, timeout=timeout)
        except KeyboardInterrupt:
            print(_reattach_hint(self.job_id), file=sys.stderr)
            raise
        session = DebugSession(self.job_id, native)
        print("kinetic: job %s waits for a debugger; VS Code launch configuration (.vscode/launch.json):"
              % self.job_id)
        print(json.dumps(session.launch_config, indent=2))
        print("kinetic: forwarding localhost:%d to the job's debugger" % session.local_port)
        sys.stdout.flush()
        return session

    def result(self, timeout: Optional[float] = None, cleanup: Optional[bool] = None,
               cleanup_timeout: float = 180, cleanup_poll_interval: float = 2,
               stream_logs: Optional[bool] = None,
               on_status_change: Optional[Callable[[JobStatus], None]] = None) -> Any:
        """Wait for the job result and return it or re-raise the user exception.

        Args:
            timeout: Maximum seconds to wait. None means wait forever. If
                reached, ``TimeoutError`` is raised but the job keeps running
                and the handle remains valid.
            cleanup: When True, delete the job's backend object after the
                result is downloaded. None (the default) means ``not debug``:
                a debug job is kept for inspection.
            cleanup_timeout: Kinetic's bound on waiting for the deletion. The
                backend waits for the deletion itself, for up to 180 s (the
                default); another value is checked and warned about.
            cleanup_poll_interval: Kinetic's seconds between deletion checks;
                likewise checked, and warned about when not the default 2.
            stream_logs: When True (the default), print the job's output to
                stdout while waiting.
            on_status_change: Called with the new :class:`JobStatus` each time
                the polled status differs from the previous one, including the
                first observation and the final terminal status, on the calling
                thread. Exceptions it raises are logged and swallowed.

        Returns:
            The function's return value.

        Raises:
            TimeoutError: If timeout is exceeded.
            RuntimeError: If the job failed without uploading a result.
            Exception: Re-raised from the remote function on user failure,
                with the remote traceback as its ``__cause__`` and in
                ``remote_traceback``.
            KeyboardInterrupt: Ctrl-C stops the wait (not the job) and prints
                how to reattach.
        """
        _check_seconds("timeout", timeout)
        _check_cleanup_wait(cleanup_timeout, cleanup_poll_interval)
        on_status = None
        if on_status_change is not None:
            def on_status(text, callback=on_status_change):
                try:
                    callback(JobStatus(text))
                except Exception:  # noqa: BLE001 - the reference: logged and swallowed
                    logger.exception("on_status_change callback raised; ignored")

        def on_log(line):
            sys.stdout.write(line if line.endswith("\n") else line + "\n")
            sys.stdout.flush()

        streaming = True if stream_logs is None else bool(stream_logs)
        try:
            text = self._native().result(timeout=timeout, cleanup=None if cleanup is None else bool(cleanup),
                                         on_status=on_status, on_log=on_log if streaming else None)
        except KeyboardInterrupt:
            print(_reattach_hint(self.job_id), file=sys.stderr)
            raise
        except _native.RemoteJobError as err:
            exc = translate(err)
            raise exc from exc.__cause__
        return decode(json.loads(text))

    def cancel(self, cleanup_timeout: float = 180, cleanup_poll_interval: float = 2) -> None:
        """Cancel the running job by deleting its backend object."""
        _check_cleanup_wait(cleanup_timeout, cleanup_poll_interval)
        self._native().cancel()

    def cleanup(self, k8s: bool = True, gcs: bool = True, cleanup_timeout: float = 180,
                cleanup_poll_interval: float = 2) -> None:
        """Clean up the backend object (``k8s``) and/or the stored artifacts (``gcs``)."""
        _check_cleanup_wait(cleanup_timeout, cleanup_poll_interval)
        self._native().cleanup(k8s=bool(k8s), gcs=bool(gcs))


def attach(job_id: str, project: Optional[str] = None, cluster: Optional[str] = None) -> JobHandle:
    """Reconstruct a persisted handle from the jobs bucket.

    Args:
        job_id: The job identifier (e.g. "job-a1b2c3d4").
        project: GCP project. Falls back to KINETIC_PROJECT, then the active
            profile's project, then GOOGLE_CLOUD_PROJECT.
        cluster: GKE cluster name. Falls back to KINETIC_CLUSTER, then the
            active profile's cluster, then the built-in default.

    Returns:
        A hydrated JobHandle ready for status(), result(), etc.
    """
    return JobHandle._from_native(_client(project=project, cluster=cluster).attach(job_id))


def list_jobs(project: Optional[str] = None, zone: Optional[str] = None, cluster: Optional[str] = None,
              namespace: Optional[str] = None) -> List[JobHandle]:
    """List live jobs, newest first, by hydrating durable handles from the
    jobs the backends hold. Jobs whose handle.json is missing are skipped
    with a warning. Each argument falls back through KINETIC_* env vars, the
    active profile, and finally the built-in defaults — matching kinetic.run.
    """
    client = _client(project=project, zone=zone, cluster=cluster, namespace=namespace)
    return [JobHandle._from_native(job) for job in client.list_jobs()]
