"""Debug jobs: ``spec.debug``, the debugger's address, and a worker's wait
for the leader's debugger."""

from __future__ import annotations

import time

from .protocol import NotFound, RunnerError, spec_field


def debug_settings(doc):
    """``spec.debug``: ``None``, or where the readiness marker goes, the port and the wait."""
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise RunnerError("spec.debug must be an object or null")
    ready_uri = spec_field(doc, "ready_uri", str, where="spec.debug.")
    port = spec_field(doc, "port", int, where="spec.debug.")
    wait = spec_field(doc, "wait_timeout_seconds", int, where="spec.debug.")
    leader_ready_uri = spec_field(doc, "leader_ready_uri", str, None, where="spec.debug.")
    if not 0 < port < 65536 or wait < 0:
        raise RunnerError("spec.debug.port must be a port (1-65535) and wait_timeout_seconds >= 0")
    return {"ready_uri": ready_uri, "port": port, "wait_timeout_seconds": wait, "leader_ready_uri": leader_ready_uri}


# A multi-host debug job runs its debugger on the leader (host 0) alone.
# The other hosts, told so by KINETIC_DEBUG_WAIT_LEADER=1 (the workers of a
# Pathways slice), wait before their call until the leader's debugger has a
# client, so that the user sets breakpoints before any host runs the
# function. The leader says so by writing spec.debug.leader_ready_uri
# (``{job_id}/.leader_ready``, empty) just before its call; every host
# reads the job's store prefix, so each worker polls that object. A worker
# stops waiting with a failure when the leader's result appears first (the
# leader ended without a client: no debugger attached in time, or its
# setup failed), or after the leader's wait for a client plus
# LEADER_SETUP_GRACE_SECONDS for its own setup.
WAIT_LEADER_ENV = "KINETIC_DEBUG_WAIT_LEADER"
LEADER_SETUP_GRACE_SECONDS = 60
LEADER_POLL_SECONDS = 2.0


def waits_for_leader(environ) -> bool:
    """Whether ``KINETIC_DEBUG_WAIT_LEADER`` tells this host to wait for the leader's debugger."""
    value = environ.get(WAIT_LEADER_ENV, "")
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise RunnerError("%s must be 1 (wait for the leader's debugger) or 0, got %r" % (WAIT_LEADER_ENV, value))


def object_exists(storage, uri: str) -> bool:
    try:
        storage.read_bytes(uri)
    except NotFound:
        return False
    return True


def wait_for_leader(storage, leader_ready_uri: str, leader_result_uri, bound: float,
                    poll: float = LEADER_POLL_SECONDS, clock=time.monotonic, sleep=time.sleep) -> float:
    """Wait until ``leader_ready_uri`` exists; gives the seconds waited. A RunnerError
    when the leader's result (``leader_result_uri``) appears first, or after ``bound`` seconds."""
    started = clock()
    deadline = started + bound
    while True:
        if object_exists(storage, leader_ready_uri):
            return clock() - started
        if leader_result_uri is not None and object_exists(storage, leader_result_uri):
            raise RunnerError("the leader ended before its debugger had a client (its result is at %s); "
                              "this host did not run the function" % leader_result_uri)
        now = clock()
        if now >= deadline:
            raise RunnerError("the leader's debugger had no client within %ds (the leader's wait, "
                              "spec.debug.wait_timeout_seconds, plus %ds for its setup): %s was not written; "
                              "this host did not run the function" % (bound, LEADER_SETUP_GRACE_SECONDS,
                                                                      leader_ready_uri))
        sleep(min(poll, deadline - now))


def import_debugpy():
    """debugpy, which a debug job needs in its image or requirements (it is never installed here)."""
    try:
        import debugpy  # noqa: PLC0415 - only debug jobs need it
    except ImportError as err:
        raise RunnerError(
            "this job runs under a debugger but the debugpy package cannot be imported (%s); "
            "add `debugpy` to the project's requirements (or install it in the image)" % err) from None
    return debugpy


def debug_listen_address(settings: dict, environ) -> tuple:
    """Where debugpy listens: ``KINETIC_DEBUG_HOST`` (the pod's IP) or loopback, at
    ``KINETIC_DEBUG_PORT`` when the backend set one, else the spec's port."""
    host = environ.get("KINETIC_DEBUG_HOST") or "127.0.0.1"
    port = settings["port"]
    override = environ.get("KINETIC_DEBUG_PORT")
    if override:
        try:
            port = int(override)
        except ValueError:
            raise RunnerError("KINETIC_DEBUG_PORT must be a port number, got %r" % override) from None
    return host, port
