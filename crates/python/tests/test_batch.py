"""run_async_map, BatchHandle, BatchError and attach_batch."""

import os
import re
import time

import pytest

import kinetic
from kinetic import JobStatus


def remote(fn, **options):
    # The backend comes from KINETIC_BACKEND (conftest: local, then gke on the fake cloud).
    options.setdefault("accelerator", "cpu")
    return kinetic.run(**options)(fn)


def test_run_async_map_ordered_and_unordered():
    import work

    batch = remote(work.square).run_async_map([1, 2, 3, 4], name="squares", tags={"team": "ml"})
    assert isinstance(batch, kinetic.BatchHandle)
    assert batch.group_id.startswith("grp-") and batch.name == "squares" and batch.tags == {"team": "ml"}
    assert batch.results(cleanup=False) == [1, 4, 9, 16]
    assert sorted(batch.results(ordered=False)) == [1, 4, 9, 16]


def test_statuses_counts_wait_and_as_completed():
    import work

    batch = remote(work.add).run_async_map([[1, 2], [3, 4], {"a": 5, "b": 6}], max_concurrent=2)
    batch.wait(timeout=120)
    assert [s for _, s in batch.statuses()] == [JobStatus.SUCCEEDED] * 3
    assert batch.status_counts() == {"SUCCEEDED": 3}
    done = list(batch.as_completed(timeout=60))
    assert sorted(j.job_id for j in done) == sorted(j.job_id for j in batch.jobs)
    assert sorted(j.result() for j in done) == [3, 7, 11]


def test_return_exceptions_and_batch_error_with_partial_results():
    import work

    fn = remote(work.square_unless_three)
    batch = fn.run_async_map([1, 2, 3])
    values = batch.results(return_exceptions=True, cleanup=False)
    assert values[:2] == [1, 4]
    assert isinstance(values[2], ValueError) and "three" in str(values[2])
    assert [j.job_id for j in batch.failures()] == [batch.jobs[2].job_id]

    with pytest.raises(kinetic.BatchError) as info:
        fn.run_async_map([3, 4]).results()
    err = info.value
    assert err.partial_results == [None, 16]
    assert len(err.failures) == 1 and err.group_id.startswith("grp-")


@pytest.mark.parametrize("backend", ["local"])
def test_isolation_workers_share_processes_and_process_starts_one_per_input(backend):
    import work

    fn = remote(work.parent_pid)
    shared = fn.run_async_map(range(8), max_concurrent=2).results()
    assert [x for x, _ in shared] == list(range(8))
    assert len({parent for _, parent in shared}) <= 2, shared
    alone = fn.run_async_map(range(4), max_concurrent=2, isolation="process").results()
    assert len({parent for _, parent in alone}) == 4, alone
    with pytest.raises(ValueError, match="workers or process"):
        fn.run_async_map([1], isolation="threads")


def test_attach_batch_from_its_group_id():
    import work

    batch = remote(work.square).run_async_map([5, 6])
    again = kinetic.attach_batch(batch.group_id)
    assert again.group_id == batch.group_id
    assert again.results() == [25, 36]
    again.cleanup()


def test_data_in_map_inputs_reaches_each_job(tmp_path):
    import work

    shards = []
    for i in range(3):
        shard = tmp_path / ("shard%d" % i)
        shard.mkdir()
        for j in range(i + 1):
            (shard / ("part-%d.txt" % j)).write_text("shard %d part %d" % (i, j))
        shards.append(kinetic.Data(str(shard)))
    config = tmp_path / "config.json"
    config.write_text('{"lr": 0.1}')

    # Each input's data is its own; the same file given to two inputs is
    # uploaded once and read by both.
    batch = remote(work.list_dir).run_async_map(shards)
    assert batch.results() == [["part-0.txt"], ["part-0.txt", "part-1.txt"],
                               ["part-0.txt", "part-1.txt", "part-2.txt"]]
    batch = remote(work.read_nested).run_async_map(
        [{"config": {"files": {"c": kinetic.Data(str(config))}, "dirs": shards[:n]}} for n in (1, 2)])
    assert batch.results() == [{"c": '{"lr": 0.1}', "n": 1}, {"c": '{"lr": 0.1}', "n": 2}]


def test_fuse_data_in_map_inputs_is_refused(tmp_path):
    import work

    (tmp_path / "a.txt").write_text("a")
    with pytest.raises(Exception, match="FUSE-mounted data, which a map input cannot be"):
        remote(work.list_dir).run_async_map([kinetic.Data(str(tmp_path), fuse=True)])


