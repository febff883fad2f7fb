"""The module's surface: names, parameters and defaults as the reference gives them."""

import base64
import inspect
import pickle

import pytest

import kinetic
from kinetic import _values


def defaults(fn):
    return {name: p.default for name, p in inspect.signature(fn).parameters.items()}


def test_run_has_the_reference_parameters_and_defaults():
    assert defaults(kinetic.run) == {
        "accelerator": "tpu-v5e-1", "container_image": None, "base_image_repo": None, "zone": None,
        "project": None, "capture_env_vars": None, "cluster": None, "backend": None, "namespace": None,
        "volumes": None, "spot": False, "output_dir": None, "debug": False,
        # Past the reference: failure budgets (None: the defaults).
        "retries": None, "restarts": None}
    assert "Execute function on remote TPU/GPU" in kinetic.run.__doc__


def test_handles_and_helpers_have_the_reference_parameters():
    assert defaults(kinetic.JobHandle.result) == {
        "self": inspect.Parameter.empty, "timeout": None, "cleanup": None, "cleanup_timeout": 180,
        "cleanup_poll_interval": 2, "stream_logs": None, "on_status_change": None}
    assert defaults(kinetic.JobHandle.cleanup) == {
        "self": inspect.Parameter.empty, "k8s": True, "gcs": True, "cleanup_timeout": 180,
        "cleanup_poll_interval": 2}
    assert defaults(kinetic.BatchHandle.results) == {
        "self": inspect.Parameter.empty, "timeout": None, "ordered": True, "cleanup": True,
        "return_exceptions": False}
    assert defaults(kinetic.attach_batch) == {
        "group_id": inspect.Parameter.empty, "project": None, "cluster": None, "poll_interval": 10.0,
        "poll_timeout": None}
    assert defaults(kinetic.Data.__init__) == {
        "self": inspect.Parameter.empty, "path": inspect.Parameter.empty, "fuse": False,
        "hf_trust_remote_code": False}
    assert [s.value for s in kinetic.JobStatus] == ["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "NOT_FOUND"]


def test_a_decorated_function_keeps_its_name_signature_and_methods():
    import work

    fn = kinetic.run(accelerator="cpu")(work.add)
    assert fn.__name__ == "add" and str(inspect.signature(fn)) == "(a, b=0)"
    assert callable(fn.run_async) and callable(fn.run_async_map)


def test_a_result_pickled_by_another_python_is_a_clear_error():
    leaf = {"__kinetic_pickle__": base64.b64encode(pickle.dumps(1)).decode(), "python": "2.7"}
    with pytest.raises(TypeError, match="pickled by Python 2.7"):
        _values.decode({"value": [leaf]})


def test_a_malformed_hugging_face_uri_is_a_clear_error():
    import work

    with pytest.raises(ValueError, match="unknown query key \"shard\""):
        kinetic.run(accelerator="cpu")(work.read_text)(kinetic.Data("hf://imdb?shard=2"))
    with pytest.raises(ValueError, match="hf_trust_remote_code applies to Hugging Face datasets"):
        kinetic.run(accelerator="cpu")(work.read_text)(kinetic.Data("gs://b/x.txt", hf_trust_remote_code=True))


def test_data_inside_a_pickled_value_is_a_clear_error(tmp_path):
    import work

    f = tmp_path / "x.txt"
    f.write_text("x")
    with pytest.raises(TypeError, match="inside a value that is pickled"):
        kinetic.run(accelerator="cpu")(work.read_text)((kinetic.Data(str(f)),))


def test_a_handle_from_a_job_context_follows_its_job():
    # Issue 26.5: JobHandle.from_job_context was missing.
    import re
    import types
    import work

    assert list(inspect.signature(kinetic.JobHandle.from_job_context).parameters) == [
        "ctx", "backend_name", "namespace", "k8s_name"]
    job = kinetic.run(accelerator="cpu")(work.square).run_async(6)
    ctx = types.SimpleNamespace(job_id=job.job_id, project=job.project, cluster_name=job.cluster_name,
                                zone=job.zone, bucket_name=job.bucket_name, image_uri=job.image_uri or None,
                                accelerator=job.accelerator, func=work.square, display_name=job.display_name,
                                debug=False)
    handle = kinetic.JobHandle.from_job_context(ctx, job.backend, job.namespace, job.k8s_name)
    assert (handle.job_id, handle.backend, handle.k8s_name) == (job.job_id, job.backend, job.k8s_name)
    assert handle.func_name == "square" and handle.debug is False and handle.group_id is None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", handle.created_at), handle.created_at
    assert handle.result(timeout=120) == 36

    del ctx.project
    with pytest.raises(TypeError, match="ctx has no 'project' attribute"):
        kinetic.JobHandle.from_job_context(ctx, job.backend, job.namespace, job.k8s_name)
    ctx.project = job.project
    with pytest.raises(TypeError, match="backend_name=None: expected a str"):
        kinetic.JobHandle.from_job_context(ctx, None, job.namespace, job.k8s_name)
    # Ids that are not the job's are refused when the handle is used.
    wrong = kinetic.JobHandle.from_job_context(ctx, job.backend, job.namespace, "kinetic-job-00000000")
    with pytest.raises(Exception, match="k8s_name"):
        wrong.status()


def test_list_jobs_warns_about_a_live_job_without_its_handle_and_keeps_to_its_namespace(backend):
    # Issue 26.6: such a job was dropped without the warning the reference
    # promises, and the local backend listed every namespace's jobs.
    import warnings
    import work

    square = kinetic.run(accelerator="cpu")(work.square)
    kept, lost = square.run_async(2), square.run_async(3)
    assert kept.result(cleanup=False) == 4 and lost.result(cleanup=False) == 9
    lost.cleanup(k8s=False, gcs=True)  # its handle.json goes; the backend still holds the job
    message = (r"list_jobs: skipping job %s: the %s backend holds it but its handle could not be loaded \(.*%s"
               % (lost.job_id, backend, lost.job_id))
    with pytest.warns(UserWarning, match=message):
        ids = [j.job_id for j in kinetic.list_jobs()]
    assert kept.job_id in ids and lost.job_id not in ids
    lost.cleanup(k8s=True, gcs=False)

    # The fake cloud is shared between tests: what others left is not this test's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert kept.job_id not in [j.job_id for j in kinetic.list_jobs(namespace="team-b")]
        if backend == "local":
            other = kinetic.run(accelerator="cpu", namespace="team-b")(work.square).run_async(4)
            assert other.result(cleanup=False) == 16
            assert [j.job_id for j in kinetic.list_jobs(namespace="team-b")] == [other.job_id]
            assert other.job_id not in [j.job_id for j in kinetic.list_jobs()]
            other.cleanup()
    kept.cleanup()
