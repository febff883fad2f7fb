"""Index mode: one input of a batch run as an index of a Kubernetes Indexed
Job (``--batch-spec URI``).

Every pod of the Job runs the same command; Kubernetes tells each which
input it is (``JOB_COMPLETION_INDEX``) and how many of its earlier runs
failed (the pod annotation ``batch.kubernetes.io/job-index-failure-count``,
given to the runner through the downward API as
``KINETIC_INDEX_FAILURE_COUNT``). From the batch spec, written once by the
client, the runner builds the spec of that input's child job, named
``child_job_id(group, index, attempt)`` as the client names a child it
submits itself, writes the child's ``handle.json`` and ``spec.json``, and
then runs the child as any job: its result and log chunks land under the
child's id, so the client reads the children of an indexed batch exactly as
it reads those it submitted one by one."""

from __future__ import annotations

import copy
import hashlib
import json
import re

from .protocol import PROTOCOL, RunnerError
from .gcs import Storage, parse_uri
from .values import unlimited_int_digits
from .spec import parse_json_float


INDEX_ENV = "JOB_COMPLETION_INDEX"
INDEX_FAILURES_ENV = "KINETIC_INDEX_FAILURE_COUNT"
BATCH_SPEC_KIND = "indexed_batch"
# The same bounds as crates/core/src/batch (MAX_DETERMINISTIC_INDEX and
# MAX_DETERMINISTIC_ATTEMPT): 24 bits of index, 8 of attempt.
MAX_CHILD_INDEX = 1 << 24
MAX_CHILD_ATTEMPT = 255
_GROUP_ID_RE = re.compile(r"^grp-[0-9a-f]{8}$")
_JOB_ID_PLACEHOLDER = "{job_id}"


def _feistel_round(group_id: str, round_: int, half: int) -> int:
    digest = hashlib.sha256(b"kinetic-batch-child\0" + group_id.encode("utf-8")
                            + bytes([0, round_]) + half.to_bytes(2, "big")).digest()
    return int.from_bytes(digest[:2], "big")


def child_job_id(group_id: str, index: int, attempt: int) -> str:
    """The job id of input ``index``'s attempt ``attempt`` in ``group_id``:
    ``(attempt << 24) | index`` through a 4-round Feistel permutation keyed
    by the group id, byte for byte as ``kinetic_core::batch::child_job_id``."""
    if not 0 <= index < MAX_CHILD_INDEX or not 1 <= attempt <= MAX_CHILD_ATTEMPT:
        raise RunnerError("no deterministic child id for input %d, attempt %d (inputs 0 to %d, attempts 1 to %d)"
                          % (index, attempt, MAX_CHILD_INDEX - 1, MAX_CHILD_ATTEMPT))
    plain = (attempt << 24) | index
    left, right = plain >> 16, plain & 0xFFFF
    for round_ in range(4):
        left, right = right, left ^ _feistel_round(group_id, round_, right)
    return "job-%08x" % ((left << 16) | right)


def _whole_number(environ, name: str, default=None) -> int:
    raw = environ.get(name)
    if raw is None or not raw.strip():
        if default is None:
            raise RunnerError("%s is not set: index mode runs in a pod of an Indexed Job, where Kubernetes "
                              "sets it" % name)
        return default
    value = raw.strip()
    if not value.isdigit():
        raise RunnerError("%s=%r: expected a whole number from 0" % (name, raw))
    return int(value)


def batch_position(environ) -> tuple:
    """``(index, attempt)`` of this pod: its completion index, and one more
    than the failures of that index so far."""
    index = _whole_number(environ, INDEX_ENV)
    failures = _whole_number(environ, INDEX_FAILURES_ENV, 0)
    return index, failures + 1


def _read_json(storage: Storage, uri: str, what: str):
    try:
        raw = storage.read_bytes(uri)
    except (OSError, RunnerError) as err:
        raise RunnerError("cannot read %s %s: %s" % (what, uri, err)) from None
    try:
        with unlimited_int_digits():
            return json.loads(raw.decode("utf-8"), parse_float=parse_json_float)
    except ValueError as err:
        raise RunnerError("%s %s is not JSON: %s" % (what, uri, err)) from None


