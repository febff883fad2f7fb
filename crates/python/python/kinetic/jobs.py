"""Detached jobs: :class:`JobHandle`, :func:`attach`, :func:`list_jobs`."""

import dataclasses
import json
import logging
import os
import sys
import threading
import warnings
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar

from kinetic import _native
from kinetic._errors import translate
from kinetic._values import decode
from kinetic.debug import DEBUGPY_PORT, DebugSession
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


def _cleanup_wait(cleanup_timeout, cleanup_poll_interval) -> dict:
    """Kinetic's per-call bounds on waiting for a deletion, checked, as the
    keyword arguments of the engine's call (which waits at most
    ``cleanup_timeout`` seconds, looking at least every
    ``cleanup_poll_interval``)."""
    _check_seconds("cleanup_timeout", cleanup_timeout)
    _check_seconds("cleanup_poll_interval", cleanup_poll_interval)
    if cleanup_poll_interval is not None and cleanup_poll_interval <= 0:
        raise ValueError("cleanup_poll_interval=%r: expected a number of seconds above zero"
                         % (cleanup_poll_interval,))
    return {"cleanup_timeout": None if cleanup_timeout is None else float(cleanup_timeout),
            "cleanup_poll_interval": None if cleanup_poll_interval is None else float(cleanup_poll_interval)}


#: What every line the runner writes about itself starts with (a multi-line
#: message's later lines too). ``result()`` leaves them out of the output it
#: shows; ``logs()``, ``tail()`` and ``logs(follow=True)`` keep them.
RUNNER_LINE_PREFIX = "[kinetic] "


def _with_newline(line: str) -> str:
    return line if line.endswith("\n") else line + "\n"


def _reattach_hint(job_id: str) -> str:
    return ("kinetic: stopped waiting for job %s; the job keeps running. "
            "Reattach with kinetic.attach(%r).result() (or cancel it with kinetic.attach(%r).cancel())"
            % (job_id, job_id, job_id))


