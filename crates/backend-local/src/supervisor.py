"""Per-job supervisor of the Kinetic local backend (standard library only).

Started by the local backend in a process group of its own:

    python3 supervisor.py --job-dir DIR --slots-dir DIR --max-concurrent N \
        [--run-deadline SECONDS] [--grace SECONDS] -- ARGV...

It records its own pid (``DIR/pid``, with its start time, so the job's
state can be read even when the process that started it died at once),
waits for one of N slots (an flock on ``slots/slot-{i}.lock``, so the
limit holds across every process that uses the same local root, and a
queued job needs no one to stay alive to start it; queued supervisors line
up on ``slots/queue.lock`` so only one of them polls), records that the job
started, runs ARGV with stdout and stderr appended to ``DIR/output.log``,
and records its exit code in ``DIR/exit_code`` (written aside, then
renamed). The job's environment is inherited and never written anywhere.

With ``--run-deadline``, a job still running that many seconds after it
started is stopped: ``DIR/deadline_exceeded`` is written first, then the
whole process group gets SIGTERM and, once the runner ended or after
``--grace`` seconds, SIGKILL, which also ends whatever the job started in
the group and the supervisor itself (the marker says why).

Files in DIR: ``queued`` (waiting for a slot), ``started`` (slot taken, JSON
with the slot and time), ``exit_code`` (the runner's exit code; negative =
killed by that signal), ``cancelled`` (written by the backend before it
kills the group; the supervisor then exits without starting the job),
``deadline_exceeded`` (the run deadline passed and the group was killed).
"""

import fcntl
import json
import os
import signal
import subprocess
import sys
import time


def write_atomic(path, text):
    tmp = "%s.tmp-%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def parse_args(argv):
    opts = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1:]
        if arg in ("--job-dir", "--slots-dir", "--max-concurrent", "--run-deadline", "--grace") and i + 1 < len(argv):
            opts[arg] = argv[i + 1]
            i += 2
            continue
        raise SystemExit("supervisor: unexpected argument %r" % arg)
    raise SystemExit("supervisor: missing '--' before the job's command")


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
        delay = 0.002
        while True:
            if os.path.exists(cancelled_path):
                return None
            slot = try_slots(slots_dir, max_concurrent)
            if slot is not None:
                return slot
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
    finally:
        os.close(queue_fd)


def main():
    opts, command = parse_args(sys.argv[1:])
    job_dir = opts["--job-dir"]
    slots_dir = opts["--slots-dir"]
    max_concurrent = max(1, int(opts.get("--max-concurrent", "1")))
    if not command:
        raise SystemExit("supervisor: no command to run")
    deadline = float(opts["--run-deadline"]) if "--run-deadline" in opts else None
    grace = float(opts.get("--grace", "3"))
    cancelled = os.path.join(job_dir, "cancelled")

    # The backend writes this file too, after the spawn; written here as
    # well, it is there even when the process that started us died at once.
    pid = os.getpid()
    write_atomic(os.path.join(job_dir, "pid"), "%d %s\n" % (pid, start_time(pid)))
    write_atomic(os.path.join(job_dir, "queued"), json.dumps({"at": time.time()}))
    slot = acquire_slot(slots_dir, max_concurrent, cancelled)
    if slot is None:
        return 0
    _fd, index = slot  # held until this process exits
    write_atomic(os.path.join(job_dir, "started"), json.dumps({"slot": index, "at": time.time()}))

    log = open(os.path.join(job_dir, "output.log"), "ab", buffering=0)
    try:
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    except OSError as exc:
        log.write(("[kinetic] could not start %r: %s\n" % (command[0], exc)).encode())
        write_atomic(os.path.join(job_dir, "exit_code"), "127\n")
        return 0

    # A cancel signals the whole group; the child gets it too. Keep the
    # supervisor alive long enough to record how the child ended.
    def on_term(signum, _frame):
        try:
            child.send_signal(signum)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    try:
        code = child.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        code = stop_for_deadline(job_dir, child, deadline, grace, log)
    write_atomic(os.path.join(job_dir, "exit_code"), "%d\n" % code)
    return 0


def stop_for_deadline(job_dir, child, deadline, grace, log):
    """Kill the job's process group once its run deadline passed; the
    runner's exit code when it ended within the grace period."""
    write_atomic(os.path.join(job_dir, "deadline_exceeded"), "%s\n" % deadline)
    log.write(("[kinetic] the job ran longer than its run deadline (%gs): stopping it\n" % deadline).encode())
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    group = os.getpgrp()
    try:
        os.killpg(group, signal.SIGTERM)
    except OSError:
        pass
    try:
        code = child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        code = -signal.SIGKILL
    # Whatever else the job started in this group goes too (and this
    # process with it when the runner did not end: the marker says why).
    write_atomic(os.path.join(job_dir, "exit_code"), "%d\n" % code)
    os.killpg(group, signal.SIGKILL)
    return code


if __name__ == "__main__":
    sys.exit(main())