class BatchSpec:
    """The validated batch spec (``_groups/{group_id}/batch.json``)."""

    def __init__(self, doc, uri: str) -> None:
        if not isinstance(doc, dict):
            raise RunnerError("batch spec %s is not a JSON object" % uri)
        if doc.get("protocol") != PROTOCOL or type(doc.get("protocol")) is not int:
            raise RunnerError("batch spec %s has protocol %r; this runner speaks protocol %d"
                              % (uri, doc.get("protocol"), PROTOCOL))
        if doc.get("kind") != BATCH_SPEC_KIND:
            raise RunnerError("batch spec %s has kind %r; expected %r" % (uri, doc.get("kind"), BATCH_SPEC_KIND))
        self.group_id = doc.get("group_id")
        if not isinstance(self.group_id, str) or not _GROUP_ID_RE.match(self.group_id):
            raise RunnerError("batch spec %s: group_id must be 'grp-' and 8 hex digits, not %r"
                              % (uri, self.group_id))
        self.inputs = doc.get("inputs")
        self.chunk_size = doc.get("chunk_size")
        for name, value in (("inputs", self.inputs), ("chunk_size", self.chunk_size)):
            if type(value) is not int or value < 1:
                raise RunnerError("batch spec %s: %s must be a whole number from 1, not %r" % (uri, name, value))
        self.calls_uri = doc.get("calls_uri")
        self.job_uri = doc.get("job_uri")
        for name, value in (("calls_uri", self.calls_uri), ("job_uri", self.job_uri)):
            if not isinstance(value, str) or not value:
                raise RunnerError("batch spec %s: %s must be a non-empty string" % (uri, name))
        if _JOB_ID_PLACEHOLDER not in self.job_uri:
            raise RunnerError("batch spec %s: job_uri must hold %s, where the child's id goes"
                              % (uri, _JOB_ID_PLACEHOLDER))
        parse_uri(self.job_uri.replace(_JOB_ID_PLACEHOLDER, "job-00000000"))
        # Block mode (a block of inputs per index, run by its pod one
        # after the other): absent or 1 in a batch of one input per index.
        self.block_size = doc.get("block_size", 1)
        if type(self.block_size) is not int or self.block_size < 1:
            raise RunnerError("batch spec %s: block_size must be a whole number from 1, not %r"
                              % (uri, self.block_size))
        self.retries = doc.get("retries", 0)
        if type(self.retries) is not int or self.retries < 0:
            raise RunnerError("batch spec %s: retries must be a whole number from 0, not %r" % (uri, self.retries))
        self.fail_fast = doc.get("fail_fast", False)
        if type(self.fail_fast) is not bool:
            raise RunnerError("batch spec %s: fail_fast must be true or false, not %r" % (uri, self.fail_fast))
        self.blocks_uri = doc.get("blocks_uri", "")
        self.stop_uri = doc.get("stop_uri", "")
        if self.block_size > 1:
            for name, value in (("blocks_uri", self.blocks_uri), ("stop_uri", self.stop_uri)):
                if not isinstance(value, str) or not value:
                    raise RunnerError("batch spec %s: a batch in blocks needs %s, a non-empty string" % (uri, name))
                parse_uri(value)
        self.child = doc.get("child")
        self.record = doc.get("record")
        for name, value in (("child", self.child), ("record", self.record)):
            if not isinstance(value, dict):
                raise RunnerError("batch spec %s: %s must be an object" % (uri, name))

    def chunk_uri(self, index: int) -> str:
        return "%s/%08d.jsonl" % (self.calls_uri.rstrip("/"), index // self.chunk_size)

    def job_file(self, job_id: str, name: str) -> str:
        return "%s/%s" % (self.job_uri.replace(_JOB_ID_PLACEHOLDER, job_id), name)


def load_batch_spec(storage: Storage, uri: str) -> BatchSpec:
    return BatchSpec(_read_json(storage, uri, "batch spec"), uri)


def input_call(storage: Storage, batch: BatchSpec, index: int, chunks: dict | None = None) -> dict:
    """Input ``index``'s call, ``{"args": [...], "kwargs": {...}}``: line
    ``index % chunk_size`` of its chunk. ``chunks``: the chunks read
    already, by number (a block's inputs share a chunk; it is read once)."""
    if index >= batch.inputs:
        raise RunnerError("%s=%d, but the batch has %d inputs" % (INDEX_ENV, index, batch.inputs))
    uri = batch.chunk_uri(index)
    number = index // batch.chunk_size
    lines = chunks.get(number) if chunks is not None else None
    if lines is None:
        try:
            raw = storage.read_bytes(uri)
        except (OSError, RunnerError) as err:
            raise RunnerError("cannot read the inputs %s: %s" % (uri, err)) from None
        lines = raw.decode("utf-8").splitlines()
        if chunks is not None:
            chunks.clear()  # inputs run in order: an earlier chunk is done
            chunks[number] = lines
    line = index % batch.chunk_size
    if line >= len(lines):
        raise RunnerError("the inputs %s hold %d lines; input %d is line %d" % (uri, len(lines), index, line))
    try:
        with unlimited_int_digits():
            call = json.loads(lines[line], parse_float=parse_json_float)
    except ValueError as err:
        raise RunnerError("input %d (%s line %d) is not JSON: %s" % (index, uri, line, err)) from None
    if not isinstance(call, dict) or not isinstance(call.get("args", []), list) \
            or not isinstance(call.get("kwargs", {}), dict):
        raise RunnerError("input %d (%s line %d) must be an object with 'args' (a list) and 'kwargs' (an object)"
                          % (index, uri, line))
    return call


def child_documents(batch: BatchSpec, index: int, attempt: int, call: dict) -> tuple:
    """``(job_id, spec, record)``: the child job that runs input ``index``'s
    attempt ``attempt`` (its ``spec.json`` and ``handle.json`` documents).
    The child is run once (a failed run is the next attempt's child), so
    its spec claims no attempt number: ``attempt_offset`` carries the
    earlier runs, and ``KINETIC_ATTEMPT`` is ``attempt``."""
    job_id = child_job_id(batch.group_id, index, attempt)
    spec = copy.deepcopy(batch.child)
    spec.update({
        "protocol": PROTOCOL,
        "job_id": job_id,
        "args": call.get("args", []),
        "kwargs": call.get("kwargs", {}),
        "result_uri": batch.job_file(job_id, "result.json"),
        "worker_result_uris": [],
        "log_uris": [batch.job_file(job_id, "logs/host-0")],
        "attempt_offset": attempt - 1,
    })
    spec.pop("starts_uri", None)
    record = _with_job_id(batch.record, job_id)
    record.update({"job_id": job_id, "group_id": batch.group_id, "group_index": index})
    return job_id, spec, record


def _with_job_id(value, job_id: str):
    """A copy of ``value`` with the placeholder ``{job_id}`` in each string
    replaced by ``job_id`` (the record template names the child's
    Kubernetes name and display name that way)."""
    if isinstance(value, str):
        return value.replace(_JOB_ID_PLACEHOLDER, job_id)
    if isinstance(value, list):
        return [_with_job_id(v, job_id) for v in value]
    if isinstance(value, dict):
        return {k: _with_job_id(v, job_id) for k, v in value.items()}
    return value


def prepare_child(storage: Storage, batch_spec_uri: str, environ, batch=None) -> dict:
    """Index mode's start: the child spec this pod runs, once its
    ``handle.json`` and ``spec.json`` are in the store (the record first:
    a reader that finds the spec finds the record). ``batch``: the batch
    spec at ``batch_spec_uri``, when it was read already."""
    if batch is None:
        batch = load_batch_spec(storage, batch_spec_uri)
    index, attempt = batch_position(environ)
    call = input_call(storage, batch, index)
    job_id, spec = write_child(storage, batch, index, attempt, call)
    # The pod's JOB_ID is the batch's template; the job is the child.
    environ["JOB_ID"] = job_id
    return spec


def write_child(storage: Storage, batch: BatchSpec, index: int, attempt: int, call: dict) -> tuple:
    """``(job_id, spec)`` of input ``index``'s attempt ``attempt``, once its
    ``handle.json`` and ``spec.json`` are in the store (the record first:
    a reader that finds the spec finds the record)."""
    job_id, spec, record = child_documents(batch, index, attempt, call)
    for name, doc in (("handle.json", record), ("spec.json", spec)):
        uri = batch.job_file(job_id, name)
        try:
            storage.write_bytes(uri, json.dumps(doc, sort_keys=True).encode("utf-8"))
        except OSError as err:
            raise RunnerError("cannot write child %s's %s to %s: %s" % (job_id, name, uri, err)) from None
    return job_id, spec