def _running_and_ignoring_term(job, deadline=120):
    """The pid of the job's process, once it ignores SIGTERM."""
    stop = time.monotonic() + deadline
    while True:
        match = re.search(r"ignoring SIGTERM in pid (\d+)", job.logs() or "")
        if match:
            return int(match.group(1))
        assert time.monotonic() < stop, job.status()
        time.sleep(0.1)


def test_cleanup_timeout_bounds_the_wait_for_a_deletion(backend):
    import work

    # A job whose stop takes its whole grace period (it ignores SIGTERM), as
    # a pod that stays Terminating: a short cleanup_timeout returns at about
    # that time with a warning (Kinetic only warns), not after 180 s.
    job = remote(work.ignores_term).run_async()
    pid = _running_and_ignoring_term(job)
    started = time.monotonic()
    with pytest.warns(UserWarning, match=r"was requested but not confirmed within 1\.0s"):
        job.cleanup(cleanup_timeout=1, cleanup_poll_interval=0.1)
    took = time.monotonic() - started
    assert 0.9 <= took < 4, took
    # The job still stops (SIGKILL at the end of its grace period); a cleanup
    # that waits long enough confirms it, without a warning.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        job.cleanup(cleanup_timeout=60, cleanup_poll_interval=0.2)
    assert job.status() == JobStatus.NOT_FOUND
    if backend == "local":  # confirmed means gone: the process no longer runs
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # cancel takes the same bound.
    other = remote(work.ignores_term).run_async()
    _running_and_ignoring_term(other)
    started = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other.cancel(cleanup_timeout=0.5, cleanup_poll_interval=0.1)
    assert time.monotonic() - started < 3.5
    if backend == "local":  # a process in its grace period: not yet stopped
        assert any("not confirmed within 0.5s" in str(w.message) for w in caught), caught
    other.cleanup(cleanup_timeout=60)
    for name, value in (("cleanup_poll_interval", -1), ("cleanup_poll_interval", 0), ("cleanup_timeout", "5")):
        with pytest.raises(ValueError, match=name):
            job.cancel(**{name: value})


def test_as_completed_polls_at_the_interval_it_is_given(backend):
    import work

    batch = remote(work.square).run_async_map([2])
    stop = time.monotonic() + 120
    while batch.jobs[0] is None:  # submitted in the background
        assert time.monotonic() < stop
        time.sleep(0.05)
    batch.status_counts()  # a poll now: the next one is due a poll interval later
    job = batch.jobs[0]
    while job.status() != JobStatus.SUCCEEDED:
        assert time.monotonic() < stop
        time.sleep(0.1)
    if backend != "local":
        # Polled every 60 s, the ended job is not seen within 3 s (the
        # cluster announces nothing; only a poll finds it)...
        with pytest.raises(TimeoutError):
            list(batch.as_completed(poll_interval=60, timeout=3))
    # ...polled every 0.2 s, at once. (The local backend announces jobs
    # ending, which wakes the loop whatever the interval.)
    started = time.monotonic()
    assert [j.result(cleanup=False) for j in batch.as_completed(poll_interval=0.2, timeout=30)] == [4]
    assert time.monotonic() - started < 3
    with pytest.raises(ValueError, match="poll_interval"):
        list(batch.as_completed(poll_interval=0))