class _StatusReport:
    """What ``result()`` does with each state the engine reports: the
    reason of a job still waiting or running (PENDING for want of a node
    pool, waiting for GPUs, restarting…) on stderr, once per change, as the
    command line's spinner shows it — once it has held for
    :attr:`SETTLE` seconds, so the moments every job spends starting leave
    no line; and ``on_status_change`` called when the status itself
    changes."""

    #: Seconds a reason holds before it is shown.
    SETTLE = 2.0

    def __init__(self, job_id: str, on_status_change: Optional[Callable[[JobStatus], None]]) -> None:
        self.job_id = job_id
        self.callback = on_status_change
        self.status: Optional[JobStatus] = None
        self.current: Optional[str] = None
        self.shown: Optional[str] = None
        self.lock = threading.Lock()
        self.timer: Optional[threading.Timer] = None

    def __call__(self, text: str, reason: Optional[str]) -> None:
        status = JobStatus(text)
        line = ("kinetic: job %s is %s: %s" % (self.job_id, status.value, reason)
                if reason and not status.is_terminal else None)
        with self.lock:
            if line != self.current:
                self.current = line
                self._cancel()
                if line is not None and line != self.shown:
                    self.timer = threading.Timer(self.SETTLE, self._show, (line,))
                    self.timer.daemon = True
                    self.timer.start()
        if status is self.status:
            return
        self.status = status
        if self.callback is not None:
            try:
                self.callback(status)
            except Exception:  # noqa: BLE001 - the reference: logged and swallowed
                logger.exception("on_status_change callback raised; ignored")

    def _show(self, line: str) -> None:
        with self.lock:
            if line != self.current or line == self.shown:
                return
            self.shown = line
        print(line, file=sys.stderr, flush=True)

    def _cancel(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def close(self) -> None:
        """The wait is over: nothing more is shown."""
        with self.lock:
            self.current = None
            self._cancel()


class _JobOutput:
    """The job's output as ``result()`` shows it, on stdout: the job's own
    lines. The runner's lines (:data:`RUNNER_LINE_PREFIX`) stay in
    ``logs()``; so does the traceback the runner writes after a phase
    failed, since the exception ``result()`` raises carries it (shown once,
    where Python shows exceptions)."""

    def __init__(self) -> None:
        self.after_failure = False

    def __call__(self, line: str) -> None:
        if line.startswith(RUNNER_LINE_PREFIX):
            # "[kinetic] execute: failed: ValueError: …", then the traceback;
            # a message's later lines ("[kinetic]   …") change nothing.
            if not line.startswith(RUNNER_LINE_PREFIX + "  "):
                self.after_failure = ": failed: " in line
            return
        if self.after_failure:
            return
        sys.stdout.write(_with_newline(line))
        sys.stdout.flush()


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
    def from_job_context(cls, ctx, backend_name: str, namespace: str, k8s_name: str) -> "JobHandle":
        """Build a JobHandle from a live JobContext.

        ``ctx`` is any object with Kinetic's ``JobContext`` attributes:
        ``job_id``, ``project``, ``cluster_name``, ``zone``,
        ``bucket_name``, ``image_uri`` (``None``: no image), ``accelerator``,
        ``func`` (the function; its ``__name__`` is the handle's
        ``func_name``), ``display_name`` and, optionally, ``debug``.
        ``created_at`` is now (UTC). The handle's ids are checked when it
        is first used (a ``k8s_name`` that is not the job's is refused).
        """
        def attribute(name, optional=False):
            if not hasattr(ctx, name):
                if optional:
                    return None
                raise TypeError("JobHandle.from_job_context(ctx=%r): ctx has no %r attribute; expected a "
                                "JobContext (job_id, project, cluster_name, zone, bucket_name, image_uri, "
                                "accelerator, func, display_name)" % (ctx, name))
            return getattr(ctx, name)

        def text(name, value, allow_none=False):
            if value is None and allow_none:
                return ""
            if not isinstance(value, str):
                raise TypeError("JobHandle.from_job_context: %s=%r: expected a str" % (name, value))
            return value

        func = attribute("func")
        func_name = getattr(func, "__name__", None)
        if not isinstance(func_name, str):
            raise TypeError("JobHandle.from_job_context: ctx.func=%r: expected a function (its __name__ is the "
                            "handle's func_name)" % (func,))
        debug = attribute("debug", optional=True)
        if debug is not None and not isinstance(debug, bool):
            raise TypeError("JobHandle.from_job_context: ctx.debug=%r: expected True or False" % (debug,))
        import datetime
        created_at = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return cls(
            job_id=text("ctx.job_id", attribute("job_id")),
            backend=text("backend_name", backend_name),
            project=text("ctx.project", attribute("project")),
            cluster_name=text("ctx.cluster_name", attribute("cluster_name")),
            zone=text("ctx.zone", attribute("zone")),
            namespace=text("namespace", namespace),
            bucket_name=text("ctx.bucket_name", attribute("bucket_name")),
            k8s_name=text("k8s_name", k8s_name),
            image_uri=text("ctx.image_uri", attribute("image_uri"), allow_none=True),
            accelerator=text("ctx.accelerator", attribute("accelerator")),
            func_name=func_name,
            display_name=text("ctx.display_name", attribute("display_name")),
            created_at=created_at,
            debug=bool(debug),
        )

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

    def status_reason(self) -> Optional[str]:
        """Why the job is in its current status, as the backend says it
        (``None`` when there is nothing to say): for a PENDING job what it
        waits for (no node offers its accelerator, the GPUs are taken, the
        image cannot be pulled…), for a FAILED one why it ended."""
        _status, reason = self._native().status()
        return reason

    def attempts(self) -> List[Dict[str, Any]]:
        """Each attempt of the job (number, host, started, ended, outcome,
        reason), first first: kept when a failure budget ran it again, and
        kept after its Kubernetes objects are cleaned up."""
        return json.loads(self._native().attempts())

    def logs(self, follow: bool = False) -> Optional[str]:
        """Return logs, or (``follow=True``) stream them to stdout until the job terminates."""
        if not follow:
            return self._native().logs()

        def write(line):
            # The engine gives the output line by line, without line breaks.
            sys.stdout.write(_with_newline(line))
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

    def debug_attach(self, local_port: int = DEBUGPY_PORT, working_dir: Optional[str] = None,
                     timeout: float = 600) -> DebugSession:
        """Wait for debugpy, start the port forward, and print the VS Code config.

        Waits until the job (submitted with ``debug=True``) runs and its
        debugpy server listens, starts a process forwarding
        ``localhost:local_port`` (``0``: any free port) to it, and prints
        the VS Code ``launch.json`` that attaches through it, mapping
        ``working_dir`` (default ``${workspaceFolder}``) to the job's
        workspace. The process forwards until the job ends or it is
        stopped; the job keeps running either way.

        Args:
            local_port: Local port to forward debugpy traffic to.
            working_dir: Local working directory for VS Code path mappings
                (made absolute). If None, ``${workspaceFolder}``.
            timeout: Seconds to wait for the debugger to listen.

        Returns:
            The port-forward process, a :class:`subprocess.Popen`
            (:class:`kinetic.debug.DebugSession`, which also gives
            ``local_port`` and ``launch_config``). Call
            ``kinetic.debug.cleanup_port_forward(proc)`` when done (or use
            it as a ``with`` block).

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
            session = DebugSession(self.to_dict(), local_port, working_dir, timeout)
        except KeyboardInterrupt:
            print(_reattach_hint(self.job_id), file=sys.stderr)
            raise
        print("kinetic: job %s waits for a debugger; VS Code launch configuration (.vscode/launch.json):"
              % self.job_id)
        print(json.dumps(session.launch_config, indent=2))
        print("kinetic: forwarding localhost:%d to the job's debugger (process %d)" % (session.local_port, session.pid))
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
            cleanup_timeout: Maximum seconds to wait for the deletion of the
                job's backend resources to be confirmed; past it a
                ``UserWarning`` says so and the value is returned (the
                deletion goes on).
            cleanup_poll_interval: Longest pause, in seconds, between two
                deletion-confirmation checks (a backend told by events,
                such as a Kubernetes watch, polls only when it cannot watch).
            stream_logs: When True (the default), print the job's output to
                stdout while waiting: its own lines; the runner's
                ``[kinetic]`` lines and a failure's traceback (which the
                raised exception carries) stay in :meth:`logs`. While the
                job waits or runs for a reason the backend gives (no node
                offers its accelerator yet, its GPUs are taken…) for
                two seconds or more, the reason is printed on stderr, once
                per change, whatever ``stream_logs`` says;
                :meth:`status_reason` gives it too.
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
        wait = _cleanup_wait(cleanup_timeout, cleanup_poll_interval)
        on_status = _StatusReport(self.job_id, on_status_change)
        on_log = _JobOutput()
        streaming = True if stream_logs is None else bool(stream_logs)
        try:
            try:
                text = self._native().result(timeout=timeout, cleanup=None if cleanup is None else bool(cleanup),
                                             on_status=on_status, on_log=on_log if streaming else None,
                                             **wait)
            finally:
                on_status.close()
        except KeyboardInterrupt:
            print(_reattach_hint(self.job_id), file=sys.stderr)
            raise
        except _native.RemoteJobError as err:
            exc = translate(err)
            # Raised afresh: the job's frames are in the remote traceback
            # (its cause); the engine's call has none of the user's.
            raise exc.with_traceback(None) from exc.__cause__
        return decode(json.loads(text))

    def cancel(self, cleanup_timeout: float = 180, cleanup_poll_interval: float = 2) -> None:
        """Cancel the running job by deleting its backend object.

        Waits at most ``cleanup_timeout`` seconds for the stop to be
        confirmed (checking at least every ``cleanup_poll_interval``); past
        it a ``UserWarning`` says so and the call returns (the job still stops).
        """
        self._native().cancel(**_cleanup_wait(cleanup_timeout, cleanup_poll_interval))

    def cleanup(self, k8s: bool = True, gcs: bool = True, cleanup_timeout: float = 180,
                cleanup_poll_interval: float = 2) -> None:
        """Clean up the backend object (``k8s``) and/or the stored artifacts (``gcs``).

        Waits at most ``cleanup_timeout`` seconds for the deletion to be
        confirmed (checking at least every ``cleanup_poll_interval``); past
        it a ``UserWarning`` says so and the call returns: the deletion goes
        on, and the stored artifacts are kept (clean up again to remove them).
        """
        self._native().cleanup(k8s=bool(k8s), gcs=bool(gcs),
                               **_cleanup_wait(cleanup_timeout, cleanup_poll_interval))


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
    jobs the backends hold in ``namespace``. Jobs whose handle.json is
    missing (or cannot be read) are skipped with a warning (``UserWarning``)
    naming each; so is a backend that cannot list its jobs. Each argument
    falls back through KINETIC_* env vars, the active profile, and finally
    the built-in defaults — matching kinetic.run.

    The namespace applies on every backend: a Kubernetes backend lists that
    namespace's jobs, and the local backend, which runs every namespace's
    jobs, lists those submitted with that namespace (``default`` unless
    ``namespace=`` or ``KINETIC_NAMESPACE`` said otherwise).
    """
    client = _client(project=project, zone=zone, cluster=cluster, namespace=namespace)
    jobs, skipped = client.list_jobs()
    for message in skipped:
        warnings.warn("list_jobs: %s" % message, stacklevel=2)
    return [JobHandle._from_native(job) for job in jobs]
