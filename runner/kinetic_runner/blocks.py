"""Block mode: an index of an Indexed Job that runs a block of inputs of a
batch (the batch spec's ``block_size`` above 1), one after the other, in
one pod; and the runner's command-line entry, which picks it.

The pod starts once: it runs the phases every input shares (download,
verify, install, extract, the environment check, the import of the
function) once, in this process (``PoolWorker``), then each input's
attempt in a fork of it that runs only that input's own phases. Each
attempt is its input's child job, as in index mode (``write_child``): its
``handle.json`` and ``spec.json``, its result and log chunks under the
child's id, ``KINETIC_ATTEMPT`` its attempt. An attempt that failed (the
function raised, or the fork ended: ``os._exit``, a signal, the OOM
killer) is run again in a new fork while the batch's ``retries`` allows;
the other inputs never notice.

What each input did, the pod tells the store with one empty object per
attempt started and per attempt ended, in its block's folder
(``{blocks_uri}/{block:08}/{input:08}.{attempt:03}.{start|exit-CODE}.{unix_ms}.{pod}``,
the names ``kinetic_core::batch::BlockMarker`` reads): one listing gives
the client every input's state. A pod that starts again (Kubernetes
replaced one that died) reads them first: it skips the inputs that ended,
and counts the attempt its predecessor was running as lost.

A stop marker (``stop_uri``) ends the block before its next input: the
client writes it to stop starting inputs (fail-fast), and with
``fail_fast`` in the batch spec the pod writes it itself when an input
failed for good, so that no pod starts another."""

from __future__ import annotations

import os
import signal
import sys
import time

from .protocol import EXIT_BAD_INVOCATION, EXIT_OK, RunnerError, STARTUP, flush_streams, log
from .gcs import Storage
from .attempts import POD_NAME_ENV
from .indexed import INDEX_ENV, batch_position, input_call, load_batch_spec, write_child
from .main import main, parse_args
from .worker import PoolWorker


# The longest a block's pod goes without reading the stop marker before
# an input: an input that starts within it after the stop is one more
# that runs (its block's own fail-fast stop is at once).
STOP_READ_EVERY = 0.2


def marker_name(index: int, attempt: int, what: str, at_ms: int, pod: str) -> str:
    """A marker's name (``what``: ``start`` or ``exit-CODE``)."""
    return "%08d.%03d.%s.%d.%s" % (index, attempt, what, at_ms, pod)


def parse_marker(name: str):
    """``(index, attempt, exit code or None for a start)`` of a marker's
    name; None for any other name."""
    parts = name.split(".", 4)
    if len(parts) != 5 or len(parts[0]) != 8 or len(parts[1]) != 3:
        return None
    if not (parts[0].isdigit() and parts[1].isdigit() and parts[3].isdigit()) or int(parts[1]) < 1:
        return None
    if parts[2] == "start":
        code = None
    elif parts[2].startswith("exit-") and parts[2][5:].lstrip("-").isdigit():
        code = int(parts[2][5:])
    else:
        return None
    return int(parts[0]), int(parts[1]), code


def read_markers(storage: Storage, folder: str) -> dict:
    """``{input: {attempt: exit code, or None when it started and did not
    end}}`` from the markers in ``folder``."""
    seen = {}
    for uri in storage.list_names(folder.rstrip("/") + "/"):
        parsed = parse_marker(uri.rsplit("/", 1)[-1])
        if parsed is None:
            continue
        index, attempt, code = parsed
        tries = seen.setdefault(index, {})
        if code is not None or attempt not in tries:
            tries[attempt] = code
    return seen


def next_attempt(tries: dict, retries: int):
    """The attempt an input runs next after ``tries`` (``read_markers``'
    entry of it), or None when it ended for good: it succeeded, failed on
    the runner's bad invocation, or spent its retries. An attempt started
    and not ended was lost with its pod: a failure."""
    if not tries:
        return 1
    last = max(tries)
    code = tries[last]
    if code == 0 or code == EXIT_BAD_INVOCATION or last > retries:
        return None
    return last + 1


def failed_for_good(tries: dict) -> bool:
    """Whether an input that runs no more (``next_attempt`` None) failed."""
    return bool(tries) and tries[max(tries)] != 0


