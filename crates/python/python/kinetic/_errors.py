"""Remote exceptions rebuilt on the client, with the remote traceback attached."""

import ast
import builtins
import importlib
import sys

from kinetic import _native


class RemoteTraceback(Exception):
    """The remote traceback, chained as ``__cause__`` of a rebuilt exception
    (as :mod:`concurrent.futures` does for a process pool's)."""

    def __init__(self, tb: str):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return "\n\n" + self.tb.rstrip("\n")


class ClientOnlyError(RuntimeError):
    """A call only a client can make (``run_async``, ``attach``, ``list_jobs``,
    …), made inside a job, where the job's own ``kinetic`` raises it."""


class RemoteError(RuntimeError):
    """A job's error whose type cannot be rebuilt here (or a runner phase's own)."""

    def __init__(self, type_name: str, message: str):
        super().__init__("%s: %s" % (type_name, message))
        self.type_name = type_name


def _resolve(type_name: str):
    module, _, name = type_name.rpartition(".")
    try:
        if not module:
            target = getattr(builtins, name, None)
        else:
            mod = sys.modules.get(module) or importlib.import_module(module)
            target = mod
            for part in name.split("."):
                target = getattr(target, part)
    except Exception:  # noqa: BLE001 - an unknown type is reported as RemoteError
        return None
    if isinstance(target, type) and issubclass(target, Exception):
        return target
    return None


def _arguments(cls: type, message: str) -> tuple:
    """The arguments that rebuild an exception whose ``str()`` was
    ``message``. A ``KeyError``'s ``str()`` is its key's ``repr()``
    (``KeyError('missing')`` reads ``'missing'``): the key is read back from
    it, so the rebuilt error reads ``KeyError: 'missing'`` again, not
    ``KeyError: "'missing'"``. A message that is no literal stays the
    argument."""
    if issubclass(cls, KeyError):
        try:
            return (ast.literal_eval(message),)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            pass
    return (message,)


def rebuild(err: "_native.RemoteJobError") -> BaseException:
    """The user's exception from a job's error: its type where it can be
    rebuilt (built-in or importable here, constructed from the message),
    else :class:`RemoteError`; ``remote_traceback``, ``job_id`` and ``phase``
    set, and the remote traceback chained as ``__cause__``."""
    job_id, type_name, message, tb, phase = err.args[:5]
    # For a multi-host job: which host reported the failure (a note).
    host_note = err.args[5] if len(err.args) > 5 else None
    exc = None
    cls = _resolve(type_name) if phase in (None, "execute", "entrypoint load", "data resolve") else None
    if cls is not None:
        try:
            exc = cls(*_arguments(cls, message))
        except Exception:  # noqa: BLE001 - a constructor that needs other arguments
            exc = None
    if exc is None:
        exc = RemoteError(type_name, message if phase in (None, "execute") else "%s (in the runner's %s phase)" % (message, phase))
    for name, value in (("remote_traceback", tb), ("job_id", job_id), ("phase", phase)):
        try:
            setattr(exc, name, value)
        except Exception:  # noqa: BLE001 - exceptions with __slots__
            pass
    if tb:
        exc.__cause__ = RemoteTraceback(tb)
    if host_note:
        _add_note(exc, host_note)
    return exc


def _add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` (Python 3.11+), or the same ``__notes__`` before."""
    try:
        if hasattr(exc, "add_note"):
            exc.add_note(note)
        else:
            exc.__notes__ = list(getattr(exc, "__notes__", [])) + [note]
    except Exception:  # noqa: BLE001 - exceptions with __slots__
        pass


def translate(err: BaseException) -> BaseException:
    """``err`` as the user sees it: remote errors rebuilt, others as they are."""
    if isinstance(err, _native.RemoteJobError):
        return rebuild(err)
    return err
