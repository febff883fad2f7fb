"""How Python values travel: JSON where they are JSON, pickled otherwise.

A value made only of ``None``, ``bool``, ``int``, finite ``float``, ``str``,
lists and dicts with string keys travels as JSON, readable from any
language. Any other value (a tuple, a numpy array, a dataclass) travels as a
leaf ``{"__kinetic_pickle__": base64, "python": "3.11"}`` that a runner of the
same Python minor version unpickles; :class:`kinetic.Data` becomes a marker
the engine turns into a data reference.
"""

import base64
import math
import pickle

from kinetic import _native
from kinetic.data import Data

PICKLE_KEY = "__kinetic_pickle__"
DATA_KEY = "__kinetic_data__"
_MARKERS = (PICKLE_KEY, DATA_KEY, "__data_ref__")


def python_minor() -> str:
    return _native.python_minor()


def encode(value, where: str):
    """``value`` as a JSON tree for the engine (``where`` names it in errors)."""
    if isinstance(value, Data):
        return {DATA_KEY: value._spec()}
    if value is None or type(value) in (bool, str, int):
        return value
    if type(value) is float and math.isfinite(value):
        return value
    if type(value) is list:
        return [encode(v, "%s[%d]" % (where, i)) for i, v in enumerate(value)]
    if type(value) is dict and all(type(k) is str for k in value) and not any(m in value for m in _MARKERS):
        return {k: encode(v, "%s[%r]" % (where, k)) for k, v in value.items()}
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
        raise TypeError("%s cannot be sent: it is not JSON and cannot be pickled (%s: %s)"
                        % (where, type(err).__name__, err)) from err
    return {PICKLE_KEY: base64.b64encode(data).decode("ascii"), "python": python_minor()}


def decode(tree):
    """A JSON tree from a job with every pickled leaf unpickled."""
    if isinstance(tree, dict):
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
