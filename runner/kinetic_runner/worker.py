"""A pool worker's side of the runner: the phases every input of a batch
shares, run once per worker, and each input's own run in the worker's
executor (one fork of it that runs input after input in itself).

The local backend's worker (``supervisor.py --pool``) keeps one
``PoolWorker`` for its life. Before it hands an input to its executor it
asks ``prepare`` for the input's arguments: that loads the input's
spec.json, and when the worker holds no preparation of the same
``shared_key`` runs the shared phases (download, verify, install, extract,
environment check, import of the function) in the worker itself (a new
preparation gets a new executor, forked from the worker once it holds it).
The executor then runs ``main(argv, prepared)`` for each input: only its
own phases (startup, environment, data, execute, serialize, result) on
what the worker prepared.

What a preparation leaves in the worker (modules imported, ``sys.path``
entries, the working directory, ``os.environ``) is undone when it is
dropped (another key came, or it failed), so the next preparation, or a
fork that runs every phase itself, starts from the worker's own state.
A preparation that fails is not reported by the worker: the input's fork
then runs every phase itself, as a job of its own, so it fails in the same
phase with the same error document as with ``isolation="process"``, and
the next inputs of that key run every phase themselves too until one of
them succeeds (then the worker prepares again: a failure that passed, such
as an unreachable store, poisons nothing).
"""

from __future__ import annotations

import os
import shutil
import sys

from .protocol import RunnerError, flush_streams
from .gcs import Storage
from .redaction import RedactedOutput
from .spec import load_spec
from .results import PhaseFailure
from .phases import Runner
from .main import parse_args


# The spec.json fields that differ between the inputs of one batch (and
# that no shared phase reads: the environment, which reads output_dir and
# the attempt, runs again in each input's fork). Every other field (the
# context, requirements, plan, extraction limits, entrypoint, captured
# names, cluster, python_values...) is part of the key, as are the
# runner's arguments but for the per-input directories: a field unknown
# here splits the key rather than sharing what should not be shared.
PER_INPUT_FIELDS = ("job_id", "args", "kwargs", "volumes", "result_uri", "worker_result_uris", "log_uris",
                    "starts_uri", "attempt_offset", "output_dir", "debug")


def shared_key(spec_doc: dict) -> dict:
    """What makes two inputs' shared phases the same: spec.json without
    ``PER_INPUT_FIELDS`` (compared as values: equal JSON documents give
    equal dicts, whatever the order of their keys)."""
    return {k: v for k, v in spec_doc.items() if k not in PER_INPUT_FIELDS}


class PrepareInterrupted(BaseException):
    """Raised by the worker's own signal handler in a preparation (the
    input was cancelled, or its run deadline passed): the preparation
    fails, and is not taken for the key's failure."""


