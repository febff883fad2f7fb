"""How Python values travel: JSON where they are JSON, pickled otherwise.

A value made only of ``None``, ``bool``, ``int``, finite ``float``, ``str``
(without lone surrogates), lists and dicts with such string keys travels as
JSON, readable from any language: JSON keeps it exactly. Any other value (a
tuple, a dict with int keys, a numpy array, a dataclass, a dict shaped like
one of the markers below) travels pickled (with cloudpickle when installed:
classes of ``__main__`` travel by value) as a leaf ``{"__kinetic_pickle__": base64,
"python": "3.11"}`` that a runner of the same Python minor version unpickles;
:class:`kinetic.Data` becomes a marker the engine turns into a data
reference. Results come back by the same rule (the runner's ``json_keeps``):
JSON when JSON keeps them, pickled otherwise.
"""

import base64
import json
import math
import pickle
import re

from kinetic import _native
from kinetic.data import Data

PICKLE_KEY = "__kinetic_pickle__"
DATA_KEY = "__kinetic_data__"
# The runner's tags for a string with lone surrogates and for a dict that
# would read as a marker, in a result of a job whose client was not Python.
STR_TAG = "__kinetic_str__"
DICT_TAG = "__kinetic_dict__"
_MARKERS = (PICKLE_KEY, DATA_KEY, "__data_ref__", STR_TAG, DICT_TAG)
_SURROGATE = re.compile("[\ud800-\udfff]")


def python_minor() -> str:
    return _native.python_minor()


def encode(value, where: str):
    """``value`` as a JSON tree for the engine (``where`` names it in errors)."""
    if isinstance(value, Data):
        return {DATA_KEY: value._spec()}
    if value is None or type(value) in (bool, int):
        return value
    if type(value) is str and not _SURROGATE.search(value):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    if type(value) is list:
        return [encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
    if (type(value) is dict and all(type(k) is str and not _SURROGATE.search(k) for k in value)
            and not any(m in value for m in _MARKERS)):
        return {k: encode(v, "%s[%r]" % (where, k)) for k, v in value.items()}
    try:
        data = _dumps(value)
    except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
        raise TypeError("%s cannot be sent: it is not JSON and cannot be pickled (%s: %s)"
                        % (where, type(err).__name__, err)) from err
    return {PICKLE_KEY: base64.b64encode(data).decode("ascii"), "python": python_minor()}


def _dumps(value) -> bytes:
    """``value`` pickled: with cloudpickle when installed, so that an
    instance of a class defined in ``__main__`` (which a job cannot import)
    travels with its class, by value."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _hashable(key):
    return key if isinstance(key, (str, int, float, bool)) or key is None else json.dumps(key)


def decode(tree):
    """A JSON tree from a job with every pickled leaf unpickled and the
    runner's tags (a string with lone surrogates, a dict that looked like a
    marker) turned back into the str and dict they stand for."""
    if isinstance(tree, dict):
        if len(tree) == 1 and isinstance(tree.get(STR_TAG), list):
            pieces = tree[STR_TAG]
            if all(isinstance(p, str) or (type(p) is int and 0xD800 <= p <= 0xDFFF) for p in pieces):
                return "".join(p if isinstance(p, str) else chr(p) for p in pieces)
        if len(tree) == 1 and isinstance(tree.get(DICT_TAG), list):
            pairs = tree[DICT_TAG]
            if all(isinstance(p, list) and len(p) == 2 for p in pairs):
                return {_hashable(decode(k)): decode(v) for k, v in pairs}
        if isinstance(tree.get(PICKLE_KEY), str):
            made_by = tree.get("python")
            if made_by != python_minor():
                raise TypeError(
                    "the job's result was pickled by Python %s but this client runs Python %s; "
                    "return JSON values, or run the client on Python %s" % (made_by, python_minor(), made_by))
            return pickle.loads(base64.b64decode(tree[PICKLE_KEY]))
        return {k: decode(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [decode(v) for v in tree]
    return tree
