"""What a caller sees of a job: its output line by line, the runner's own
lines kept for ``logs()``, a remote exception shown once, and why a job
waits while ``result()`` waits for it."""

import io
import os
import subprocess
import sys
import textwrap
import time

import pytest

import kinetic
from kinetic import JobStatus


def remote(fn, **options):
    # The backend comes from KINETIC_BACKEND (conftest: local, then gke on the fake cloud).
    options.setdefault("accelerator", "cpu")
    return kinetic.run(**options)(fn)


@pytest.fixture(autouse=True)
def fresh_talk():
    # Each test has its own copy of the project (conftest): import it afresh.
    sys.modules.pop("talk", None)
    yield
    sys.modules.pop("talk", None)


def test_following_logs_keeps_each_line_on_its_own_line(capfd):
    import talk

    job = remote(talk.ticks).run_async(3, pause=0.2)
    assert job.logs(follow=True) is None
    out = capfd.readouterr().out
    # Each line on its own line, in order. The job's stdout and the
    # runner's [kinetic] lines on stderr are stored in the order the
    # runner read the two streams, so a runner line may come between.
    ticks = [line for line in out.splitlines() if line.startswith("tick")]
    assert ticks == ["tick 0", "tick 1", "tick 2"], out
    assert job.result() == 3


def test_result_shows_the_jobs_output_and_keeps_the_runners_lines_for_logs(capfd):
    import talk

    job = remote(talk.ticks).run_async(2)
    assert job.result(cleanup=False) == 2
    captured = capfd.readouterr()
    assert "tick 0\ntick 1\n" in captured.out, captured.out
    assert "[kinetic]" not in captured.out and "[kinetic]" not in captured.err, captured
    # The moments every job spends starting leave no line.
    assert "kinetic: job" not in captured.err, captured.err
    logs = job.logs()
    assert "tick 1" in logs and "[kinetic] " in logs, logs
    job.cleanup()


def test_a_remote_exception_is_shown_once_on_stderr_with_the_users_frames(tmp_path):
    script = tmp_path / "project" / "lookup.py"
    script.write_text(textwrap.dedent("""
        import kinetic
        import talk

        kinetic.run(accelerator="cpu")(talk.missing_key)()
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                         cwd=str(tmp_path / "project"))
    assert out.returncode == 1, out
    # The job's output on stdout; no runner line, no traceback there.
    assert "looking up" in out.stdout, out
    assert "[kinetic]" not in out.stdout and "Traceback" not in out.stdout, out.stdout
    assert "[kinetic]" not in out.stderr, out.stderr
    # The user's frames once, on stderr; the key as Python writes it.
    assert out.stderr.count("in inner_lookup") == 1 and out.stderr.count("in missing_key") == 1, out.stderr
    assert "KeyError: 'missing'" in out.stderr and "\"'missing'\"" not in out.stderr, out.stderr
    # Neither the runner's frames nor the library's inner ones.
    for own in ("kinetic_runner", "__kinetic_runner__", "jobs.py", "_native"):
        assert own not in out.stderr, (own, out.stderr)


def test_a_rebuilt_key_error_reads_as_python_writes_it():
    import talk

    with pytest.raises(KeyError) as info:
        remote(talk.missing_key)()
    assert info.value.args == ("missing",)
    assert str(info.value) == "'missing'"


class _TimedStream(io.StringIO):
    """stderr, with when each write came."""

    def __init__(self):
        super().__init__()
        self.writes = []

    def write(self, text):
        self.writes.append((time.monotonic(), text))
        return super().write(text)


def test_result_says_why_a_job_waits_before_the_pending_deadline(backend, monkeypatch):
    import work

    monkeypatch.setenv("KINETIC_PENDING_DEADLINE", "120")
    blocker = None
    if backend == "local":
        # One GPU, taken by the first job: the second waits for it.
        monkeypatch.setenv("KINETIC_LOCAL_GPUS", "1")
        blocker = remote(work.slow_square, accelerator="gpu-l4").run_async(2, seconds=60)
        # The second job is submitted only once the first holds the GPU: on a
        # loaded machine the second could otherwise take it first, and run.
        stop = time.monotonic() + 60
        while blocker.status() is not JobStatus.RUNNING:
            assert time.monotonic() < stop, blocker.status()
            time.sleep(0.05)
        expected = "waiting for 1 GPU of 1"
    else:
        # The fake cluster has one CPU node: no node pool offers an L4.
        expected = "no node offers this accelerator"
    job = remote(work.square, accelerator="gpu-l4").run_async(3)
    stderr, real = _TimedStream(), sys.stderr
    sys.stderr = stderr
    started = time.monotonic()
    seen = []
    try:
        with pytest.raises(TimeoutError):
            job.result(timeout=15, on_status_change=seen.append)
        reason = job.status_reason()
    finally:
        sys.stderr = real
        job.cancel()
        if blocker is not None:
            blocker.cancel()
    lines = [(t, text) for t, text in stderr.writes if expected in text]
    assert lines, stderr.getvalue()
    assert lines[0][1].startswith("kinetic: job %s is PENDING: " % job.job_id), lines
    assert lines[0][0] - started < 15, lines
    # Once per change, not once per poll.
    assert len(lines) == 1, stderr.getvalue()
    assert seen == [JobStatus.PENDING], seen
    assert reason is not None and expected in reason, reason
