"""The reference's examples for @kinetic.run, written as a user would."""

import dataclasses
import fractions
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

import kinetic
from kinetic import JobStatus


def remote(fn, **options):
    # The backend comes from KINETIC_BACKEND (conftest: local, then gke on the fake cloud).
    options.setdefault("accelerator", "cpu")
    return kinetic.run(**options)(fn)


def test_a_decorated_call_returns_the_value():
    import work

    square = remote(work.square)
    assert square(7) == 49
    assert remote(work.add)(2, b=40) == 42


def test_the_backend_argument_chooses_the_store_its_jobs_can_reach(backend, monkeypatch):
    # Only the decorator names the backend: on gke the job must go to the
    # configured cluster's jobs bucket, never the local file:// store a pod
    # cannot read.
    import work

    monkeypatch.delenv("KINETIC_BACKEND")
    monkeypatch.delenv("KINETIC_STORE_URL")
    square = kinetic.run(accelerator="cpu", backend=backend)(work.square)
    handle = square.run_async(7)
    assert handle.result(timeout=120) == 49
    assert handle.backend == backend
    if backend == "gke":
        # The job's spec is in the cluster's jobs bucket on the fake GCS.
        endpoint = os.environ["KINETIC_GCS_ENDPOINT"].rstrip("/")
        url = "%s/%s?list-type=2&prefix=%s/" % (endpoint, handle.bucket_name, handle.job_id)
        with urllib.request.urlopen(url, timeout=30) as answer:
            listing = answer.read().decode()
        assert "%s/spec.json" % handle.job_id in listing, listing


def test_a_remote_exception_is_raised_with_its_type_and_traceback():
    import work

    with pytest.raises(ValueError, match="bad input") as info:
        remote(work.fails)("bad input")
    err = info.value
    assert "work.py" in err.remote_traceback and "in fails" in err.remote_traceback
    assert isinstance(err.__cause__, kinetic.RemoteTraceback)
    assert err.phase == "execute"
    assert err.job_id.startswith("job-")


def test_a_users_own_exception_type_is_rebuilt():
    import work

    with pytest.raises(work.TrainingError, match="diverged"):
        remote(work.fails_custom)("diverged")


def test_values_that_are_not_json_travel_pickled():
    import work

    mid = remote(work.midpoint)(work.Point(0, 0), work.Point(2, 4))
    assert mid == work.Point(1.0, 2.0)
    assert remote(work.add)(fractions.Fraction(1, 3), fractions.Fraction(1, 6)) == fractions.Fraction(1, 2)
    assert remote(work.as_tuple)([1, 2]) == ((1, 2), {1, 2})


def test_returned_values_come_back_with_their_types():
    # JSON would turn the keys into strings and the tuples into lists: these travel pickled.
    import work

    handles = {kind: remote(work.returned).run_async(kind) for kind in work.RETURNED}
    for kind, handle in handles.items():
        value = handle.result(timeout=120)
        assert value == work.RETURNED[kind], kind
        assert type(value) is type(work.RETURNED[kind]), kind
    keys = handles["keys"].result(timeout=120)
    assert [type(k) for k in keys] == [int, type(None), float]


def test_values_that_look_like_markers_are_escaped_both_ways():
    import work

    markers = [{"__kinetic_str__": [55296]}, {"__kinetic_dict__": [["a", 1]]}, {"__data_ref__": "x"},
               "a\ud800"]
    assert remote(work.add)(markers, []) == markers
    assert remote(work.kinds)(*markers) == ["dict", "dict", "dict", "str"]


def test_a_bound_method_ships_with_its_object(monkeypatch):
    import work

    scaler = work.Scaler(3)
    times = remote(scaler.times)
    scaler.factor = 4  # the object as it is when the job is submitted
    assert times(5) == 20  # not Scaler.times(5): self=5 and x=1
    assert times.run_async_map([1, 2]).results() == [4, 8]
    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # plain pickle ships it too
    assert remote(work.Scaler(2).times)(x=7) == 14
    with pytest.raises(TypeError, match="bound method Unpicklable.times.*cannot be pickled.*live connection"):
        remote(work.Unpicklable(1).times)


