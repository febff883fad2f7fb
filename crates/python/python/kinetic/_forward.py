"""The port-forward process of :class:`kinetic.debug.DebugSession`.

``python -m kinetic._forward REQUEST`` (REQUEST: JSON with the job's
``record``, ``local_port``, ``working_dir`` and ``timeout``) waits until the
job's debugger listens, forwards ``localhost:local_port`` to it, and writes
one JSON line to stdout: ``{"local_port", "launch"}`` once forwarding, or
``{"error": {"type", "message"}}`` (exit code 1). It then forwards until the
job ends (exit code 0) or it is terminated.
"""

import json
import sys
import time

# How often the forward is checked for having ended (the job ended).
_CHECK_SECONDS = 0.2


def _say(doc) -> None:
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()


def main(argv) -> int:
    from kinetic.jobs import JobHandle

    try:
        request = json.loads(argv[1])
        handle = JobHandle.from_dict(request["record"])
        forward = handle._native().debug_attach(request["local_port"], working_dir=request["working_dir"],
                                                timeout=request["timeout"])
    except Exception as exc:  # noqa: BLE001 - reported to the process that started this one
        kind = type(exc).__name__ if isinstance(exc, (RuntimeError, TimeoutError, ValueError, LookupError)) \
            else "RuntimeError"
        _say({"error": {"type": kind, "message": str(exc)}})
        return 1
    _say({"local_port": forward.local_port, "launch": json.loads(forward.launch_json())})
    while forward.is_forwarding():
        time.sleep(_CHECK_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
