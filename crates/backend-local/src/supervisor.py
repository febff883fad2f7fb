"""Per-job supervisor of the Kinetic local backend (standard library only).

Started by the local backend in a process group of its own, on the
interpreter the job runs on:

    python3 -u supervisor.py --job-dir DIR --slots-dir DIR --max-concurrent N \
        [--run-deadline SECONDS] [--grace SECONDS] [--retries N] [--gpus N --gpu-ids 0,1,...] \
        --runner PATH -- RUNNER_ARGS...

It records its own pid (``DIR/pid``, with its start time, so the job's
state can be read even when the process that started it died at once),
waits for one of N slots (an flock on ``slots/slot-{i}.lock``, so the
limit holds across every process that uses the same local root, and a
queued job needs no one to stay alive to start it; queued supervisors line
up on ``slots/queue.lock`` so only one of them polls), records that the job
started, and runs the runner in a forked copy of itself (the same
interpreter: no second start-up) with stdout and stderr appended to
``DIR/output.log``. The runner's code is compiled once, into
``PATH``'s name with this interpreter's cache tag (``….cpython-311.bin``),
and loaded from there by every later job. The supervisor records the
runner's exit code in ``DIR/exit_code`` (written aside, then renamed) the
moment it ends (a pidfd, not a poll), and touches ``{slots}/ended`` so
waiters watching that file learn of it at once. The job's environment is
inherited and never written anywhere.

With ``--run-deadline``, a job still running that many seconds after it
started is stopped: ``DIR/deadline_exceeded`` is written first, then the
whole process group gets SIGTERM and, once the runner ended or after
``--grace`` seconds, SIGKILL, which also ends whatever the job started in
the group and the supervisor itself (the marker says why).

With ``--gpus N``, the job first takes N whole devices of those listed in
``--gpu-ids``: an flock on ``slots/gpu-{id}.lock`` each, all or none,
holding the job's id, so no two jobs of any process sharing the root use a
device at once, and a device held by a process that died is free again.
Supervisors waiting for GPUs line up on ``slots/gpu-queue.lock`` (first
come, first served: a job wanting many is not overtaken by jobs wanting
few) and write ``DIR/waiting_gpus`` (``{"wanted": N, "ids": [...]}``) until
they hold them. GPUs are taken before the job slot, so a job holding a slot
never waits for a GPU. The runner sees only its devices:
``CUDA_VISIBLE_DEVICES`` (and ``NVIDIA_VISIBLE_DEVICES`` where it is set)
name them. The forked runner keeps the device locks open too, so a runner
that outlives a killed supervisor still holds its devices.

With ``--retries N``, a runner that exits non-zero is run again, up to N
more times (the application retry budget; see ``run_attempts``); each
attempt is a line of ``attempts.jsonl`` and ``attempt`` holds the number of
the attempt running after the first and the most attempts (``2 3``).

Files in DIR: ``queued`` (waiting for a slot), ``waiting_gpus`` (waiting
for GPUs), ``started`` (slot taken, JSON with the slot, the GPUs and time), ``exit_code`` (the runner's exit code; negative =
killed by that signal), ``cancelled`` (written by the backend before it
kills the group; the supervisor then exits without starting the job),
``deadline_exceeded`` (the run deadline passed and the group was killed).
"""

import fcntl
import functools
import os
import select
import signal
import sys
import threading
import time


def write_atomic(path, text):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def parse_args(argv):
    opts = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1:]
        if arg in ("--job-dir", "--slots-dir", "--max-concurrent", "--run-deadline", "--grace", "--runner",
                   "--retries", "--gpus", "--gpu-ids") \
                and i + 1 < len(argv):
            opts[arg] = argv[i + 1]
            i += 2
            continue
        raise SystemExit("supervisor: unexpected argument %r" % arg)
    raise SystemExit("supervisor: missing '--' before the runner's arguments")


def parse_worker_args(argv):
    """A worker's options (each flag followed by its value)."""
    opts = {}
    known = ("--pool", "--jobs-dir", "--slots-dir", "--max-concurrent", "--workers", "--grace", "--idle", "--runner")
    for i in range(0, len(argv), 2):
        if argv[i] not in known or i + 1 >= len(argv):
            raise SystemExit("supervisor: unexpected worker argument %r" % argv[i])
        opts[argv[i]] = argv[i + 1]
    for flag in ("--pool", "--jobs-dir", "--slots-dir", "--runner"):
        if flag not in opts:
            raise SystemExit("supervisor: a worker needs %s" % flag)
    return opts


