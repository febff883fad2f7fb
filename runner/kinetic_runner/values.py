"""Values on the wire: lossless JSON for arguments, inputs and results."""

from __future__ import annotations

import contextlib
import json
import re
import sys


# User values (arguments, inputs, results) travel as JSON, losslessly:
# integers of any size (the int/str digit limit is lifted while encoding and
# decoding), nesting up to MAX_JSON_DEPTH levels, and strings holding
# surrogate code points (which JSON text can escape but UTF-8, hence most
# readers, cannot hold) as {"__kinetic_str__": [pieces]}: strings and the
# integer code points of the surrogates, in order. A dict with such a key,
# or one that would read as a tag or as a pickled leaf, travels as
# {"__kinetic_dict__": [[key, value], ...]}. Both tags are turned back into
# str and dict in arguments (and by the Python client in results).
#
# A Python client (spec.python_values) gets a result JSON would change (a
# tuple, a set, a dict with non-string keys, a lone surrogate, a dict shaped
# like one of these markers) pickled instead: see ``json_keeps``.

PICKLE_KEY = "__kinetic_pickle__"

MAX_JSON_DEPTH = 512
STR_TAG = "__kinetic_str__"
DICT_TAG = "__kinetic_dict__"
_SURROGATE = re.compile("[\ud800-\udfff]")
# What json.dumps writes for a surrogate, and the tags' own names: only
# then is a value rewritten before encoding.
_NEEDS_TAGS = re.compile(r'\\u[dD][89a-fA-F][0-9a-fA-F]{2}|"__kinetic_(?:str|dict|pickle)__"')
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKET = re.compile(r"[\[\]{}]")


@contextlib.contextmanager
def unlimited_int_digits():
    """Lifts Python's limit on int/str conversion (3.11+) for the duration."""
    get = getattr(sys, "get_int_max_str_digits", None)
    if get is None:
        yield
        return
    previous = get()
    sys.set_int_max_str_digits(0)
    try:
        yield
    finally:
        sys.set_int_max_str_digits(previous)


def json_depth(text: str) -> int:
    """How deeply the JSON ``text`` nests lists and objects."""
    depth = deepest = 0
    for match in _BRACKET.finditer(_JSON_STRING.sub('""', text)):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _str_to_wire(text: str):
    if not _SURROGATE.search(text):
        return text
    pieces, run = [], []
    for char in text:
        if "\ud800" <= char <= "\udfff":
            if run:
                pieces.append("".join(run))
                run = []
            pieces.append(ord(char))
        else:
            run.append(char)
    if run:
        pieces.append("".join(run))
    return {STR_TAG: pieces}


def _looks_tagged(value: dict) -> bool:
    return (len(value) == 1 and (STR_TAG in value or DICT_TAG in value)) or PICKLE_KEY in value


# Keys that make a dict read as the protocol's rather than the user's: the
# Python client pickles a dict holding one, on the way in and back.
WIRE_MARKERS = frozenset((PICKLE_KEY, "__kinetic_data__", "__data_ref__", STR_TAG, DICT_TAG))


def json_keeps(value) -> bool:
    """Whether JSON carries ``value`` exactly, so a Python client reads back
    an equal value of the same types: ``None``, ``bool``, ``int``, finite
    ``float``, ``str`` without surrogates, lists, and dicts whose keys are
    such strings and not a marker (``WIRE_MARKERS``). The rule the client's
    ``kinetic._values.encode`` applies to arguments; subclasses do not
    count, and neither does a list or dict met twice (a cycle, or a value
    shared that JSON would copy)."""
    seen = set()
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if item is None or kind is bool or kind is int:
            continue
        if kind is float:
            if item != item or item in (float("inf"), float("-inf")):
                return False
            continue
        if kind is str:
            if _SURROGATE.search(item):
                return False
            continue
        if kind is not list and kind is not dict:
            return False
        if id(item) in seen:
            return False
        seen.add(id(item))
        if kind is list:
            stack.extend(item)
            continue
        for key in item:
            if type(key) is not str or key in WIRE_MARKERS or _SURROGATE.search(key):
                return False
        stack.extend(item.values())
    return True


def to_wire(value, depth: int = 0):
    """``value`` with the strings and dicts JSON cannot carry as they are tagged."""
    if depth > MAX_JSON_DEPTH:
        raise ValueError("the value is nested more than %d levels deep; values are limited to %d levels"
                         % (MAX_JSON_DEPTH, MAX_JSON_DEPTH))
    if isinstance(value, str):
        return _str_to_wire(value)
    if isinstance(value, dict):
        if _looks_tagged(value) or any(isinstance(k, str) and _SURROGATE.search(k) for k in value):
            return {DICT_TAG: [[to_wire(k, depth + 2), to_wire(v, depth + 2)] for k, v in value.items()]}
        return {k: to_wire(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v, depth + 1) for v in value]
    return value


def from_wire(value):
    """The value ``to_wire`` encoded: tags turned back into str and dict."""
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get(STR_TAG), list):
            pieces = value[STR_TAG]
            if all(isinstance(p, str) or (type(p) is int and 0xD800 <= p <= 0xDFFF) for p in pieces):
                return "".join(p if isinstance(p, str) else chr(p) for p in pieces)
        if len(value) == 1 and isinstance(value.get(DICT_TAG), list):
            pairs = value[DICT_TAG]
            if all(isinstance(p, list) and len(p) == 2 for p in pairs):
                return {_hashable(from_wire(k)): from_wire(v) for k, v in pairs}
        return {k: from_wire(v) for k, v in value.items()}
    return value


def _hashable(key):
    return key if isinstance(key, (str, int, float, bool)) or key is None else json.dumps(key)


def encode_value(value) -> str:
    """The JSON text of a user value, as the protocol carries it; ValueError
    or TypeError when it cannot be (NaN, infinities, objects JSON has no
    form for, nesting beyond MAX_JSON_DEPTH)."""
    limit = "values are limited to %d levels" % MAX_JSON_DEPTH
    try:
        with unlimited_int_digits():
            text = json.dumps(value, allow_nan=False)
            if _NEEDS_TAGS.search(text):
                text = json.dumps(to_wire(value), allow_nan=False)
    except RecursionError:
        raise ValueError("the value is nested too deeply to encode; " + limit) from None
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError("the value is nested %d levels deep; %s" % (depth, limit))
    return text