class PoolWorker:
    """A worker's preparations, one at a time (see the module's notes)."""

    def __init__(self, scratch: str) -> None:
        # Where preparations make their directories (``kinetic-run-…``).
        self.scratch = scratch
        self.prepared: Runner | None = None
        self.key: dict | None = None
        self.failed_key: dict | None = None
        self.interrupted = False
        # True only while the shared phases run: the window in which the
        # worker's signal handler may raise PrepareInterrupted.
        self.armed = False
        self.modules = set(sys.modules)
        self.path = list(sys.path)
        self.cwd = os.getcwd()
        self.environ = dict(os.environ)
        # The last input's arguments and what they read (``_load``).
        self._loaded = None

    def held(self, argv: list):
        """The preparation this worker holds already for the input run with
        runner arguments ``argv`` (its spec, read here, kept for the fork),
        or None: then ``prepare``, which reads that spec no second time. The
        worker arms its timer for cancels and deadlines only around
        ``prepare``: an input of a prepared key costs no signal handler."""
        args, spec_doc = self._load(argv)
        if spec_doc is not None and self.key is not None and shared_key(spec_doc) == self.key:
            self._loaded = None
            self.prepared.next_spec = (args.spec, spec_doc)
            return self.prepared
        return None

    def peek(self, argv: list) -> None:
        """Read ahead the spec of an input the worker may run next (with
        runner arguments ``argv``), while its executor runs the one before:
        ``held`` or ``prepare`` for the same arguments then reads it no
        second time (one it cannot read is read again then). Nothing is
        prepared here."""
        if self._load(argv)[1] is None:
            self._loaded = None

    def _load(self, argv: list) -> tuple:
        """``(args, spec document)`` for runner arguments ``argv`` (the
        document None when it cannot be read here), remembered for the next
        call with the same ``argv``."""
        if self._loaded is not None and self._loaded[0] == argv:
            return self._loaded[1]
        args = None
        try:
            args = parse_args(argv)
            spec_doc = load_spec(Storage(), args.spec) if args.spec else None
        except (RunnerError, SystemExit):
            spec_doc = None
        self._loaded = (list(argv), (args, spec_doc))
        return args, spec_doc

    def prepare(self, argv: list, log_path: str):
        """The preparation the input run with runner arguments ``argv``
        shares, made now if needed; None when its fork must run every phase
        itself (the spec cannot be read here, the preparation failed, or
        failed for this key before). The preparation's output is appended
        to ``log_path`` (the input's log) when it succeeds."""
        args, spec_doc = self._load(argv)
        self._loaded = None
        if spec_doc is None:
            return None  # the fork reports it, as a job of its own would
        return self.prepare_spec(args, spec_doc, log_path)

    def prepare_spec(self, args, spec_doc: dict, log_path):
        """``prepare`` for a spec document read already (``args``: the
        runner's arguments, ``args.spec`` its URI). ``log_path`` None: the
        preparation's output goes to this process's own (a block's pod,
        whose output is the pod's log)."""
        key = shared_key(spec_doc)
        if key == self.key:
            self.prepared.next_spec = (args.spec, spec_doc)
            return self.prepared
        self.drop()
        if key == self.failed_key:
            return None
        self.interrupted = False
        runner = Runner(spec_doc, Storage(), self.scratch, args.mount_root)
        out = self._capture() if log_path is not None else None
        saved = None
        try:
            try:
                redacted = RedactedOutput(runner.redactor) if runner.redactor else None
                try:
                    self.armed = True
                    try:
                        runner.prepare()
                    finally:
                        self.armed = False
                finally:
                    flush_streams()
                    if redacted is not None:
                        redacted.close()
            finally:
                if out is not None:
                    saved = self._release(out)
        except (PhaseFailure, PrepareInterrupted):
            # Its output is the fork's to write, when it runs every phase.
            if saved is not None:
                os.close(saved)
            runner.cleanup()
            self.restore()
            if not self.interrupted:
                self.failed_key = key
            return None
        # The worker's own directory again: each fork goes to its job's.
        os.chdir(self.cwd)
        if saved is not None:
            with os.fdopen(saved, "rb") as captured:
                captured.seek(0)
                try:
                    with open(log_path, "ab") as log_file:
                        shutil.copyfileobj(captured, log_file)
                except OSError:
                    pass  # the job's log cannot be written: its fork meets that too
        self.prepared, self.key, self.failed_key = runner, key, None
        runner.next_spec = (args.spec, spec_doc)
        # What the preparation made lives as long as the worker: out of the
        # collector's reach, a fork's collections never write (and so copy)
        # the pages it shares with the worker.
        import gc
        gc.freeze()
        return runner

    def interrupt(self) -> None:
        """Stops the shared phases running now (from a signal handler,
        while ``armed``): the input was cancelled or ran out of time, which
        says nothing of the key."""
        self.interrupted = True
        raise PrepareInterrupted()

    def ended(self, code: int) -> None:
        """An input's fork that ran every phase itself ended with ``code``:
        a success clears its key's failure, so the next input prepares
        again."""
        if code == 0 and self.failed_key is not None and self.prepared is None:
            self.failed_key = None

    def drop(self) -> None:
        """Forget the preparation: its directory removed, the worker's
        modules, ``sys.path``, working directory and environment as they
        were before it."""
        if self.prepared is None:
            return
        self.prepared.cleanup()
        self.prepared, self.key = None, None
        self.restore()
        import gc
        gc.unfreeze()

    def close(self) -> None:
        """The worker leaves: the preparation's directory removed."""
        if self.prepared is not None:
            self.prepared.cleanup()
            self.prepared = None

    def restore(self) -> None:
        import importlib
        for name in [n for n in sys.modules if n not in self.modules]:
            del sys.modules[name]
        sys.path[:] = self.path
        sys.path_importer_cache.clear()
        importlib.invalidate_caches()
        try:
            os.chdir(self.cwd)
        except OSError:
            pass
        for name in [n for n in os.environ if n not in self.environ]:
            del os.environ[name]
        os.environ.update(self.environ)

    def _capture(self) -> tuple:
        """Points fds 1 and 2 at a new unnamed file; what they were."""
        import tempfile
        flush_streams()
        saved = (os.dup(1), os.dup(2))
        fd, path = tempfile.mkstemp(prefix=".prepare-", dir=self.scratch)
        os.unlink(path)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        return saved + (fd,)

    @staticmethod
    def _release(out: tuple) -> int:
        """Fds 1 and 2 back as they were; the file they wrote (its fd)."""
        flush_streams()
        os.dup2(out[0], 1)
        os.dup2(out[1], 2)
        os.close(out[0])
        os.close(out[1])
        return out[2]
