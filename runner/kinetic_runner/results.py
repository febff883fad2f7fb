"""Failures and results: the documents the runner writes, the user's
traceback, and the phase a failure belongs to."""

from __future__ import annotations

import importlib
import json
import os

from .protocol import PROTOCOL, REPR_LIMIT, RunnerError
from .job_module import JOB_MODULE_DIR
from .values import encode_value


def qualified_name(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None) or cls.__name__
    return name if module in (None, "builtins") else "%s.%s" % (module, name)


def describe_exit(code) -> str:
    return "function called sys.exit(%r)" % (code,)


def _user_traceback(tb):
    """The user's frames of ``tb``: the runner's own frames, importlib's and
    the job-side ``kinetic`` module's (a decorated function called in the
    job passes through its wrapper) are left out wherever they are in the
    chain, when user frames remain."""
    here = os.path.abspath(__file__)
    # The runner's own files: the one built file, or, imported from a
    # checkout as the package, every module of the package.
    package_dir = os.path.dirname(here) + os.sep if __package__ else None
    importlib_dir = os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep
    job_module = os.sep + JOB_MODULE_DIR + os.sep

    def own(filename: str) -> bool:
        return (filename == here or (package_dir is not None and filename.startswith(package_dir))
                or filename.startswith(("<frozen importlib", importlib_dir))
                or job_module in filename)

    kept = []
    current = tb
    while current is not None:
        if not own(current.tb_frame.f_code.co_filename):
            kept.append(current)
        current = current.tb_next
    if not kept:
        return tb
    import types
    chain = None
    for entry in reversed(kept):
        chain = types.TracebackType(chain, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return chain


class PhaseFailure(Exception):
    """A phase failed; carries the ``error`` object of the failure result."""

    def __init__(self, phase: str, error_type: str, message: str, tb: str) -> None:
        super().__init__("%s: %s" % (error_type, message))
        self.error = {"type": error_type, "message": message, "traceback": tb, "phase": phase}

    @classmethod
    def from_exception(cls, phase: str, exc: BaseException, user_code: bool) -> PhaseFailure:
        if isinstance(exc, RunnerError):
            error_type, message = "RunnerError", str(exc)
        elif isinstance(exc, SystemExit):
            error_type, message = "SystemExit", describe_exit(exc.code)
        elif user_code or not isinstance(exc, Exception):
            error_type, message = qualified_name(type(exc)), safe_str(exc)
        else:
            error_type, message = "RunnerError", "%s: %s" % (qualified_name(type(exc)), safe_str(exc))
        tb = exc.__traceback__
        if user_code:
            tb = _user_traceback(tb)
        import traceback
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        return cls(phase, error_type, message, text)


def safe_str(value) -> str:
    try:
        return str(value)
    except Exception as err:  # noqa: BLE001
        return "<unprintable %s: %s>" % (type(value).__name__, type(err).__name__)


def safe_repr(value) -> str:
    try:
        text = repr(value)
    except Exception as err:  # noqa: BLE001
        text = "<unreprable %s: %s>" % (type(value).__name__, safe_str(err))
    return text if len(text) <= REPR_LIMIT else text[:REPR_LIMIT] + "..."


def success_document(value, host_index: int) -> str:
    """result.json for ``value``; raises ValueError (or TypeError) when the
    value cannot travel as JSON (see ``encode_value``)."""
    return '{"protocol": %d, "success": true, "value": %s, "host_index": %d}' % (
        PROTOCOL, encode_value(value), host_index)

def failure_document(error: dict, host_index: int) -> str:
    return json.dumps({"protocol": PROTOCOL, "success": False, "host_index": host_index, "error": error})
