"""``spec.json``: reading and validating it."""

from __future__ import annotations

import json
import re

from .protocol import DEFAULT_EXTRACT_LIMITS, PROTOCOL, RunnerError, spec_field
from .gcs import Storage, parse_uri
from .debug import debug_settings
from .data import is_data_ref
from .values import unlimited_int_digits


class Spec:
    """The validated fields of spec.json the runner uses."""

    def __init__(self, doc: dict) -> None:
        self.job_id = spec_field(doc, "job_id", str)
        self.entrypoint = _entrypoint(doc.get("entrypoint"))
        self.args = spec_field(doc, "args", list, [])
        self.kwargs = spec_field(doc, "kwargs", dict, {})
        named = [("argument %d" % i, v) for i, v in enumerate(self.args)]
        for where, value in named + [("keyword argument %r" % k, v) for k, v in self.kwargs.items()]:
            number = out_of_range_number(value)
            if number is not None:
                raise RunnerError("%s: the number %s is out of the range of a float (Python would read it as %r); "
                                  "pass a number a float can hold, or a string" % (where, number.text, float(number)))
        self.volumes = _volumes(spec_field(doc, "volumes", list, []))
        self.env_names = spec_field(doc, "env_names", list, [])
        if not all(isinstance(n, str) and n for n in self.env_names):
            raise RunnerError("spec.env_names must be a list of non-empty strings")
        self.secret_names = spec_field(doc, "secret_names", list, [])
        if not all(isinstance(n, str) and n for n in self.secret_names):
            raise RunnerError("spec.secret_names must be a list of non-empty strings")
        output_dir = doc.get("output_dir")
        if output_dir is not None and not isinstance(output_dir, str):
            raise RunnerError("spec.output_dir must be a string or null")
        self.output_dir = output_dir
        self.context = _artifact(doc.get("context"), "context")
        self.extract_limits = _extract_limits(doc.get("extract_limits"))
        requirements = doc.get("requirements")
        self.requirements = None if requirements is None else _artifact(requirements, "requirements")
        self.plan = doc.get("plan")
        cluster = spec_field(doc, "cluster", dict, {})
        self.accelerator = spec_field(cluster, "accelerator", str, "cpu", "spec.cluster.")
        self.num_nodes = spec_field(cluster, "num_nodes", int, 1, "spec.cluster.")
        self.num_gpus_per_node = spec_field(cluster, "num_gpus_per_node", int, 0, "spec.cluster.")
        self.num_accelerators_per_node = spec_field(cluster, "num_accelerators_per_node", int,
                                                self.num_gpus_per_node, "spec.cluster.")
        self.node_ips = spec_field(cluster, "node_ips", list, [], "spec.cluster.")
        if not all(isinstance(ip, str) for ip in self.node_ips):
            raise RunnerError("spec.cluster.node_ips must be a list of strings")
        self.cluster_name = spec_field(cluster, "cluster_name", str, "", "spec.cluster.")
        self.cloud = spec_field(cluster, "cloud", str, "GCP", "spec.cluster.")
        self.region = spec_field(cluster, "region", str, None, "spec.cluster.")
        self.zone = spec_field(cluster, "zone", str, None, "spec.cluster.")
        python_values = doc.get("python_values")
        if python_values is not None and not isinstance(python_values, str):
            raise RunnerError("spec.python_values must be a Python version string ('3.11') or null")
        self.python_values = python_values
        self.debug = debug_settings(doc.get("debug"))
        starts_uri = doc.get("starts_uri")
        if starts_uri is not None and (not isinstance(starts_uri, str) or not starts_uri):
            raise RunnerError("spec.starts_uri must be a non-empty string or null")
        self.starts_uri = starts_uri
        attempt_offset = doc.get("attempt_offset", 0)
        if isinstance(attempt_offset, bool) or not isinstance(attempt_offset, int) or attempt_offset < 0:
            raise RunnerError("spec.attempt_offset must be a whole number, zero or more, or absent")
        self.attempt_offset = attempt_offset


