"""kinetic.Data as arguments and volumes; capture_env_vars."""

import os
import sys
import urllib.parse
import urllib.request
import uuid
import warnings

import pytest

import kinetic
from conftest import TESTS_VENV_IMAGE


def remote(fn, **options):
    # The backend comes from KINETIC_BACKEND (conftest: local, then gke on the fake cloud).
    options.setdefault("accelerator", "cpu")
    return kinetic.run(**options)(fn)


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "dataset"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.txt").write_text("beta")
    config = tmp_path / "config.json"
    config.write_text('{"lr": 0.1}')
    return root, config


def test_data_properties_and_content_hash(dataset):
    root, config = dataset
    d = kinetic.Data(str(root) + "/")
    assert d.is_dir and not d.is_gcs and not d.is_hf and d.path == str(root)
    f = kinetic.Data(str(config))
    assert not f.is_dir
    assert len(f.content_hash()) == 64 and f.content_hash() != d.content_hash()
    g = kinetic.Data("gs://my-bucket/datasets/imagenet/")
    assert g.is_gcs and g.is_dir
    assert not kinetic.Data("gs://my-bucket/datasets/weights.h5").is_dir
    assert kinetic.Data("hf://imdb?split=train").is_hf and kinetic.Data("hf://imdb").is_dir
    with pytest.raises(ValueError, match="fuse=True is not supported for Hugging Face"):
        kinetic.Data("hf://imdb", fuse=True)


def test_data_file_and_directory_as_arguments(dataset):
    import work

    root, config = dataset
    assert remote(work.read_text)(kinetic.Data(str(config))) == '{"lr": 0.1}'
    assert remote(work.list_dir)(kinetic.Data(str(root) + "/")) == ["a.txt", "sub"]


def test_data_nested_in_kwargs(dataset):
    import work

    root, config = dataset
    value = remote(work.read_nested)(config={"files": {"cfg": kinetic.Data(str(config))},
                                             "dirs": [kinetic.Data(str(root))]})
    assert value == {"cfg": '{"lr": 0.1}', "n": 1}


def test_data_as_a_volume(dataset):
    import work

    root, _ = dataset
    read = remote(work.read_volume, volumes={"/data": kinetic.Data(str(root) + "/")})
    assert read("a.txt") == "alpha"


def test_a_volume_at_the_root_is_refused(dataset):
    # Issue 25.9: a volume at '/' was accepted.
    import work

    root, _ = dataset
    for mount in ("/", "//"):
        with pytest.raises(ValueError, match="cannot be mounted at '/'"):
            remote(work.read_volume, volumes={mount: kinetic.Data(str(root))})("a.txt")


def test_missing_data_is_a_clear_error(tmp_path):
    import work

    with pytest.raises(ValueError, match="does not exist"):
        remote(work.read_text)(kinetic.Data(str(tmp_path / "nope.txt")))


def test_the_module_checks_what_the_command_line_checks(monkeypatch):
    import work

    # An unset name fails before anything is uploaded, as `--env NAME` does.
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    before = sorted(h.job_id for h in kinetic.list_jobs())  # the fake cloud is shared between tests
    with pytest.raises(ValueError, match="NOT_SET_ANYWHERE"):
        remote(work.env_values, capture_env_vars=["NOT_SET_ANYWHERE"])(["NOT_SET_ANYWHERE"])
    assert sorted(h.job_id for h in kinetic.list_jobs()) == before
    for options, message in ((dict(max_concurrent=-1), r"max_concurrent=-1\): expected a positive"),
                             (dict(max_concurrent=1.5), r"max_concurrent=1.5\)"),
                             (dict(retries=-1), r"retries=-1\): expected a whole number")):
        with pytest.raises(ValueError, match=message):
            remote(work.square).run_async_map([1], **options)
    with pytest.raises(ValueError, match=r"output_dir=5\): expected a directory"):
        remote(work.square, output_dir=5)(1)
    for path, message in (("/nonexistent", "does not exist"), ("hf://", "names no dataset"),
                          ("hf://x?bogus=1", 'unknown query key "bogus"'),
                          ("ftp://host/x", "only local paths, gs:// and hf:// URIs")):
        with pytest.raises(ValueError, match=message):
            kinetic.Data(path)
    assert sorted(h.job_id for h in kinetic.list_jobs()) == before


def test_capture_env_vars_with_a_wildcard(monkeypatch):
    import work

    monkeypatch.setenv("WANDB_API_KEY", "secret-1")
    monkeypatch.setenv("WANDB_PROJECT", "demo")
    fn = remote(work.env_values, capture_env_vars=["WANDB_*"])
    assert fn(["WANDB_API_KEY", "WANDB_PROJECT"]) == {"WANDB_API_KEY": "secret-1", "WANDB_PROJECT": "demo"}
    with pytest.raises(ValueError, match="capture_env_vars"):
        kinetic.run(accelerator="cpu", capture_env_vars="WANDB_*")