def test_a_secret_split_over_a_pause_is_redacted_in_every_stored_copy(backend, monkeypatch):
    import work

    secret = "tok-3f9a1c77e2"
    monkeypatch.setenv("API_TOKEN", secret)  # a credential-like name: a secret
    handle = remote(work.slow_split, capture_env_vars=["API_TOKEN"]).run_async("API_TOKEN")
    # Kept on local, to read its output.log below; on gke the pod goes and the stored chunks stay.
    assert handle.result(timeout=120, cleanup=backend != "local") == "ok"
    # Read back as `kinetic jobs logs` from a shell without the secret: what is stored, as it is.
    monkeypatch.delenv("API_TOKEN")
    logs = kinetic.attach(handle.job_id).logs()
    assert "slow:" in logs and "<redacted>" in logs and secret[:6] not in logs, logs
    if backend == "local":
        path = os.path.join(os.environ["KINETIC_LOCAL_ROOT"], "jobs", handle.job_id, "output.log")
        with open(path) as f:
            text = f.read()
        # (the runner's own stderr lines may land between "slow:" and the rest)
        assert "slow:" in text and "<redacted>" in text and secret[:6] not in text, text


def test_a_lambda_or_closure_is_a_clear_error_without_cloudpickle(monkeypatch):
    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # as if not installed
    with pytest.raises(TypeError, match="lambda or is defined inside another function.*cloudpickle"):
        kinetic.run(accelerator="cpu")(lambda x: x)

    def inner(x):
        return x

    with pytest.raises(TypeError, match="inner"):
        kinetic.run(accelerator="cpu")(inner)


def test_lambdas_and_closures_ship_by_value_with_cloudpickle():
    import cloudpickle  # noqa: F401 - a test dependency (scripts/test.sh installs it); missing fails

    offset = 10

    def shifted(x):
        return x + offset

    assert kinetic.run(accelerator="cpu")(shifted)(5) == 15
    assert kinetic.run(accelerator="cpu")(lambda x, y=1: x * y)(6, y=7) == 42
    batch = kinetic.run(accelerator="cpu")(lambda x: -x).run_async_map([1, 2])
    assert batch.results() == [-1, -2]