def _entrypoint(entry) -> dict:
    if not isinstance(entry, dict):
        raise RunnerError("spec.entrypoint must be an object")
    kind = entry.get("kind")
    if kind == "function":
        function = entry.get("function")
        if not isinstance(function, str) or not function:
            raise RunnerError("spec.entrypoint.function must be a non-empty string")
        module, path = entry.get("module"), entry.get("path")
        if (module is None) == (path is None):
            raise RunnerError("spec.entrypoint needs exactly one of 'module' and 'path'")
        if not isinstance(module or path, str) or not (module or path):
            raise RunnerError("spec.entrypoint.module/path must be a non-empty string")
        return entry
    if kind == "command":
        argv = entry.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise RunnerError("spec.entrypoint.argv must be a non-empty list of strings")
        return entry
    raise RunnerError("spec.entrypoint.kind must be 'function' or 'command', not %r" % (kind,))


def _artifact(doc, name: str) -> dict:
    if not isinstance(doc, dict):
        raise RunnerError("spec.%s must be an object with 'uri' and 'sha256'" % name)
    parse_uri(doc.get("uri"))
    sha = doc.get("sha256")
    if not isinstance(sha, str) or not re.match(r"^[0-9a-fA-F]{64}$", sha):
        raise RunnerError("spec.%s.sha256 must be 64 hex digits" % name)
    return {"uri": doc["uri"], "sha256": sha.lower()}


def _extract_limits(doc) -> dict:
    limits = dict(DEFAULT_EXTRACT_LIMITS)
    if doc is None:
        return limits
    if not isinstance(doc, dict):
        raise RunnerError("spec.extract_limits must be an object")
    for key in limits:
        value = doc.get(key)
        if value is None:
            continue
        if type(value) is not int or value <= 0:
            raise RunnerError("spec.extract_limits.%s must be a positive integer, not %r" % (key, value))
        limits[key] = value
    return limits


def _volumes(volumes: list) -> list:
    for volume in volumes:
        if not isinstance(volume, dict):
            raise RunnerError("spec.volumes entries must be objects")
        mount = volume.get("mount_path")
        if not isinstance(mount, str) or not mount.startswith("/"):
            raise RunnerError("spec.volumes mount_path must be an absolute path, not %r" % (mount,))
        if not is_data_ref(volume.get("data")):
            raise RunnerError("spec.volumes[%r].data must be a data reference" % mount)
    return volumes


class OutOfRangeNumber(float):
    """A JSON number beyond a float's range (``1e999``, ``1e-999``), which
    ``json`` would read as ``inf`` or ``0.0``; keeps its text so that
    ``Spec`` refuses it in an argument, naming both."""

    def __new__(cls, text: str) -> "OutOfRangeNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number


def parse_json_float(text: str) -> float:
    """``json``'s ``parse_float``: the float, or an ``OutOfRangeNumber``."""
    value = float(text)
    mantissa = re.split("[eE]", text, maxsplit=1)[0]
    if value in (float("inf"), float("-inf")) or (value == 0.0 and re.search("[1-9]", mantissa)):
        return OutOfRangeNumber(text)
    return value


def out_of_range_number(value):
    """The first ``OutOfRangeNumber`` in ``value`` (lists and dicts), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, OutOfRangeNumber):
            return item
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return None


def load_spec(storage: Storage, uri: str) -> dict:
    """Reads spec.json; RunnerError when unreadable, not protocol 1, or without a result URI."""
    try:
        raw = storage.read_bytes(uri)
    except (OSError, RunnerError) as err:
        raise RunnerError("cannot read spec %s: %s" % (uri, err)) from None
    try:
        with unlimited_int_digits():
            doc = json.loads(raw.decode("utf-8"), parse_float=parse_json_float)
    except ValueError as err:
        raise RunnerError("spec %s is not JSON: %s" % (uri, err)) from None
    if not isinstance(doc, dict):
        raise RunnerError("spec %s is not a JSON object" % uri)
    protocol = doc.get("protocol")
    if type(protocol) is not int or protocol != PROTOCOL:
        raise RunnerError("spec %s has protocol %r; this runner speaks protocol %d" % (uri, protocol, PROTOCOL))
    try:
        parse_uri(doc.get("result_uri"))
    except RunnerError as err:
        raise RunnerError("spec %s has no usable result_uri: %s" % (uri, err)) from None
    return doc