def start_time(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks), or ''."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def try_slots(slots_dir, max_concurrent):
    """Take a free slot without waiting: (fd, index), or None when all are taken."""
    for i in range(max_concurrent):
        fd = os.open(os.path.join(slots_dir, "slot-%d.lock" % i), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, i
        except OSError:
            os.close(fd)
    return None


def acquire_slot(slots_dir, max_concurrent, cancelled_path):
    """Block until one of the slots is free; return (fd, slot index) or None if cancelled.

    Queued supervisors line up on one lock (``queue.lock``, a blocking flock:
    no polling while they wait); only the one at the head polls the slots,
    briefly, so a freed slot is taken within milliseconds however many jobs
    wait. A cancel kills the queued supervisor through its process group.
    """
    os.makedirs(slots_dir, exist_ok=True)
    slot = try_slots(slots_dir, max_concurrent)
    if slot is not None:
        return slot
    queue_fd = os.open(os.path.join(slots_dir, "queue.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(queue_fd, fcntl.LOCK_EX)
    try:
        delay = 0.001
        while True:
            if os.path.exists(cancelled_path):
                return None
            slot = try_slots(slots_dir, max_concurrent)
            if slot is not None:
                return slot
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
    finally:
        os.close(queue_fd)


def try_gpus(slots_dir, ids, wanted):
    """Take ``wanted`` of the devices ``ids`` without waiting, all or none:
    [(fd, id)], or None when fewer are free."""
    taken = []
    for gpu in ids:
        fd = os.open(os.path.join(slots_dir, "gpu-%d.lock" % gpu), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        taken.append((fd, gpu))
        if len(taken) == wanted:
            return taken
    for fd, _ in taken:
        os.close(fd)
    return None


def acquire_gpus(slots_dir, ids, wanted, job_dir, cancelled_path):
    """Block until ``wanted`` of the devices ``ids`` are this job's; return
    [(fd, id)] (held until this process and the runner exit) or None if
    cancelled.

    Waiters line up on ``gpu-queue.lock`` (a blocking flock); only the one
    at the head polls the devices. Each taken lock file names this job, so
    the status of a waiting job can say who holds the devices.
    """
    os.makedirs(slots_dir, exist_ok=True)
    waiting = None
    queue_fd = os.open(os.path.join(slots_dir, "gpu-queue.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(queue_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken = try_gpus(slots_dir, ids, wanted)
        except OSError:
            taken = None  # others wait already: after them
        if taken is None:
            waiting = os.path.join(job_dir, "waiting_gpus")
            write_atomic(waiting, '{"wanted": %d, "ids": [%s]}' % (wanted, ", ".join(str(i) for i in ids)))
            fcntl.flock(queue_fd, fcntl.LOCK_EX)
            delay = 0.001
            while taken is None:
                if os.path.exists(cancelled_path):
                    return None
                taken = try_gpus(slots_dir, ids, wanted)
                if taken is None:
                    time.sleep(delay)
                    delay = min(delay * 2, 0.02)
    finally:
        os.close(queue_fd)
    job = os.path.basename(os.path.normpath(job_dir)).encode()
    for fd, _ in taken:
        os.ftruncate(fd, 0)
        os.pwrite(fd, job + b"\n", 0)
    if waiting is not None:
        try:
            os.unlink(waiting)
        except OSError:
            pass
    return taken


def show_devices(gpus):
    """Let the runner (this process's environment, inherited by the fork)
    see only the devices ``gpus``, numbered as nvidia-smi numbers them (PCI
    bus order; CUDA's own default puts the fastest first, so on a host of
    mixed GPUs the ids would name other devices)."""
    visible = ",".join(str(gpu) for _, gpu in gpus)
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    os.environ["CUDA_VISIBLE_DEVICES"] = visible
    if "NVIDIA_VISIBLE_DEVICES" in os.environ:
        os.environ["NVIDIA_VISIBLE_DEVICES"] = visible


def load_runner(path):
    """The runner as a module, its code compiled once per interpreter
    version next to ``path`` (whose name carries the source's digest)."""
    import marshal
    from importlib.util import MAGIC_NUMBER

    cache = "%s.%s.bin" % (path[:-3] if path.endswith(".py") else path, sys.implementation.cache_tag)
    code = None
    try:
        with open(cache, "rb") as f:
            data = f.read()
        if data[:len(MAGIC_NUMBER)] == MAGIC_NUMBER:
            code = marshal.loads(data[len(MAGIC_NUMBER):])
    except (OSError, ValueError, EOFError, TypeError):
        code = None
    if code is None:
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec", dont_inherit=True)
        try:
            write_bytes_atomic(cache, MAGIC_NUMBER + marshal.dumps(code))
        except OSError:
            pass  # a read-only root: compiled again next time
    module = type(sys)("kinetic_runner")
    module.__file__ = path
    sys.modules["kinetic_runner"] = module
    exec(code, module.__dict__)
    return module


def write_bytes_atomic(path, data):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def run_runner(runner_path, argv, log_fd, module=None, prepared=None):
    """The forked child: the runner with its output in the log; never returns."""
    code = call_runner(runner_path, argv, log_fd, module, prepared)
    # What an interpreter's exit would run, without its slow teardown.
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    flush_std()
    os._exit(code)


def call_runner(runner_path, argv, log_fd, module=None, prepared=None):
    """The runner's ``main`` in this process with fds 1 and 2 on ``log_fd``
    (closed here) and SIGTERM's default action: its exit code, 0 to 255
    (an uncaught exception's traceback printed to the log, as an
    interpreter would)."""
    code = 1
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.argv = [runner_path] + argv
        if prepared is not None:
            code = module.main(argv, prepared)
        else:
            code = (module or load_runner(runner_path)).main(argv)
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # noqa: BLE001 - reported like an uncaught exception
        import traceback
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write("%s\n" % (code,))
        code = 1
    flush_std()
    return code & 0xFF


def flush_std():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


class ChildWaiter:
    """Waits for the forked runner to end: on a pidfd where the kernel has
    them (woken the moment it ends), else by polling ``waitpid``."""

    def __init__(self, pid):
        self.pid = pid
        self.code = None
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def wait(self, timeout=None, also=None):
        """The exit code (negative: killed by that signal), or None when
        ``timeout`` seconds passed first, or at once when the descriptor
        ``also`` is readable (a worker's stop request, ``STOP_REQUESTS``)."""
        end = None if timeout is None else time.monotonic() + timeout
        delay = 0.005
        watched = [fd for fd in (self.fd, also) if fd is not None]
        while self.code is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.code = os.waitstatus_to_exitcode(status)
                break
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return None
            if self.fd is not None:
                ready = select.select(watched, [], [], left)[0]
            else:
                pause = delay if left is None else min(delay, left)
                ready = select.select(watched, [], [], pause)[0] if watched else time.sleep(pause) or []
                delay = min(delay * 2, 0.05)
            if also is not None and also in ready:
                return None
        return self.code


def main():
    opts, runner_args = parse_args(sys.argv[1:])
    job_dir = opts["--job-dir"]
    slots_dir = opts["--slots-dir"]
    runner = opts.get("--runner")
    max_concurrent = max(1, int(opts.get("--max-concurrent", "1")))
    if not runner:
        raise SystemExit("supervisor: --runner PATH is required")
    deadline = float(opts["--run-deadline"]) if "--run-deadline" in opts else None
    grace = float(opts.get("--grace", "3"))
    cancelled = os.path.join(job_dir, "cancelled")

    # The backend writes this file too, after the spawn; written here as
    # well, it is there even when the process that started us died at once.
    pid = os.getpid()
    write_atomic(os.path.join(job_dir, "pid"), "%d %s\n" % (pid, start_time(pid)))
    write_atomic(os.path.join(job_dir, "queued"), '{"at": %r}' % time.time())
    gpus = []
    if "--gpus" in opts:
        ids = [int(gpu) for gpu in opts.get("--gpu-ids", "").split(",") if gpu]
        wanted = int(opts["--gpus"])
        if wanted > len(ids):
            # The backend refuses such a job; were one started, it would
            # wait forever.
            with open(os.path.join(job_dir, "output.log"), "ab", buffering=0) as log:
                log.write(("[kinetic] the job needs %d GPUs and this host has %d\n" % (wanted, len(ids))).encode())
            write_atomic(os.path.join(job_dir, "exit_code"), "1\n")
            touch_ended(slots_dir)
            return 0
        gpus = acquire_gpus(slots_dir, ids, wanted, job_dir, cancelled)
        if gpus is None:
            return 0
        show_devices(gpus)
    slot = acquire_slot(slots_dir, max_concurrent, cancelled)
    if slot is None:
        return 0
    _fd, index = slot  # held until this process exits
    write_atomic(os.path.join(job_dir, "started"), '{"slot": %d, "gpus": [%s], "at": %r}'
                 % (index, ", ".join(str(gpu) for _, gpu in gpus), time.time()))
    touch_ended(slots_dir)

    retries = int(opts.get("--retries", "0"))
    code = run_attempts(job_dir, slots_dir, runner, runner_args, _fd, deadline, grace, retries)
    if code is None:
        return 0
    # The slot and the GPUs are free once the runner ended; the next job
    # may take them while this one's end is recorded.
    os.close(_fd)
    for fd, _ in gpus:
        os.close(fd)
    write_atomic(os.path.join(job_dir, "exit_code"), "%d\n" % code)
    touch_ended(slots_dir)
    return 0


def run_attempts(job_dir, slots_dir, runner, runner_args, slot_fd, deadline, grace, retries, pooled=None,
                 started=None, later=None):
    """Run the runner, and again after each failure while the application
    retry budget (``retries``) allows: attempt N sees ``KINETIC_ATTEMPT=N``,
    and each attempt's pid, start, end and exit code is a line of
    ``DIR/attempts.jsonl``. The run deadline counts from the first start.
    Returns the last attempt's exit code (None: the runner could not be
    started, already recorded). ``started``: when the run began, if
    before now (a worker's preparation of the shared phases). ``later``
    (a worker's list of what it writes once its next input is handed
    over, ``AFTER_SEND``): an attempt that succeeded on the worker's
    executor is recorded there."""
    if started is None:
        started = time.monotonic()
    attempts = retries + 1
    for attempt in range(1, attempts + 1):
        left = None if deadline is None else max(0.0, deadline - (time.monotonic() - started))
        began = time.time()
        child, code = run_once(job_dir, slots_dir, runner, runner_args, slot_fd, left, deadline, grace, attempt,
                               pooled)
        if child is None:
            return None
        if code == 0 and later is not None:
            later.append(functools.partial(record_attempt, job_dir, attempt, child, began, code, time.time()))
            return code
        record_attempt(job_dir, attempt, child, began, code)
        stopped = any(os.path.exists(os.path.join(job_dir, f)) for f in ("cancelled", "deadline_exceeded"))
        if code == 0 or attempt == attempts or stopped:
            return code
        with open(os.path.join(job_dir, "output.log"), "ab", buffering=0) as log:
            log.write(("[kinetic] attempt %d failed (exit code %d): retrying (attempt %d of %d)\n"
                       % (attempt, code, attempt + 1, attempts)).encode())
        write_atomic(os.path.join(job_dir, "attempt"), "%d %d\n" % (attempt + 1, attempts))
        touch_ended(slots_dir)
    return code


def record_attempt(job_dir, attempt, pid, began, code, ended=None):
    """Append one attempt's line to ``DIR/attempts.jsonl`` (``ended``: when
    it ended, if not now)."""
    import json
    line = json.dumps({"number": attempt, "pid": pid, "started": began,
                       "ended": time.time() if ended is None else ended, "exit_code": code})
    fd = os.open(os.path.join(job_dir, "attempts.jsonl"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def run_once(job_dir, slots_dir, runner, runner_args, slot_fd, left, deadline, grace, attempt, pooled=None):
    """One attempt: the runner in a forked child, waited for (at most
    ``left`` seconds, then stopped for the run ``deadline``). Returns
    (pid, exit code), or (None, None) when it could not be forked (or, a
    worker's, was cancelled before it started).

    ``pooled`` (a worker's attempt: ``(runner module, job id, prepared)``): the
    child leads a process group of its own (the job's, which a cancel
    kills; the worker is not in it), runs the loaded runner module, and
    starts only once its pid and start are recorded in ``DIR/pid`` and
    ``DIR/started``."""
    if pooled is not None and pooled[2] is not None:
        return run_on_executor(job_dir, slots_dir, runner, runner_args, slot_fd, left, deadline, grace, attempt,
                               pooled)
    log_fd = os.open(os.path.join(job_dir, "output.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    gate = os.pipe() if pooled is not None else None
    try:
        child = os.fork()
    except OSError as exc:
        os.close(log_fd)
        if gate is not None:
            os.close(gate[0])
            os.close(gate[1])
        return fail_to_start(job_dir, slots_dir, exc)
    if child == 0:
        if slot_fd is not None:
            os.close(slot_fd)
        os.environ["KINETIC_ATTEMPT"] = str(attempt)
        if pooled is not None:
            # Whatever happens here, this fork never returns into the
            # worker's loop (it would run as a second worker).
            try:
                # The worker's SIGTERM handler is not this fork's: a cancel
                # before the gate opens ends it.
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGUSR1, signal.SIG_DFL)
                os.setpgid(0, 0)
                for fd in WORKER_FDS:
                    os.close(fd)
                os.chdir(job_dir)
                os.close(gate[1])
                os.read(gate[0], 1)  # the worker recorded this process
                os.close(gate[0])
                module, job_id, prepared = pooled
                os.environ["JOB_ID"] = job_id
            except BaseException as exc:  # noqa: BLE001
                os.write(log_fd, ("[kinetic] could not start the runner: %s\n" % exc).encode())
                os._exit(127)
            run_runner(runner, runner_args, log_fd, module, prepared)
        run_runner(runner, runner_args, log_fd)
    os.close(log_fd)
    if pooled is not None:
        try:
            os.setpgid(child, child)
        except OSError:
            pass  # the child did it first
        os.close(gate[0])
        write_atomic(os.path.join(job_dir, "pid"), "%d %s\n" % (child, start_time(child)))
        if os.path.exists(os.path.join(job_dir, "cancelled")):
            # Cancelled after the worker took it: the canceller writes
            # `cancelled` then reads `pid`, this wrote `pid` then read
            # `cancelled`, so one of the two saw the other. The fork never
            # runs the job (it may have the canceller's SIGTERM already),
            # and no attempt is recorded: as a job cancelled in the queue.
            os.kill(child, signal.SIGKILL)  # not reaped yet: still ours
            os.close(gate[1])
            ChildWaiter(child).wait()
            touch_ended(slots_dir)
            return None, None
        write_atomic(os.path.join(job_dir, "started"), '{"worker": %d, "at": %r}' % (os.getpid(), time.time()))
        touch_ended(slots_dir)
        os.close(gate[1])
        waiter = ChildWaiter(child)
        return child, wait_pooled(job_dir, slots_dir, waiter, left, deadline, grace, child)
    waiter = ChildWaiter(child)

    # A cancel signals the whole group; the child gets it too. Keep the
    # supervisor alive long enough to record how the child ended. A job
    # that outlives its grace period after a SIGTERM is killed here, as a
    # kubelet kills a pod: whoever cancelled may have stopped waiting (a
    # cancel or cleanup waits only as long as its caller allows).
    killer = []

    def on_term(signum, _frame):
        try:
            os.kill(child, signum)
        except OSError:
            pass
        if signum == signal.SIGTERM and not killer:
            timer = threading.Timer(grace, kill_group_after_grace)
            timer.daemon = True
            timer.start()
            killer.append(timer)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    code = waiter.wait(left)
    if code is None:
        code = stop_for_deadline(job_dir, slots_dir, waiter, deadline, grace)
    return child, code


def kill_group_after_grace():
    """The grace period after a SIGTERM is over: SIGKILL the whole group (this
    process too; the cancel marker says why the job ended)."""
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    except OSError:
        pass


def stop_group(job_dir, slots_dir, waiter, grace, group):
    """A worker's job past its deadline, or cancelled: SIGTERM its group,
    SIGKILL it after ``grace``; the exit code (the worker goes on)."""
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass
    code = waiter.wait(grace)
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass
    if code is None:
        code = waiter.wait()
    return code


def touch_ended(slots_dir):
    """Tell whoever watches ``ended`` (a waiter on jobs) to look now: the
    file is opened for writing and closed, nothing written."""
    try:
        os.close(os.open(os.path.join(slots_dir, "ended"), os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError:
        pass


def stop_for_deadline(job_dir, slots_dir, waiter, deadline, grace, group=None):
    """Kill the job's process group once its run deadline passed; the
    runner's exit code when it ended within the grace period. ``group``:
    the job's own group (a worker's job), else this process's."""
    write_atomic(os.path.join(job_dir, "deadline_exceeded"), "%s\n" % deadline)
    with open(os.path.join(job_dir, "output.log"), "ab", buffering=0) as log:
        log.write(("[kinetic] the job ran longer than its run deadline (%gs): stopping it\n" % deadline).encode())
    if group is not None:
        return stop_group(job_dir, slots_dir, waiter, grace, group)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgrp()
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass
    code = waiter.wait(grace)
    if code is None:
        code = -signal.SIGKILL
    # Whatever else the job started in this group goes too (and this
    # process with it when the runner did not end: the marker says why).
    write_atomic(os.path.join(job_dir, "exit_code"), "%d\n" % code)
    touch_ended(slots_dir)
    os.killpg(group, signal.SIGKILL)
    return code


# -- worker mode --------------------------------------------------------------
#
#     python3 -u supervisor.py --pool DIR --jobs-dir DIR --slots-dir DIR \
#         --max-concurrent N --workers W [--grace SECONDS] [--idle SECONDS] --runner PATH
#
# A worker of a batch's pool (``DIR`` is ``{root}/pools/{group_id}-{env
# digest}``): one interpreter that loads the runner once and runs the jobs
# queued in ``DIR/queue`` one after the other, each in a fork of itself that
# leads the job's own process group (as a supervisor's runner does), so a
# job that kills its process (``os._exit``, a segfault, the OOM killer)
# ends alone: the worker records its exit code and takes the next job.
#
# ``DIR/queue/{index:010d}.{job_id}`` (empty) names a queued job, oldest
# input first; ``{jobs}/{job_id}/pooled`` holds what its supervisor would be
# told (the runner's arguments, ``retries``, ``run_deadline``). A worker
# claims a job by renaming its queue entry into ``DIR/claimed`` (one rename
# wins), waits for a job slot, links ``{job}/worker`` (its pid and start)
# into place (one link wins, should a resubmission have queued the job
# twice), removes the claimed entry, and runs it as a supervisor would:
# a job slot, the attempts (``KINETIC_ATTEMPT``), the deadline, ``pid``
# (the fork's), ``started``, ``attempts.jsonl``, ``exit_code``. A job
# cancelled before it was claimed is skipped.
#
# Before it forks a job, a worker runs the runner's phases that every input
# of the batch shares (download, verify, install, extract, the environment
# check, the import of the function) in itself, once for the jobs whose
# spec.json has the same shared part (the runner's ``PoolWorker``); the
# fork runs only the job's own phases on them. A preparation that fails is
# undone and the fork runs every phase itself, as a job of its own. The
# preparation's directory is under ``DIR``, removed when the worker leaves.
#
# ``DIR/wake`` is a FIFO the workers read: a submitter writes a byte to it
# after queuing a job, so an idle worker takes it at once instead of at its
# next look (every 50 ms).
#
# ``DIR/workers/{pid}-{start}`` names each live worker (the backend counts
# them to start at most W, and a queued job of a pool with no live worker
# is reported lost); ``worker-{i}.lock`` (i < W, an flock held for life)
# caps the pool at W whoever started it. A worker idle for ``--idle``
# seconds (2) leaves: it creates ``{pid}-{start}.leaving`` beside its file
# (a submitter then starts another), looks at the queue once more, and
# stays (removing that marker) if a job came in the meantime.
#
# A worker's file is created in place, never written aside and renamed,
# and never renamed while the worker lives: a reader lists ``workers/``
# while files come and go, and a listing may miss an entry renamed during
# it (and once took a worker's half-written ``….tmp-PID`` file for a dead
# worker's and removed it, which killed the worker before it ran a job:
# its queued jobs were then reported lost). A file that is there for the
# worker's whole life is in every listing.


# -- a worker's stop requests and its executor ---------------------------------
#
# A pooled job is stopped by its worker, never signalled by the backend
# itself: the process that runs an input (the worker's executor, below)
# runs the worker's next input once this one ended, so a signal meant for
# an input that has just ended would stop the next. The backend writes the
# job's ``cancelled`` and sends its worker SIGUSR1 (a stop request); the
# worker, which knows which job its process runs, looks at that job's
# ``cancelled`` and stops the process (SIGTERM to its group, SIGKILL after
# ``--grace``) only when it is there. A request meant for a job that ended
# finds no ``cancelled`` beside the job running now, and stops nothing.

# The stop requests' pipe (read end, write end), written by the SIGUSR1
# handler, so a request wakes a wait at once.
STOP_REQUESTS = []


def on_stop_request(_signum, _frame):
    try:
        os.write(STOP_REQUESTS[1], b"x")
    except OSError:
        pass  # the pipe is full: a wake-up is pending already


def listen_for_stop_requests():
    """SIGUSR1 wakes ``wait_pooled``; set before the worker takes a job
    (SIGUSR1's default action would end the worker)."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    STOP_REQUESTS[:] = [read_end, write_end]
    WORKER_FDS.extend(STOP_REQUESTS)
    signal.signal(signal.SIGUSR1, on_stop_request)


def drain(fd):
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass  # nothing more to read (EAGAIN)


def wait_pooled(job_dir, slots_dir, waiter, left, deadline, grace, group, reaper=None):
    """The exit code of a worker's job whose process (group ``group``) is
    watched by ``waiter``: waited for at most ``left`` seconds, then
    stopped for the run ``deadline``; stopped at once once the job's
    ``cancelled`` is there (looked at before the wait and at each stop
    request). ``reaper`` waits for the process itself to end (an
    executor's ``waiter`` says when its input ended)."""
    reaper = reaper or waiter
    end = None if left is None else time.monotonic() + left
    stop = STOP_REQUESTS[0] if STOP_REQUESTS else None
    cancelled = os.path.join(job_dir, "cancelled")
    while True:
        if stop is not None:
            drain(stop)  # before the look: a request after it wakes the wait
        if os.path.exists(cancelled):
            return stop_group(job_dir, slots_dir, reaper, grace, group)
        remaining = None if end is None else max(0.0, end - time.monotonic())
        code = waiter.wait(remaining, also=stop)
        if code is not None:
            return code
        if end is not None and time.monotonic() >= end:
            return stop_for_deadline(job_dir, slots_dir, reaper, deadline, grace, group=group)


class ExecutorLost(Exception):
    """The executor ended before it took the input it was sent."""


class Executor:
    """A fork of a worker, made once the worker holds a preparation of the
    shared phases, that runs input after input of that preparation in
    itself: one interpreter that imported the function once and calls it
    for each input, with no fork per input (each fork of a 24 MB worker
    cost about 2 ms of CPU in copy-on-write faults and its teardown).

    It leads a process group of its own (``pid``, which a stop kills; the
    worker is not in it). The worker sends it one line per input on a pipe
    (the job's directory, id, attempt and runner arguments); it answers
    ``S`` when it takes the input and the exit code and a newline when the
    input ended, and is back in its own state for the next: its standard
    output and error (descriptors 1 and 2 and ``sys.stdout`` and
    ``sys.stderr``; the input's ran to the job's ``output.log``), working
    directory, environment (each input has its own ``KINETIC_ATTEMPT`` and
    ``JOB_ID``), ``sys.path``, ``sys.argv`` and SIGTERM and SIGINT handlers.
    What an input leaves in the interpreter beyond those (modules it
    imported, globals it set, daemon threads) the next input on the same
    executor sees, as in any interpreter that calls a function many times;
    ``isolation="process"`` runs each input in its own.

    An input that ends the process (``os._exit``, a signal, the OOM killer,
    or the runner's own exit on non-daemon threads left running) ends as a
    fork's would: its exit code is the process's, and the worker makes a
    new executor for the next input. An executor that ended before it
    answered ``S`` never ran the input, which is sent to a new one."""

    def __init__(self, module, runner, prepared, slot_fd):
        inputs = os.pipe()
        replies = os.pipe()
        flush_std()
        pid = os.fork()
        if pid == 0:
            code = 127
            try:
                os.close(inputs[1])
                os.close(replies[0])
                code = executor_main(module, runner, prepared, inputs[0], replies[1], slot_fd)
            finally:
                os._exit(code)
        os.close(inputs[0])
        os.close(replies[1])
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass  # the child did it first
        self.pid = pid
        self.start = start_time(pid)
        self.prepared = prepared
        self.inputs = inputs[1]
        self.replies = replies[0]
        self.waiter = ChildWaiter(pid)
        self.reply = b""

    def alive(self):
        if self.waiter.code is not None:
            return False
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == self.pid:
            self.waiter.code = os.waitstatus_to_exitcode(status)
            return False
        return True

    def send(self, job_dir, job_id, attempt, args):
        """Hand it an input; False when it is gone."""
        import json
        self.reply = b""
        line = json.dumps({"dir": job_dir, "job": job_id, "attempt": attempt, "args": list(args)}).encode()
        try:
            data = memoryview(line + b"\n")
            while data:
                data = data[os.write(self.inputs, data):]
        except OSError:
            return False
        return True

    def wait(self, timeout=None, also=None):
        """The exit code of the input it was sent; None when ``timeout``
        seconds passed first or ``also`` is readable. Raises
        ``ExecutorLost`` when it ended before it took the input."""
        end = None if timeout is None else time.monotonic() + timeout
        watched = [fd for fd in (self.replies, self.waiter.fd, also) if fd is not None]
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return None
            pause = left if self.waiter.fd is not None else (0.05 if left is None else min(left, 0.05))
            ready = select.select(watched, [], [], pause)[0]
            ended = False
            if self.replies in ready:
                data = os.read(self.replies, 64)
                self.reply += data
                ended = not data
            if self.reply.startswith(b"S") and self.reply.endswith(b"\n"):
                return int(self.reply[1:])
            if ended or self.waiter.fd in ready or (self.waiter.fd is None and not self.alive()):
                code = self.waiter.wait()
                if not self.reply.startswith(b"S"):
                    raise ExecutorLost()
                return code  # it ended during the input: the input's end
            if also is not None and also in ready:
                return None

    def close(self):
        """No more inputs: it leaves when it reads the end of its pipe
        (waited for a moment, so that it is not left a zombie)."""
        for fd in (self.inputs, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.waiter.code is None:
            self.waiter.wait(1.0)


# The worker's executor, if it has one (``executor_for``).
EXECUTOR = [None]

# A worker's ``peek_next`` for its queue, once it has one.
PEEK = []


def executor_for(module, runner, prepared, slot_fd):
    """The worker's executor for ``prepared``: the one it has, unless that
    ended or runs another preparation (then it is let go), else a new one."""
    ex = EXECUTOR[0]
    if ex is not None and (ex.prepared is not prepared or not ex.alive()):
        ex.close()
        ex = EXECUTOR[0] = None
    if ex is None:
        flush_after()  # a fork takes a while: the last input's end first
        ex = EXECUTOR[0] = Executor(module, runner, prepared, slot_fd)
    return ex


def write_linked(path, name, text):
    """``path`` holding ``text``: linked from the worker's shared file
    ``name`` (``link_shared``), or, where it exists already (an earlier
    attempt's) or cannot be linked, written aside and renamed over it."""
    try:
        if LINKS:
            link_shared(name, path, text)
            return
    except OSError:
        pass
    write_atomic(path, text)


def close_executor():
    if EXECUTOR[0] is not None:
        EXECUTOR[0].close()
        EXECUTOR[0] = None


def executor_main(module, runner, prepared, inputs_fd, replies_fd, slot_fd):
    """An executor's life (see ``Executor``); its exit code."""
    import json
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    os.setpgid(0, 0)
    for fd in WORKER_FDS + ([slot_fd] if slot_fd is not None else []):
        try:
            os.close(fd)
        except OSError:
            pass
    cwd, environ, path, argv = os.getcwd(), dict(os.environ), list(sys.path), list(sys.argv)
    streams = (sys.stdout, sys.stderr)
    std = (os.dup(1), os.dup(2))
    with os.fdopen(inputs_fd, "rb") as inputs:
        for line in inputs:
            job = json.loads(line)
            os.write(replies_fd, b"S")
            log_fd = os.open(os.path.join(job["dir"], "output.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                             0o644)
            os.chdir(job["dir"])
            os.environ["KINETIC_ATTEMPT"] = str(job["attempt"])
            os.environ["JOB_ID"] = job["job"]
            code = call_runner(runner, job["args"], log_fd, module, prepared)
            # The executor's own state again, for the next input.
            sys.stdout, sys.stderr = streams
            os.dup2(std[0], 1)
            os.dup2(std[1], 2)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.chdir(cwd)
            for name in [n for n in os.environ if n not in environ]:
                del os.environ[name]
            # Only what the input changed is set again: setting every
            # variable cost a tenth of an input's time on the executor.
            for name, value in environ.items():
                if os.environ.get(name) != value:
                    os.environ[name] = value
            sys.path[:] = path
            sys.argv = list(argv)
            os.write(replies_fd, b"%d\n" % code)
    # What an interpreter's exit would run, once: the executor's end.
    try:
        import atexit
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    flush_std()
    return 0


def run_on_executor(job_dir, slots_dir, runner, runner_args, slot_fd, left, deadline, grace, attempt, pooled):
    """``run_once`` for an input of the preparation the worker holds: run
    on its executor (``Executor``) rather than in a fork of its own. The
    same files in the same order (``pid``, the executor's, then
    ``started``), the same stops."""
    module, job_id, prepared = pooled
    for _ in range(3):
        try:
            ex = executor_for(module, runner, prepared, slot_fd)
        except OSError as exc:
            return fail_to_start(job_dir, slots_dir, exc)
        write_linked(os.path.join(job_dir, "pid"), "pid-%d-%s" % (ex.pid, ex.start), "%d %s\n" % (ex.pid, ex.start))
        if os.path.exists(os.path.join(job_dir, "cancelled")):
            # As in the fork's case (see run_once): the input never runs.
            # Its exit code is written (the SIGTERM's, as the runner's end
            # on a cancel), since the process `pid` names lives on.
            flush_after()
            write_atomic(os.path.join(job_dir, "exit_code"), "%d\n" % (128 + signal.SIGTERM))
            touch_ended(slots_dir)
            return None, None
        me = os.getpid()
        write_linked(os.path.join(job_dir, "started"), "started-%d-%s" % (me, own_start_time()), '{"worker": %d}' % me)
        sent = ex.send(job_dir, job_id, attempt, runner_args)
        # The last input's end, then the `ended` touch for both, while
        # this one runs (AFTER_SEND); and the next job read ahead.
        flush_after(touch=False)
        touch_ended(slots_dir)
        if not sent:
            ex.close()
            continue
        if PEEK:
            try:
                PEEK[0]()
            except Exception:  # noqa: BLE001 - a read ahead only: the job is read again when claimed
                PEEKED[0] = None
        try:
            return ex.pid, wait_pooled(job_dir, slots_dir, ex, left, deadline, grace, ex.pid, reaper=ex.waiter)
        except ExecutorLost:
            continue
    return fail_to_start(job_dir, slots_dir, "its worker's process ended three times before it took the job")


def fail_to_start(job_dir, slots_dir, why):
    """The runner could not be started (``why``): said in the job's log,
    exit code 127 recorded. ``run_once``'s answer for it: (None, None)."""
    with open(os.path.join(job_dir, "output.log"), "ab", buffering=0) as log:
        log.write(("[kinetic] could not start the runner: %s\n" % why).encode())
    write_atomic(os.path.join(job_dir, "exit_code"), "127\n")
    touch_ended(slots_dir)
    return None, None


def worker_name(pid):
    return "%d-%s" % (pid, start_time(pid))


def create_empty(path):
    """Create the empty file ``path`` in place (no file written aside and
    renamed: see the registry's notes above); nothing if it exists."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def take_worker_lock(pool, workers, patience):
    """An flock on one of ``worker-{i}.lock`` (i < workers), waiting at most
    ``patience`` seconds for a leaving worker to free one; the fd or None."""
    end = time.monotonic() + patience
    while True:
        for i in range(workers):
            fd = os.open(os.path.join(pool, "worker-%d.lock" % i), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except OSError:
                os.close(fd)
        if time.monotonic() > end:
            return None
        time.sleep(0.01)


def open_wake(pool):
    """The pool's ``wake`` FIFO, open for reading (and writing, so it never
    reads as closed): a submitter writes one byte to it after queuing a job,
    which wakes one idle worker at once. None where FIFOs cannot be made."""
    path = os.path.join(pool, "wake")
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        return os.open(path, os.O_RDWR | os.O_NONBLOCK)
    except OSError:
        return None


def claim_next(queue):
    """Move the oldest queue entry this worker wins into ``claimed/`` beside
    the queue (one rename wins): its job id, or None. The entry stays there
    until the worker named itself in the job's ``worker`` or skipped it
    (``release_claim``), so a reader never sees a taken job named nowhere:
    the backend reads a pooled job named by no entry and no worker, whose
    submitter is dead, as never queued (and a job waits there for a job
    slot, seconds under load). The entry read ahead (``PEEKED``), the
    oldest when it was read, is tried first: the queue is listed only when
    another worker took it."""
    peeked = PEEKED[0]
    claimed = os.path.join(os.path.dirname(queue), "claimed")
    name = take_entry(queue, claimed, [peeked[0]]) if peeked is not None else None
    if name is None:
        try:
            name = take_entry(queue, claimed, queue_entries(queue))
        except OSError:
            return None
    if name is None:
        PEEKED[0] = None  # taken by another worker: an idle loop tries it no more
        return None
    CLAIMED[0] = name
    return entry_job(name)


# The queue entry the worker claimed last (``claim_next``).
CLAIMED = [None]


def queue_entries(queue):
    """The queue's entries, oldest input first (``{index:010}.{job_id}``;
    a name starting with a dot is being written). Raises OSError when the
    queue cannot be listed."""
    return sorted(n for n in os.listdir(queue) if not n.startswith("."))


def entry_job(name):
    """The job id a queue entry names."""
    return name.split(".", 1)[1] if "." in name else name


def read_launch(job_dir):
    """The job's ``pooled`` (the pool and the runner's arguments, retries
    and run deadline). Raises OSError or ValueError when it cannot be read."""
    import json
    with open(os.path.join(job_dir, "pooled"), "rb") as f:
        return json.loads(f.read())


def take_entry(queue, claimed, names):
    """The first of the queue entries ``names`` this worker moves into
    ``claimed``, or None."""
    for name in names:
        try:
            try:
                os.rename(os.path.join(queue, name), os.path.join(claimed, name))
            except FileNotFoundError:
                os.makedirs(claimed, exist_ok=True)  # the pool's first claim
                os.rename(os.path.join(queue, name), os.path.join(claimed, name))
        except OSError:
            continue  # another worker took it
        return name
    return None


def release_claim(queue, job_id):
    """Remove job ``job_id``'s entry from ``claimed/`` (``claim_next``)."""
    claimed = os.path.join(os.path.dirname(queue), "claimed")
    name = CLAIMED[0]
    if name is not None and name.endswith("." + job_id):
        try:
            os.unlink(os.path.join(claimed, name))
            return
        except OSError:
            pass  # looked for below
    try:
        names = os.listdir(claimed)
    except OSError:
        return
    for name in names:
        if name.endswith("." + job_id):
            try:
                os.unlink(os.path.join(claimed, name))
            except OSError:
                pass


# What a worker writes of the input that just ended on its executor once
# it handed the executor its next input (``flush_after``): that input's
# attempt, its exit code and the ``ended`` touch, which cost the input
# after it a millisecond of waiting when written between the two. Until
# they are written, the input reads as running (its executor lives, its
# worker too), never as gone; a cancel of it waits for its exit code.
AFTER_SEND = []

# The `slots/ended` to touch once ``AFTER_SEND`` is written, if any.
AFTER_TOUCH = [None]

# The next queue entry as a worker read it ahead while its executor ran an
# input (``peek_next``): (entry name, job id, its ``pooled``), or None.
PEEKED = [None]


def flush_after(touch=True):
    """Write what ``AFTER_SEND`` holds (see there), in order, then touch
    ``ended`` for it unless ``touch`` is false (the caller touches it)."""
    while AFTER_SEND:
        write = AFTER_SEND.pop(0)
        try:
            write()
        except Exception as exc:  # noqa: BLE001 - e.g. its job's directory removed by a cleanup
            sys.stderr.write("worker: writing an input's end: %s\n" % exc)
    slots_dir, AFTER_TOUCH[0] = AFTER_TOUCH[0], None
    if touch and slots_dir is not None:
        touch_ended(slots_dir)


def record_exit(job_dir, slots_dir, code, touch=True):
    """The job's exit code (unless its deadline's stop wrote one), then the
    ``ended`` touch that tells waiters to look (unless ``touch`` is
    false: ``AFTER_TOUCH``)."""
    exit_code = os.path.join(job_dir, "exit_code")
    if not os.path.exists(exit_code):
        try:
            link_shared("exit-%d" % code, exit_code, "%d\n" % code)
        except FileExistsError:
            pass  # written by its deadline's stop
        except OSError:
            write_atomic(exit_code, "%d\n" % code)
    if touch:
        touch_ended(slots_dir)
    else:
        AFTER_TOUCH[0] = slots_dir


def peek_next(queue, jobs_dir, shared):
    """While the executor runs an input: read what the worker will need of
    the oldest queued job (its ``pooled``, and its spec through
    ``PoolWorker.peek``), without claiming it: another worker may still
    take it. What the worker then claims is used as read here when it is
    that job; ``pooled`` and a spec never change once the job is queued."""
    PEEKED[0] = None
    try:
        names = queue_entries(queue)
    except OSError:
        return
    if not names:
        return
    job_id = entry_job(names[0])
    try:
        launch = read_launch(os.path.join(jobs_dir, job_id))
        args = list(launch["args"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    PEEKED[0] = (names[0], job_id, launch)
    peek = getattr(shared, "peek", None)
    if peek is not None:
        try:
            peek(args)
        except Exception:  # noqa: BLE001 - read again, and reported, when the job runs
            pass


def take_launch(job_dir, job_id, slots_dir, peeked):
    """Name this worker in the claimed job's ``worker`` and give its
    ``pooled`` (as read ahead, ``peeked``, when it is that job); None when
    the job is skipped: cancelled before it started, ended already or
    taken by another worker (queued twice by a resubmission), or naming
    no launch."""
    if os.path.exists(os.path.join(job_dir, "cancelled")):
        touch_ended(slots_dir)
        return None
    if os.path.exists(os.path.join(job_dir, "exit_code")):
        return None  # queued twice (a resubmission), and ended already
    if peeked is not None and peeked[1] == job_id:
        launch = peeked[2]
    else:
        try:
            launch = read_launch(job_dir)
        except (OSError, ValueError):
            return None
    if not take_job(job_dir):
        return None  # queued twice (a resubmission), and claimed already
    return launch


def run_pooled_job(job_dir, job_id, module, runner, opts, slots_dir, slot_fd, grace, shared=None,
                   claimed=lambda: None):
    """One claimed job, as its own supervisor would run it; False when it
    was skipped (cancelled before it started, or it names no launch).
    ``shared`` (the runner's ``PoolWorker``): the phases every input of the
    batch shares are prepared in this worker first (see
    ``prepare_shared``), and each attempt's fork runs only its own. An
    input that succeeded on the executor has its end written once the
    next input is handed over (``AFTER_SEND``)."""
    peeked, PEEKED[0] = PEEKED[0], None
    try:
        launch = take_launch(job_dir, job_id, slots_dir, peeked)
    finally:
        claimed()  # named in `worker`, or skipped: the claim's entry goes
    if launch is None:
        flush_after()  # nothing handed over: the input before ends now
        return False
    test_hold(job_dir, job_id)
    deadline = launch.get("run_deadline")
    retries = int(launch.get("retries") or 0)
    args = list(launch["args"])
    started = time.monotonic()
    prepared = prepare_shared(shared, job_dir, args, deadline, started) if shared is not None else None
    if prepared is None:
        flush_after()
        # A fork that runs every phase itself makes its run directory under
        # --workdir, which the submitter no longer makes for a pooled job
        # (one on the worker's preparation makes only what it writes to).
        make_run_dirs(args)
    later = AFTER_SEND if prepared is not None else None
    code = run_attempts(job_dir, slots_dir, runner, args, slot_fd, deadline, grace, retries,
                        pooled=(module, job_id, prepared), started=started, later=later)
    if code is None:
        flush_after()
        return True
    if prepared is None and shared is not None:
        shared.ended(code)
    if code == 0 and later is not None:
        later.append(functools.partial(record_exit, job_dir, slots_dir, code, touch=False))
        return True
    flush_after()
    record_exit(job_dir, slots_dir, code)
    return True


def make_run_dirs(args):
    """The directories the runner's arguments ``args`` name with
    ``--workdir`` and ``--mount-root``, made if missing (a job run by a
    supervisor of its own is given them by the submitter)."""
    for flag in ("--workdir", "--mount-root"):
        if flag in args[:-1]:
            try:
                os.makedirs(args[args.index(flag) + 1], exist_ok=True)
            except OSError:
                pass  # the runner reports what it cannot make


def prepare_shared(shared, job_dir, args, deadline, started):
    """The shared phases for this job's runner arguments, prepared in this
    worker unless it holds them already (``PoolWorker.prepare``): what the
    forks run on, or None (each fork then runs every phase itself). While
    they run, a timer looks every 50 ms whether the job was cancelled or
    its run deadline (counted from ``started``) passed, and stops them:
    the fork then meets the cancel or the deadline as a supervisor's
    runner would."""
    held = getattr(shared, "held", None)
    if held is not None:
        try:
            prepared = held(args)
        except Exception:  # noqa: BLE001 - prepare below reports it
            prepared = None
        if prepared is not None:
            return prepared  # nothing to run: no timer to arm
    cancelled = os.path.join(job_dir, "cancelled")

    def check(_signum, _frame):
        if shared.armed and (os.path.exists(cancelled)
                             or (deadline is not None and time.monotonic() - started >= deadline)):
            shared.interrupt()

    previous = signal.signal(signal.SIGALRM, check)
    signal.setitimer(signal.ITIMER_REAL, 0.05, 0.05)
    try:
        return shared.prepare(args, os.path.join(job_dir, "output.log"))
    except Exception as exc:  # noqa: BLE001 - the fork runs every phase, and reports what fails
        sys.stderr.write("worker: job %s: preparing the shared phases: %r\n" % (os.path.basename(job_dir), exc))
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)


_OWN_START = [None, ""]


def own_start_time():
    """``start_time`` of this process, read from /proc once per process."""
    me = os.getpid()
    if _OWN_START[0] != me:
        _OWN_START[:] = [me, start_time(me)]
    return _OWN_START[1]


# Where a worker keeps the files it links into its jobs' directories
# (``link_shared``): ``{pool}/links``.
LINKS = []


def link_shared(name, dest, text):
    """Name ``dest`` as one more hard link of the worker's shared file
    ``name`` (in ``LINKS``), which holds ``text`` (made when missing, and
    made again when it has as many links as the file system allows): a
    job's file whose content every job of a process shares (``worker``,
    the executor's ``pid``, ``started``, an ``exit_code`` of 0) costs no
    inode of its own, and appears whole at once, as a file written aside
    and renamed. On the ext4 without a journal this machine runs on, every
    inode made and freed per input is what a map paid most for: making one
    skips each inode of its group freed in the last seconds
    (docs/performance.md). Raises FileExistsError when ``dest`` exists."""
    import errno
    source = os.path.join(LINKS[0], name)
    try:
        os.link(source, dest)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.EMLINK):
            raise
    write_atomic(source, text)
    os.link(source, dest)


def take_job(job_dir):
    """Write ``{job}/worker`` (this worker's pid and start) unless it is
    there: true for the one worker that runs the job. Linked into place
    (``link_shared``), so no reader sees it half-written and no two
    workers both take a job queued twice (a resubmission of a job whose
    first queue entry a worker had just claimed)."""
    me = os.getpid()
    path = os.path.join(job_dir, "worker")
    if LINKS:
        try:
            link_shared("worker-%d-%s" % (me, own_start_time()), path, "%d %s\n" % (me, own_start_time()))
            return True
        except FileExistsError:
            return False
        except OSError:
            pass  # written aside below
    tmp = "%s.tmp-%d" % (path, me)
    with open(tmp, "w") as f:
        f.write("%d %s\n" % (me, own_start_time()))
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def test_hold(job_dir, job_id):
    """A hook for the backend's tests only: with ``KINETIC_TEST_WORKER_HOLD``
    set to a directory, the worker stops between taking a job and forking
    it (``{hold}/{job_id}.held`` says it is there) until ``{hold}/{job_id}.go``
    exists, so a test can act in that window."""
    hold = os.environ.get("KINETIC_TEST_WORKER_HOLD")
    if not hold:
        return
    flush_after()
    create_empty(os.path.join(hold, job_id + ".held"))
    while not os.path.exists(os.path.join(hold, job_id + ".go")):
        time.sleep(0.005)


def leave_pool(pool, names):
    """Unregister this worker (remove its files ``names``) and, were it the
    pool's last live worker with nothing queued, remove the pool's
    directory.

    All under an exclusive flock on the directory of pools (``{root}/pools``),
    which a submitter holds shared from before it creates a pool's
    directory until its job is queued and its worker named: no job is
    queued in a pool being removed (a submitter after the removal makes the
    directory again), and of several workers leaving at once (they take
    the lock in turn, each unregistering under it) the last sees no other.
    A pool whose ``worker.log`` holds something is kept, for its errors.
    """
    pools = os.path.dirname(os.path.normpath(pool))
    try:
        dir_fd = os.open(pools, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        dir_fd = None
    gone = None
    try:
        if dir_fd is not None:
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
        for path in names:
            try:
                os.unlink(path)
            except OSError:
                pass
        if dir_fd is not None and pool_is_idle(pool):
            # Renamed under the lock, so the pool's path is gone at once for
            # everyone; its files are removed after, outside the lock.
            gone = os.path.join(pools, ".removed-%s-%d" % (os.path.basename(os.path.normpath(pool)), os.getpid()))
            try:
                os.rename(pool, gone)
            except OSError:
                gone = None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    if gone is not None:
        import shutil
        shutil.rmtree(gone, ignore_errors=True)


def pool_is_idle(pool):
    """True when the pool's queue is empty, no live worker is named under
    ``workers/`` and its ``worker.log`` is empty."""
    try:
        if any(not name.startswith(".") for name in os.listdir(os.path.join(pool, "queue"))):
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        if os.path.getsize(os.path.join(pool, "worker.log")) > 0:
            return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        names = os.listdir(os.path.join(pool, "workers"))
    except FileNotFoundError:
        names = []
    except OSError:
        return False
    for name in names:
        base = name[:-len(".leaving")] if name.endswith(".leaving") else name
        pid, _, start = base.partition("-")
        if not pid.isdigit() or not (start.isdigit() or start == ""):
            continue
        if worker_alive(int(pid), start):
            return False
    return True


def worker_alive(pid, start):
    """True while process ``pid`` lives, is not a zombie, and started at
    ``start`` (when known)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[-1].split()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True  # no /proc: it exists
    if not fields or fields[0] == "Z":
        return False
    return not start or (len(fields) > 19 and fields[19] == start)


# Descriptors of the worker that its jobs' forks close (the pool lock).
WORKER_FDS = []


def leave_on_signal(_signum, _frame):
    """SIGTERM to a worker: leave (the job it runs goes on in its own group)."""
    raise SystemExit(0)


def worker_main(opts):
    pool = opts["--pool"]
    jobs_dir = opts["--jobs-dir"]
    slots_dir = opts["--slots-dir"]
    runner = opts["--runner"]
    workers = max(1, int(opts.get("--workers", "1")))
    max_concurrent = max(1, int(opts.get("--max-concurrent", "1")))
    grace = float(opts.get("--grace", "3"))
    idle = float(opts.get("--idle", "2"))
    queue = os.path.join(pool, "queue")
    registry = os.path.join(pool, "workers")
    os.makedirs(registry, exist_ok=True)
    me = os.path.join(registry, worker_name(os.getpid()))
    leaving = me + ".leaving"
    listen_for_stop_requests()
    LINKS[:] = [os.path.join(pool, "links")]
    os.makedirs(LINKS[0], exist_ok=True)
    create_empty(me)  # in place (see above); the submitter may have made it
    lock_fd = take_worker_lock(pool, workers, 5.0)
    if lock_fd is None:
        leave_pool(pool, [me])  # the pool has its W workers
        return 0
    # Interpreter work done once for every job this worker runs: the runner
    # loaded, the modules it imports on each run imported.
    module = load_runner(runner)
    for name in ("json", "zipfile", "shutil", "tempfile", "hashlib", "urllib.request", "urllib.parse",
                 "importlib.util", "traceback", "atexit", "signal", "threading", "collections"):
        try:
            __import__(name)
        except ImportError:
            pass
    # The phases every input of the batch shares (download, extract,
    # import...), prepared in this process once for the inputs that follow
    # (a runner without PoolWorker, such as the backend's tests' stand-ins,
    # runs every phase in each fork).
    pool_worker = getattr(module, "PoolWorker", None)
    shared = pool_worker(pool) if pool_worker is not None else None
    signal.signal(signal.SIGTERM, leave_on_signal)
    WORKER_FDS.append(lock_fd)
    wake_fd = open_wake(pool)
    if wake_fd is not None:
        WORKER_FDS.append(wake_fd)
    slot_fd = None
    last = time.monotonic()
    delay = 0.001
    PEEK[:] = [lambda: peek_next(queue, jobs_dir, shared)]
    try:
        while True:
            job_id = claim_next(queue)
            if job_id is None:
                flush_after()
                if slot_fd is not None:
                    os.close(slot_fd)  # an idle worker holds no job slot
                    slot_fd = None
                if time.monotonic() - last < idle:
                    if wake_fd is None:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.02)
                        continue
                    # Woken by a submitter's byte at once; a look every 50 ms
                    # all the same (another worker may have read the byte).
                    if select.select([wake_fd], [], [], 0.05)[0]:
                        try:
                            os.read(wake_fd, 1)
                        except OSError:
                            pass
                    continue
                try:
                    create_empty(leaving)
                except OSError:
                    return 0  # the pool is gone (its root removed)
                job_id = claim_next(queue)
                if job_id is None:
                    return 0
                try:
                    os.unlink(leaving)
                except OSError:
                    pass  # removed by a reader: this worker stays all the same
            delay = 0.001
            job_dir = os.path.join(jobs_dir, job_id)
            if slot_fd is None:
                slot = acquire_slot(slots_dir, max_concurrent, os.path.join(job_dir, "cancelled"))
                if slot is None:
                    touch_ended(slots_dir)
                    release_claim(queue, job_id)
                    last = time.monotonic()
                    continue
                slot_fd = slot[0]
            try:
                run_pooled_job(job_dir, job_id, module, runner, opts, slots_dir, slot_fd, grace, shared,
                               claimed=lambda: release_claim(queue, job_id))
            except Exception as exc:  # noqa: BLE001 - e.g. its directory removed by a cleanup
                sys.stderr.write("worker: job %s: %s\n" % (job_id, exc))
            last = time.monotonic()
    finally:
        flush_after()
        close_executor()
        if shared is not None:
            shared.close()
        leave_pool(pool, [me, leaving])
        os.close(lock_fd)


if __name__ == "__main__":
    status = worker_main(parse_worker_args(sys.argv[1:])) if "--pool" in sys.argv[1:3] else main()
    # No interpreter teardown: the job is recorded, nothing is left to do.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