def exit_code_of(status: int) -> int:
    """A wait status as a shell says it: the exit code, or 128 + the signal."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class Block:
    """One pod's block (see the module's notes)."""

    def __init__(self, storage: Storage, batch, environ, args) -> None:
        self.storage = storage
        self.batch = batch
        self.args = args
        self.environ = environ
        self.block, self.pod_try = batch_position(environ)
        self.first = self.block * batch.block_size
        if self.first >= batch.inputs:
            raise RunnerError("%s=%d, but the batch has %d inputs in blocks of %d (%d blocks)"
                              % (INDEX_ENV, self.block, batch.inputs, batch.block_size,
                                 -(-batch.inputs // batch.block_size)))
        self.end = min(self.first + batch.block_size, batch.inputs)
        self.folder = "%s/%08d" % (batch.blocks_uri.rstrip("/"), self.block)
        pod = environ.get(POD_NAME_ENV) or environ.get("HOSTNAME") or "pod-%d" % os.getpid()
        self.pod = pod.replace("/", "-")
        self.worker = PoolWorker(args.workdir or _temp_dir())
        self.chunks = {}
        self.child_pid = None
        self.last_stop_read = None

    def mark(self, index: int, attempt: int, what: str) -> None:
        name = marker_name(index, attempt, what, int(time.time() * 1000), self.pod)
        self.storage.write_bytes("%s/%s" % (self.folder, name), b"", "application/octet-stream")

    def stopped(self) -> bool:
        """Whether the stop marker is there, read at most every
        ``STOP_READ_EVERY`` seconds (a read per input of a block of short
        inputs cost as much as one of their writes)."""
        now = time.monotonic()
        if self.last_stop_read is not None and now - self.last_stop_read < STOP_READ_EVERY:
            return False
        self.last_stop_read = now
        try:
            self.storage.read_bytes(self.batch.stop_uri)
        except (OSError, RunnerError):
            return False
        return True

    def stop_all(self) -> None:
        """Fail-fast: the stop marker, so that no pod starts another input."""
        try:
            self.storage.write_bytes(self.batch.stop_uri, b'{"by": "%s"}' % self.pod.encode())
        except OSError as err:
            log(STARTUP, "cannot write the stop marker %s: %s" % (self.batch.stop_uri, err))

    def run(self) -> int:
        seen = read_markers(self.storage, self.folder)
        if self.pod_try > 1:
            log(STARTUP, "block %d (inputs %d to %d) again, on this pod's try %d: %d input(s) seen started"
                % (self.block, self.first, self.end - 1, self.pod_try, len(seen)))
        for index in range(self.first, self.end):
            tries = dict(seen.get(index, {}))
            attempt = next_attempt(tries, self.batch.retries)
            while attempt is not None:
                if self.stopped():
                    log(STARTUP, "the batch stops starting inputs: block %d ends before input %d" % (self.block, index))
                    return EXIT_OK
                code = self.run_attempt(index, attempt)
                tries[attempt] = code
                attempt = next_attempt(tries, self.batch.retries)
            if self.batch.fail_fast and failed_for_good(tries):
                self.stop_all()
                return EXIT_OK
        return EXIT_OK

    def run_attempt(self, index: int, attempt: int) -> int:
        """Input ``index``'s attempt ``attempt``, in a fork; its exit code."""
        call = input_call(self.storage, self.batch, index, self.chunks)
        job_id, spec = write_child(self.storage, self.batch, index, attempt, call)
        spec_uri = self.batch.job_file(job_id, "spec.json")
        argv = ["--spec", spec_uri, "--mount-root", self.args.mount_root, "--log-copy", self.args.log_copy]
        if self.args.workdir:
            argv += ["--workdir", self.args.workdir]
        prepared = self.worker.prepare_spec(parse_args(argv), spec, None)
        self.mark(index, attempt, "start")
        flush_streams()
        pid = os.fork()
        if pid == 0:
            code = 127
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.environ["JOB_ID"] = job_id
                code = main(argv, prepared, fresh=True)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - the runner reports its own failures
                code = 1
            finally:
                try:
                    flush_streams()
                finally:
                    os._exit(code)
        self.child_pid = pid
        _, status = os.waitpid(pid, 0)
        self.child_pid = None
        code = exit_code_of(status)
        if prepared is None:
            self.worker.ended(code)
        self.mark(index, attempt, "exit-%d" % code)
        return code

    def end_on_sigterm(self) -> None:
        """The pod is deleted (a cancel, a cleanup, a preemption): its
        input's fork is stopped with it, and the pod ends as SIGTERM ends
        a process (see ``exit_on_sigterm``)."""
        def end(signum, _frame):
            if self.child_pid is not None:
                try:
                    os.kill(self.child_pid, signal.SIGTERM)
                except OSError:
                    pass
            try:
                flush_streams()
            except BaseException:  # noqa: BLE001
                pass
            os._exit(128 + signum)

        signal.signal(signal.SIGTERM, end)


def _temp_dir() -> str:
    import tempfile
    return tempfile.gettempdir()


def run_block(storage: Storage, batch, args) -> int:
    """Block mode: the block of ``batch`` (a batch spec in blocks) this
    pod's index names, run to its end; the pod's exit code."""
    try:
        block = Block(storage, batch, os.environ, args)
    except RunnerError as err:
        log(STARTUP, "bad invocation: %s" % err)
        return EXIT_BAD_INVOCATION
    block.end_on_sigterm()
    try:
        return block.run()
    except RunnerError as err:
        # An input or its child's documents cannot be read or written: the
        # pod fails, and Kubernetes runs the block again (within its limit).
        log(STARTUP, "block %d: %s" % (block.block, err))
        return EXIT_BAD_INVOCATION
    finally:
        block.worker.close()


def entry(argv: list | None = None) -> int:
    """The runner's command line: block mode for a batch spec in blocks,
    else one job (``main``: index mode for a batch spec of one input per
    index, given the spec read here, so that it is read once)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--batch-spec" not in argv:
        return main(argv)  # it reads the arguments alone: its warnings are said once
    args = parse_args(argv)
    if not args.batch_spec:
        return main(argv)
    storage = Storage()
    try:
        batch = load_batch_spec(storage, args.batch_spec)
    except RunnerError as err:
        log(STARTUP, "bad invocation: %s" % err)
        return EXIT_BAD_INVOCATION
    if batch.block_size > 1:
        return run_block(storage, batch, args)
    return main(argv, batch=batch)


if __name__ == "__main__":
    sys.exit(entry())