def test_a_batch_whose_client_was_killed_is_said_at_once_and_resumed():
    # Issue 25.5: the process that submitted the batch dies right after
    # run_async_map returns (one input at a time, each taking a second: at
    # most input 0 running and input 1 queued for the pool's one worker,
    # which the engine keeps one input ahead).
    import subprocess
    import sys
    code = ("import os, kinetic, work\n"
            "batch = kinetic.run(accelerator='cpu')(work.slow_square).run_async_map(\n"
            "    [[i, 1.0] for i in range(5)], max_concurrent=1)\n"
            "print(batch.group_id, flush=True)\n"
            "os._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    group_id = out.stdout.strip()

    batch = kinetic.attach_batch(group_id)
    missing = batch.never_submitted()
    assert len(missing) >= 3 and missing == list(range(5 - len(missing), 5)), missing
    # Said before waiting (not after a timeout: this one has none left).
    # Input 0 may have been claimed (its record written) but never
    # submitted: followed from its record, it is pending, not counted.
    message = r"batch %s: [345] of 5 inputs were never submitted .*BatchHandle\.resume\(\)" % group_id
    with pytest.warns(RuntimeWarning, match=message):
        with pytest.raises(TimeoutError):
            batch.wait(timeout=0)
    with pytest.warns(RuntimeWarning, match=message):
        with pytest.raises(TimeoutError):
            batch.results(timeout=0)

    batch.resume()
    assert batch.never_submitted() == []
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert batch.results(timeout=300) == [0, 1, 4, 9, 16]


def test_batch_error_names_the_failed_jobs_each_time_results_raises():
    # Issue 26.7: the second results() read the failure the first recorded,
    # and BatchError.failures came back empty.
    import work

    batch = remote(work.square_unless_three).run_async_map([3, 4])
    for _ in range(2):
        with pytest.raises(kinetic.BatchError) as info:
            batch.results()
        err = info.value
        assert [j.job_id for j in err.failures] == [batch.jobs[0].job_id]
        assert err.submission_failures == {} and err.partial_results == [None, 16]
        assert [j.job_id for j in batch.failures()] == [batch.jobs[0].job_id]


def test_a_batch_inputs_retry_sees_kinetic_attempt_2_as_a_single_jobs_retry_does(tmp_path):
    # Issue 26.8: a batch retry (a new job for the input) saw KINETIC_ATTEMPT=1 again.
    import work

    single = kinetic.run(accelerator="cpu", retries=1)(work.attempt_after_failing)
    assert single(str(tmp_path / "single")) == ["second attempt", "2"]
    batch = remote(work.attempt_after_failing).run_async_map([str(tmp_path / "a"), str(tmp_path / "b")],
                                                             retries=1)
    assert batch.results() == [["second attempt", "2"], ["second attempt", "2"]]


def _group_id():
    import random
    return "grp-%08x" % random.getrandbits(32)


def test_a_batch_handle_built_as_the_reference_builds_one():
    # Issue 26.5: BatchHandle(group_id, name, tags, jobs, ...) raised TypeError.
    import inspect
    import threading
    import work

    assert list(inspect.signature(kinetic.BatchHandle).parameters) == [
        "group_id", "name", "tags", "jobs", "_bucket_name", "_project", "_submission_complete",
        "_submission_error", "_lock", "_submission_errors", "_cached_failures"]
    fn = remote(work.square_unless_three)
    jobs = [fn.run_async(2), fn.run_async(3)]
    done = threading.Event()
    done.set()
    group_id = _group_id()
    never_sent = ValueError("never sent")
    batch = kinetic.BatchHandle(group_id, "built", {"team": "ml"}, jobs + [None], _submission_complete=done,
                                _lock=threading.Lock(), _submission_errors={2: never_sent})
    assert (batch.group_id, batch.name, batch.tags) == (group_id, "built", {"team": "ml"})
    assert [None if j is None else j.job_id for j in batch.jobs] == [jobs[0].job_id, jobs[1].job_id, None]
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # its None input is the caller's word, not a batch to resume
        batch.wait(timeout=120)
    assert [(i, s) for i, s in batch.statuses()] == [(0, JobStatus.SUCCEEDED), (1, JobStatus.FAILED)]
    assert [j.job_id for j in batch.failures()] == [jobs[1].job_id]
    values = batch.results(return_exceptions=True)
    assert values[0] == 4
    assert isinstance(values[1], ValueError) and "three" in str(values[1])
    assert values[2] is never_sent
    assert batch.submission_failures == {2: never_sent}
    with pytest.raises(kinetic.BatchError) as info:
        batch.results()
    assert [j.job_id for j in info.value.failures] == [jobs[1].job_id]
    assert info.value.submission_failures == {2: never_sent}

    # What the reference's private fields say is honoured, or refused.
    died = RuntimeError("the submission loop died")
    with pytest.raises(RuntimeError, match="the submission loop died"):
        kinetic.BatchHandle(_group_id(), None, {}, [None], _submission_error=died).wait()
    cached = kinetic.BatchHandle(_group_id(), None, {}, jobs, _cached_failures=[jobs[0]])
    assert [j.job_id for j in cached.failures()] == [jobs[0].job_id]
    with pytest.raises(ValueError, match="_submission_complete"):
        kinetic.BatchHandle(_group_id(), None, {}, jobs, _submission_complete=threading.Event())
    with pytest.raises(ValueError, match="_bucket_name='elsewhere'"):
        kinetic.BatchHandle(_group_id(), None, {}, jobs, _bucket_name="elsewhere")
    with pytest.raises(ValueError, match="input 0 has a job"):
        kinetic.BatchHandle(_group_id(), None, {}, jobs, _submission_errors={0: ValueError("x")})
    with pytest.raises(ValueError, match="group_id=\"grp-nope\""):
        kinetic.BatchHandle("grp-nope", None, {}, jobs)
    with pytest.raises(TypeError, match=r"BatchHandle\(jobs="):
        kinetic.BatchHandle(_group_id(), None, {}, ["job-0a1b2c3d"])