def test_a_hugging_face_dataset_is_loaded_on_the_host(kinetic_env, monkeypatch):
    import work

    # A dataset of the project's own: hf://./ds is loaded by datasets.load_dataset
    # on the host (no hub reached), and the function gets the saved dataset.
    (kinetic_env / "ds").mkdir()
    (kinetic_env / "ds" / "train.csv").write_text("text,label\nhello,1\nbye,0\n")
    # The job's python3 is this interpreter, which has the datasets package:
    # locally on PATH, on the fake cloud as the image named for it (datasets
    # is too big for the wheelhouse the built images install from).
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    image = TESTS_VENV_IMAGE if os.environ.get("KINETIC_BACKEND") == "gke" else None
    value = remote(work.hf_rows, capture_env_vars=["HF_HUB_OFFLINE"], container_image=image)(
        kinetic.Data("hf://./ds?split=train", hf_trust_remote_code=True))
    assert value == {"n": 2, "text": ["hello", "bye"]}


def test_a_secret_too_short_to_be_one_is_not_redacted_and_the_submitter_is_told(backend, monkeypatch, capfd):
    import work

    # One character: redacting it would turn every "k" of the output (the
    # runner's "[kinetic]" lines included) into "<redacted>".
    monkeypatch.setenv("WANDB_API_KEY", "k")
    handle = remote(work.slow_split, capture_env_vars=["WANDB_API_KEY"]).run_async("WANDB_API_KEY")
    assert handle.result(timeout=120, cleanup=False) == "ok"
    err = capfd.readouterr().err
    warnings = [line for line in err.splitlines() if "not redacted" in line]
    assert len(warnings) == 1, err
    assert "WANDB_API_KEY" in warnings[0] and "shorter than 8 characters" in warnings[0], warnings
    logs = handle.logs()
    assert "slow:k" in logs and "[kinetic]" in logs and "<redacted>" not in logs, logs
    handle.cleanup()


@pytest.fixture
def gcs_objects(request, backend, monkeypatch):
    """Objects on the fake cloud's GCS, which the job reads on either backend
    (a local job's runner through ``KINETIC_GCS_ENDPOINT``): ``{prefix}/x``
    (an object) and ``{prefix}/x/a.txt`` (an object under the prefix ``x/``),
    and ``{prefix}/only-dir/b.txt``. Returns ``gs://bucket/prefix``."""
    env = request.getfixturevalue("fake_gcp")
    endpoint = env["KINETIC_GCS_ENDPOINT"].rstrip("/")
    if backend == "local":
        monkeypatch.setenv("KINETIC_GCS_ENDPOINT", endpoint)
    bucket = env["KINETIC_STORE_URL"][len("gs://"):].split("/")[0]
    prefix = "data-%s" % uuid.uuid4().hex[:8]
    for name, body in (("x", b"the object"), ("x/a.txt", b"a"), ("only-dir/b.txt", b"b")):
        url = "%s/%s/%s" % (endpoint, bucket, urllib.parse.quote("%s/%s" % (prefix, name)))
        with urllib.request.urlopen(urllib.request.Request(url, data=body, method="PUT"), timeout=30):
            pass
    return "gs://%s/%s" % (bucket, prefix)


def test_a_gs_uri_without_a_trailing_slash_is_the_single_object(gcs_objects):
    import work

    # The reference: without a trailing slash a single object, even where a
    # directory of the same name exists; Kinetic warns when the last segment
    # has no '.'.
    with pytest.warns(UserWarning, match=r"has no trailing slash, so it names a single object.*"
                                         r"if it is a directory, write gs://.*/x/"):
        obj = kinetic.Data(gcs_objects + "/x")
    assert not obj.is_dir
    assert remote(work.read_text)(obj) == "the object"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a trailing slash, or a '.': no warning
        folder = kinetic.Data(gcs_objects + "/x/")
        kinetic.Data(gcs_objects + "/x/a.txt")
    assert folder.is_dir
    assert remote(work.list_dir)(folder) == ["a.txt"]
    # A missing object is named, and the directory of that name hinted.
    with pytest.warns(UserWarning):
        missing = kinetic.Data(gcs_objects + "/only-dir")
    with pytest.raises(Exception, match=r"data %s/only-dir: no such object.*end the URI with a slash"
                                        % gcs_objects):
        remote(work.read_text)(missing)
