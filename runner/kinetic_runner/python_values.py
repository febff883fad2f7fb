"""Pickled Python values: arguments a Python client pickled, and results
that go back pickled."""

from __future__ import annotations

import json
import sys

from .protocol import DATA, PROTOCOL
from .values import PICKLE_KEY
from .results import PhaseFailure


def python_minor() -> str:
    return "%d.%d" % sys.version_info[:2]


def is_pickled(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get(PICKLE_KEY), str)


def decode_python_values(value):
    """``value`` with every pickled leaf (``{"__kinetic_pickle__": base64, "python": "3.11"}``) unpickled.

    A value pickled by another Python minor version is refused: pickles of
    the standard library's and of most packages' objects differ between them.
    """
    if is_pickled(value):
        made_by = value.get("python")
        if made_by != python_minor():
            raise PhaseFailure(DATA, "PythonVersionMismatch",
                               "an argument was pickled by Python %s but this job runs Python %s; "
                               "pass JSON values, or run the client on Python %s" % (made_by, python_minor(), python_minor()), "")
        import base64
        import pickle
        return pickle.loads(base64.b64decode(value[PICKLE_KEY]))
    if isinstance(value, list):
        return [decode_python_values(v) for v in value]
    if isinstance(value, dict):
        return {k: decode_python_values(v) for k, v in value.items()}
    return value


RUNNER_MODULE = "__kinetic_runner__"


def call_pickled(fn, *args, **kwargs):
    """The entrypoint ``__kinetic_runner__:call_pickled``: calls the function
    that came pickled by value (cloudpickle) as the first argument."""
    if not callable(fn):
        raise TypeError("__kinetic_runner__:call_pickled needs a pickled function as its first argument, got %s"
                        % type(fn).__name__)
    return fn(*args, **kwargs)


def encode_python_value(value) -> dict:
    """``value`` pickled as a leaf a Python client of the same minor version
    reads back: with cloudpickle when the job has it, so that an instance
    (or an exception) of a class that came by value from the client's
    ``__main__`` goes back as an instance of that class."""
    import base64
    import pickle
    try:
        import cloudpickle
        dumps = cloudpickle.dumps
    except ImportError:
        dumps = pickle.dumps
    return {PICKLE_KEY: base64.b64encode(dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode("ascii"),
            "python": python_minor()}


def pickled_document(value, host_index: int) -> str:
    """result.json for ``value`` pickled (``encode_python_value``): the leaf
    is the protocol's own, so it is written as it is, never tagged."""
    return '{"protocol": %d, "success": true, "value": %s, "host_index": %d}' % (
        PROTOCOL, json.dumps(encode_python_value(value)), host_index)
