"""Entry point: the command line and the process around one run."""

from __future__ import annotations

import os
import sys
import threading

from .protocol import EXECUTE, EXIT_BAD_INVOCATION, RunnerError, STARTUP, UPLOAD, flush_streams, log, warn
from .gcs import Storage
from .redaction import RedactedOutput
from .logs import start_log_upload
from .spec import load_spec
from .phases import Runner
from .indexed import prepare_child


# The runner's options, once for both readers below: (flag, default,
# accepted values or None, help). The attribute is the flag without its
# dashes, `-` as `_`.
RUNNER_OPTIONS = (
    ("--spec", None, None, "spec.json URI: gs://, file:// or an absolute path"),
    ("--batch-spec", None, None,
     "index mode: a batch spec URI; runs input JOB_COMPLETION_INDEX of the batch as its child job"),
    ("--workdir", None, None, "where to make the temporary directory (default: system temp)"),
    ("--mount-root", "/", None, "directory volume mount paths are placed under (default /)"),
    ("--log-copy", "on", ("on", "off"),
     "copy the output to spec.json's log_uris while running (default on; off when the "
     "backend keeps the output and copies it itself)"),
)


def _option_name(flag: str) -> str:
    return flag[2:].replace("-", "_")


def parse_args(argv: list):
    # What the backends pass (each option followed by its value) is read
    # here; anything else goes through argparse, for its errors and help.
    options = {flag: (default, choices) for flag, default, choices, _ in RUNNER_OPTIONS}
    if len(argv) % 2 == 0 and all(
            argv[i] in options and not argv[i + 1].startswith("-") for i in range(0, len(argv), 2)):
        args = {_option_name(flag): default for flag, (default, _) in options.items()}
        for i in range(0, len(argv), 2):
            args[_option_name(argv[i])] = argv[i + 1]
        if all(choices is None or args[_option_name(flag)] in choices
               for flag, (_, choices) in options.items()):
            import types
            return types.SimpleNamespace(**args)
    import argparse

    class _ArgumentParser(argparse.ArgumentParser):
        def error(self, message):
            log(STARTUP, "bad invocation: %s" % message)
            sys.exit(EXIT_BAD_INVOCATION)

    parser = _ArgumentParser(prog="kinetic_runner.py", allow_abbrev=False,
                             description="Runs one Kinetic job (runner protocol v1).")
    for flag, default, choices, text in RUNNER_OPTIONS:
        parser.add_argument(flag, default=default, choices=choices, help=text)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        log(STARTUP, "ignoring unknown arguments: %s" % " ".join(unknown))
    return args


def live_non_daemon_threads() -> list:
    main = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main and not t.daemon and t.is_alive()]


def exit_on_sigterm() -> None:
    """Ends the runner on SIGTERM as the signal's default action would.

    In a pod the runner is its container's PID 1, to which the kernel
    delivers no signal it has no handler for: without one, the SIGTERM of
    the pod's deletion (cancel, cleanup, a Spot preemption, an eviction)
    is dropped and the pod holds its whole grace period until SIGKILL. The
    handler ends the process at once, as SIGTERM does a process that is not
    PID 1 (exit code 128 + 15, no result written: the job did not end)."""
    import signal

    def end(signum, _frame):
        try:
            flush_streams()
        except BaseException:  # noqa: BLE001 - a write it interrupted; end anyway
            pass
        os._exit(128 + signum)

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, end)


def main(argv: list | None = None, prepared=None, fresh: bool = False, batch=None) -> int:
    """One job. ``prepared``: what a pool worker prepared for the inputs
    of a spec like this one (``PoolWorker.prepare``), run on by this fork.
    ``fresh``: the job was made just now and is run once (a block's
    attempt): it has no log chunks yet. ``batch``: the batch spec
    ``--batch-spec`` names, read already (``entry``)."""
    exit_on_sigterm()
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if not args.spec and not args.batch_spec:
        log(STARTUP, "bad invocation: --spec URI (or --batch-spec URI in an Indexed Job) is required")
        return EXIT_BAD_INVOCATION
    storage = Storage()
    try:
        if args.batch_spec:
            spec_doc = prepare_child(storage, args.batch_spec, os.environ, batch)
        elif prepared is not None and prepared.next_spec is not None and prepared.next_spec[0] == args.spec:
            spec_doc = prepared.next_spec[1]  # the worker read it for this fork
        else:
            spec_doc = load_spec(storage, args.spec)
    except RunnerError as err:
        log(STARTUP, "bad invocation: %s" % err)
        return EXIT_BAD_INVOCATION
    start_cwd = os.getcwd()
    runner = Runner(spec_doc, storage, args.workdir, args.mount_root)
    uploader = start_log_upload(spec_doc, storage, os.environ, fresh) if args.log_copy == "on" else None
    output = RedactedOutput(runner.redactor, uploader) if runner.redactor or uploader else None
    try:
        try:
            code = runner.run(prepared)
        finally:
            flush_streams()
            try:
                os.chdir(start_cwd)
            except OSError:
                pass
            runner.cleanup()
        threads = live_non_daemon_threads()
        if threads:
            warn(EXECUTE, "non-daemon threads still running: %s; exiting without waiting for them"
                 % ", ".join(repr(t.name) for t in threads))
            flush_streams()
            if output is not None:
                output.close()
                output = None
            finish_log_upload(uploader)
            os._exit(code)
        return code
    finally:
        if output is not None:
            output.close()
        finish_log_upload(uploader)


def finish_log_upload(uploader) -> None:
    """Copies the rest of the output as the last chunk (once)."""
    if uploader is not None and not uploader.closing:
        if not uploader.close():
            log(UPLOAD, "the end of the job's output could not be copied to %s" % uploader.prefix)

