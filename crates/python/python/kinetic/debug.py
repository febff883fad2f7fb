"""Debugging jobs: the port forward :meth:`kinetic.JobHandle.debug_attach`
returns, and :func:`cleanup_port_forward`, which stops it.

Kinetic's forward is a ``kubectl port-forward`` process. Here it is a
process too — this interpreter running ``kinetic._forward``, which waits for
the job's debugger and forwards a local port to it through the engine (the
API server's ``pods/portforward`` on Kubernetes, the job's loopback port
locally), so no ``kubectl`` is needed — and the handle is a real
:class:`subprocess.Popen`: ``poll``, ``wait``, ``terminate``, ``kill``,
``pid`` and ``returncode`` are the forwarding process's own.
"""

import json
import subprocess
import sys
from typing import Any, Dict, Optional

#: The port debuggers are forwarded to when none is chosen (Kinetic's).
DEBUGPY_PORT = 5678

# How long cleanup_port_forward waits for the forward to stop after
# terminating it before killing it (Kinetic's).
_STOP_SECONDS = 5

# The errors the forwarding process reports by type name; any other is a
# RuntimeError.
_ERRORS = {"RuntimeError": RuntimeError, "TimeoutError": TimeoutError, "ValueError": ValueError,
           "LookupError": LookupError}


class DebugSession(subprocess.Popen):
    """The process forwarding a local port to a debug job's debugger,
    returned by :meth:`JobHandle.debug_attach` once the debugger listens.

    A :class:`subprocess.Popen` (Kinetic returns its ``kubectl
    port-forward`` process): it forwards until the job ends (it then exits
    with code 0) or it is stopped — :func:`cleanup_port_forward`,
    ``terminate()``, ``close()`` or leaving a ``with`` block; the job keeps
    running either way. Dropped unstopped, it forwards on until the job
    ends, as a port-forward process outlives its handle.
    """

    #: The job whose debugger is forwarded to.
    job_id: str
    #: The local port debuggers connect to.
    local_port: int
    #: The VS Code ``launch.json`` attaching through this port.
    launch_config: Dict[str, Any]

    def __init__(self, record: Dict[str, Any], local_port: int, working_dir: Optional[str],
                 timeout: Optional[float]) -> None:
        request = json.dumps({"record": record, "local_port": local_port, "working_dir": working_dir,
                              "timeout": timeout})
        super().__init__([sys.executable, "-m", "kinetic._forward", request],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                         # Its own session: a Ctrl-C that stops the caller's
                         # wait for result() leaves the forward up.
                         start_new_session=True)
        self.job_id = record.get("job_id", "")
        said_on = self.stdout
        assert said_on is not None  # stdout=PIPE above
        try:
            line = said_on.readline()
        except BaseException:
            self._stop()
            raise
        said_on.close()
        try:
            said = json.loads(line) if line else None
        except ValueError:
            said = None
        if not isinstance(said, dict) or ("error" not in said and "local_port" not in said):
            code = self._stop()
            raise RuntimeError("debug_attach: the forwarding process (%s -m kinetic._forward) ended without "
                               "forwarding (exit code %s, said %r)" % (sys.executable, code, line.strip()))
        if "error" in said:
            self.wait()
            error = said["error"]
            raise _ERRORS.get(error.get("type"), RuntimeError)(error.get("message", ""))
        self.local_port = int(said["local_port"])
        self.launch_config = said["launch"]

    def _stop(self) -> Optional[int]:
        self.terminate()
        try:
            return self.wait(timeout=_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.wait()

    @property
    def forwarding(self) -> bool:
        """True until stopped or the job ended."""
        return self.poll() is None

    def close(self) -> None:
        """Stop forwarding (idempotent): once this returns the local port is
        free; the job keeps running. Same as :func:`cleanup_port_forward`."""
        cleanup_port_forward(self)

    def __enter__(self) -> "DebugSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        # Popen's own __exit__ waits for the process, which forwards until
        # the job ends: leaving the block stops forwarding instead.
        self.close()

    def __repr__(self) -> str:
        return "DebugSession(job_id=%r, local_port=%s, pid=%d, forwarding=%r)" % (
            self.job_id, getattr(self, "local_port", None), self.pid, self.forwarding)


def cleanup_port_forward(proc: subprocess.Popen) -> None:
    """Stop a port forward returned by :meth:`JobHandle.debug_attach`:
    terminate it, wait up to 5 seconds, then kill it (Kinetic's steps). The
    job keeps running. Stopping a forward that already ended does nothing.

    Raises:
        TypeError: ``proc`` is not a process handle.
    """
    if not isinstance(proc, subprocess.Popen):
        raise TypeError("cleanup_port_forward(proc=%r): expected the subprocess.Popen that "
                        "JobHandle.debug_attach returned" % (proc,))
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
