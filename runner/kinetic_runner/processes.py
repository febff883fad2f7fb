"""Child processes: installs (requirements, cloudpickle) and the user's
command, with signals passed on."""

from __future__ import annotations

import collections
import importlib
import json
import shutil
import signal
import sys
import threading

from .protocol import LOAD, RunnerError, STDERR_TAIL_LINES, log


def ensure_cloudpickle(environ) -> None:
    """A function that travelled by value was pickled with cloudpickle,
    which its unpickling needs: imported, or installed now (the images the
    build makes have it; a prebuilt or custom image may not), or an error
    that says what to add."""
    try:
        import cloudpickle  # noqa: F401
        return
    except ImportError:
        pass
    import shlex
    argv = install_command(environ, None, ["cloudpickle"])
    log(LOAD, "the function travels by value (cloudpickle) and this image has no cloudpickle; running %s"
        % shlex.join(argv))
    code, tail = run_capturing_stderr(argv)
    importlib.invalidate_caches()
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        raise RunnerError(
            "the function travels by value, pickled with cloudpickle (it is defined in __main__: a script, the "
            "interpreter's prompt or a notebook, or is a lambda or closure), and this job's Python (%s) has no "
            "cloudpickle, and installing it failed (%s exited with code %d%s); add cloudpickle to the image or "
            "to the project's requirements, or define the function in a module of the project"
            % (sys.executable, shlex.join(argv), code, ("; stderr tail:\n" + tail) if tail else "")) from None


def install_command(environ, requirements_path: str | None, packages: list | None = None) -> list:
    """The command that installs a requirements file (or, with
    ``requirements_path`` None, the named ``packages``)."""
    what = ["-r", requirements_path] if requirements_path is not None else list(packages or [])
    override = environ.get("KINETIC_INSTALL_COMMAND")
    if override:
        try:
            argv = json.loads(override)
        except ValueError:
            argv = None
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise RunnerError("KINETIC_INSTALL_COMMAND must be a JSON list of strings")
        return argv + ([requirements_path] if requirements_path is not None else what)
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--system"] + what
    return [sys.executable, "-m", "pip", "install"] + what


def run_capturing_stderr(argv: list) -> tuple:
    """Runs ``argv`` with its stdout on our stderr and its stderr echoed; returns (code, stderr tail)."""
    import shlex
    import subprocess
    try:
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.__stderr__.fileno(), stderr=subprocess.PIPE)
    except OSError as err:
        raise RunnerError("cannot start %s: %s" % (shlex.join(argv), err)) from None
    tail = collections.deque(maxlen=STDERR_TAIL_LINES)
    out = sys.__stderr__.buffer
    for line in child.stderr:
        out.write(line)
        out.flush()
        tail.append(line.decode("utf-8", "replace").rstrip("\n"))
    child.stderr.close()
    return child.wait(), "\n".join(tail)


def wait_forwarding_signals(child: subprocess.Popen) -> int:
    """Waits for ``child``, passing SIGTERM and SIGINT on to it meanwhile."""
    previous = {}

    def forward(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, forward)
    try:
        return child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