def test_standard_library_and_installed_functions_ship_by_name_without_packing(backend):
    # Issue 25.7: json.dumps packed the directory that holds the standard
    # library (the interpreter, 59,570 entries) and then hit the file-count
    # limit. The job's interpreter has these: they go by name.
    import json
    import math
    import posixpath

    from packaging.utils import canonicalize_name

    from kinetic import core

    for fn, module in ((json.dumps, "json"), (posixpath.join, "posixpath"), (math.hypot, "math"),
                       (canonicalize_name, "packaging.utils")):
        reference = core._function_reference(fn)
        assert reference["entry"] == {"module": module, "function": fn.__qualname__}, fn
        assert reference["working_dir"] == os.getcwd(), fn
    assert remote(json.dumps)({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert remote(math.hypot)(3, 4) == 5.0
    if backend == "local":
        # A local job runs on this interpreter, which has the package.
        assert remote(canonicalize_name)("Foo_Bar") == "foo-bar"
    else:
        # A pod has only what its image holds: an installed package travels
        # by name, so the image must hold it too, or the job says so.
        with pytest.raises(Exception, match="No module named 'packaging'"):
            remote(canonicalize_name)("Foo_Bar")


def test_parameters_the_engine_cannot_honour_are_errors():
    with pytest.raises(ValueError, match="debug='yes'"):
        kinetic.run(accelerator="cpu", debug="yes")
    with pytest.raises(ValueError, match="backend='k8s'"):
        kinetic.run(backend="k8s")


def test_run_async_then_result_reports_each_status_change(backend):
    import work

    job = remote(work.slow_square).run_async(6, seconds=0.5)
    assert isinstance(job, kinetic.JobHandle)
    assert job.backend == backend
    assert job.job_id.startswith("job-") and job.func_name == "slow_square"
    seen = []
    assert job.result(on_status_change=seen.append) == 36
    assert seen[-1] is JobStatus.SUCCEEDED
    assert all(isinstance(s, JobStatus) for s in seen)
    assert len(seen) == len(set(seen)), seen


def test_a_failing_status_callback_is_logged_and_swallowed(caplog):
    import work

    def broken(status):
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.ERROR, logger="kinetic"):
        assert remote(work.square).run_async(3).result(on_status_change=broken) == 9
    assert "on_status_change" in caplog.text


def test_a_handle_survives_to_dict_and_from_dict_with_unknown_keys():
    import work

    job = remote(work.square).run_async(5)
    d = job.to_dict()
    assert d["job_id"] == job.job_id
    d["a_field_from_the_future"] = {"x": 1}
    again = kinetic.JobHandle.from_dict(d)
    assert again.job_id == job.job_id
    assert again.status() in (JobStatus.PENDING, JobStatus.RUNNING, JobStatus.SUCCEEDED)
    assert again.result() == 25


def test_attach_from_a_second_process():
    import work

    job = remote(work.slow_square).run_async(4, seconds=0.2)
    out = subprocess.run(
        [sys.executable, "-c", "import kinetic; print(kinetic.attach(%r).result())" % job.job_id],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "16"


def test_list_jobs_logs_tail_cancel_and_cleanup():
    import work

    done = remote(work.square).run_async(2)
    assert done.result(cleanup=False) == 4
    running = remote(work.slow_square).run_async(3, seconds=60)
    ids = [j.job_id for j in kinetic.list_jobs()]
    assert done.job_id in ids and running.job_id in ids
    assert isinstance(done.logs(), str)
    assert isinstance(done.tail(5), str)
    follow = remote(work.slow_square).run_async(7, seconds=0.2)
    assert follow.logs(follow=True) is None
    assert follow.result() == 49
    running.cancel()
    assert running.status() in (JobStatus.FAILED, JobStatus.NOT_FOUND)
    done.cleanup()
    assert done.status() is JobStatus.NOT_FOUND
    with pytest.raises(LookupError):
        kinetic.attach(done.job_id)


def test_a_timeout_leaves_the_job_running():
    import work

    job = remote(work.slow_square).run_async(2, seconds=3)
    with pytest.raises(TimeoutError):
        job.result(timeout=0.5)
    assert job.result() == 4


def test_a_guarded_main_script_ships_its_function_by_value(tmp_path):
    script = tmp_path / "project" / "script.py"
    script.write_text(textwrap.dedent("""
        import kinetic

        @kinetic.run(accelerator="cpu")
        def cube(x):
            return x ** 3

        if __name__ == "__main__":
            print("value", cube(3))
    """))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         cwd=str(tmp_path / "project"))
    assert out.returncode == 0, out.stderr
    assert "value 27" in out.stdout


def test_ctrl_c_stops_the_wait_not_the_job(tmp_path):
    script = tmp_path / "project" / "wait.py"
    script.write_text(textwrap.dedent("""
        import sys
        import kinetic
        import work

        job = kinetic.run(accelerator="cpu")(work.slow_square).run_async(5, seconds=4)
        print(job.job_id, flush=True)
        job.result()
    """))
    # Ctrl-C as a terminal delivers it: SIGINT at its default, even when
    # the suite itself runs where it is ignored (a background job of a
    # non-interactive shell), since Python keeps an inherited SIG_IGN.
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, cwd=str(tmp_path / "project"),
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    job_id = child.stdout.readline().strip()
    assert job_id.startswith("job-"), child.stderr.read()
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode != 0
    assert "KeyboardInterrupt" in err
    assert "kinetic.attach(%r).result()" % job_id in err
    assert kinetic.attach(job_id).result() == 25
