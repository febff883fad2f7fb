"""Which attempt a run is (claimed in the store) and which host of the slice
it is (from the environment)."""

from __future__ import annotations

import json
import os
import re
import time

from .protocol import NotFound, RunnerError
from .gcs import Storage


# Every attempt of a Kubernetes Job runs the same pod template and a pod
# cannot ask the API server about its Job, so a run learns which attempt it
# is from the store: it claims the next number under spec.starts_uri
# (``{job_id}/starts/{N:08}``) by creating that marker only if absent. The
# claim is what makes it race-free: of two runs that try the same number at
# once exactly one creates the marker (GCS answers the other 412), and the
# loser moves on to the next number. Counting the markers listed, or ordering
# them by creation time, would not be: two runs that list at the same moment
# see the same markers, and two markers can share a timestamp. The listing
# only says where to start trying.

ATTEMPT_ENV = "KINETIC_ATTEMPT"
POD_NAME_ENV = "KINETIC_POD_NAME"
START_MARKER_RE = re.compile(r"^([0-9]{8})$")
# More runs than any failure budget allows (100 + 100 + 1): past it the
# markers are not ours to count.
MAX_START_CLAIMS = 1000


def claim_attempt(storage: Storage, prefix: str, pod: str, token: str | None = None, clock=time.time) -> int:
    """Claims this run's attempt number under ``prefix`` (1 for the first run):
    one more than the highest marker there, or the next free one after it.
    A marker that holds this run's ``token`` is its own (an answer lost after
    the create landed, retried), and its number is this run's."""
    import uuid
    token = token or uuid.uuid4().hex
    prefix = prefix.rstrip("/")
    highest = 0
    for name in storage.list_names(prefix + "/"):
        match = START_MARKER_RE.match(name.rsplit("/", 1)[-1])
        if match:
            highest = max(highest, int(match.group(1)))
    body = json.dumps({"pod": pod, "run": token, "started": clock()}).encode("utf-8")
    for attempt in range(highest + 1, highest + 1 + MAX_START_CLAIMS):
        uri = "%s/%08d" % (prefix, attempt)
        if storage.create_bytes(uri, body):
            return attempt
        try:
            held = json.loads(storage.read_bytes(uri).decode("utf-8"))
        except (NotFound, ValueError):
            continue
        if isinstance(held, dict) and held.get("run") == token:
            return attempt
    raise RunnerError("cannot claim an attempt number under %s: %d numbers after %d are taken"
                      % (prefix, MAX_START_CLAIMS, highest))


def attempt_from_env(spec, environ):
    """The attempt number the backend set in KINETIC_ATTEMPT (the local
    supervisor counts its own runs), or None. A value the job captured from
    the client's environment (listed in spec.env_names) is not the backend's."""
    raw = environ.get(ATTEMPT_ENV)
    if raw is None or ATTEMPT_ENV in spec.env_names:
        return None
    value = raw.strip()
    if not value.isdigit() or int(value) < 1:
        raise RunnerError("%s=%r: expected a whole number from 1 (the backend sets it)" % (ATTEMPT_ENV, raw))
    return int(value)


def resolve_attempt(spec, storage: Storage, environ, host_index: int) -> tuple:
    """``(number, how)``: the backend's KINETIC_ATTEMPT, else the number this run
    claims under spec.starts_uri (host 0 only: a slice's hosts are one run),
    else 1; plus spec.attempt_offset, the runs before this job (a batch
    input's earlier attempts), so an input's retries count on as a job's do."""
    number, how = _own_attempt(spec, storage, environ, host_index)
    offset = spec.attempt_offset
    if offset:
        return offset + number, "%s, after %d earlier run(s) of this batch input" % (how, offset)
    return number, how


def _own_attempt(spec, storage: Storage, environ, host_index: int) -> tuple:
    given = attempt_from_env(spec, environ)
    if given is not None:
        return given, "set by the backend"
    if spec.starts_uri is not None and host_index == 0:
        pod = environ.get(POD_NAME_ENV) or "%s-%d" % (os.uname().nodename, os.getpid())
        return claim_attempt(storage, spec.starts_uri, pod), "claimed under %s" % spec.starts_uri
    return 1, "the job is run once" if spec.starts_uri is None else "host %d of a slice" % host_index


# --------------------------------------------------------------------------
# Host index

_HOST_INDEX_RE = re.compile(r"^[+-]?[0-9]+$")


def host_index_from_env(environ) -> tuple:
    """``(index, warnings)``: first valid of TPU_WORKER_ID, LWS_WORKER_INDEX, else 0."""
    warnings = []
    for name in ("TPU_WORKER_ID", "LWS_WORKER_INDEX"):
        raw = environ.get(name)
        if raw is None or not raw.strip():
            continue
        value = raw.strip()
        if not _HOST_INDEX_RE.match(value):
            warnings.append("ignoring %s=%r: not an integer" % (name, raw))
            continue
        index = int(value)
        if index < 0:
            warnings.append("ignoring %s=%r: negative" % (name, raw))
            continue
        return index, warnings
    return 0, warnings
