"""Each test gets its own local state (store, jobs, home) and a copy of the
test project on sys.path, as a user's checkout would be; and runs twice:
on the local backend, and with ``backend="gke"`` (through ``KINETIC_BACKEND``)
on the fake Google Cloud of ``kinetic-fake-gcp`` (Kubernetes, GCS and Cloud
Build on loopback); a module may ask for ``pathways`` there too (its own
``backend`` fixture, as ``test_main.py`` has, or a parametrization). The
fake's pods have only what their image holds: each image its Cloud Build
builds is a fresh venv with the image's packages and requirements installed
from a wheelhouse (``target/wheelhouse``, which ``scripts/test.sh`` fills
with ``pip download``; no index is reached), and a pod runs its image's
``python3``, never this interpreter; an image no build makes runs only when
named with its interpreter (``--image IMAGE=PYTHON``)."""

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def pytest_runtest_logreport(report):
    """A test that failed and is tried again (``--reruns``, as
    ``scripts/test.sh`` runs the suite) is reported by pytest as one letter
    ``R`` and its name: print the failure it is tried again for, so that a
    flaky test's cause is in the log of the run that saw it."""
    if getattr(report, "outcome", None) != "rerun":
        return
    text = getattr(report, "longreprtext", "") or ""
    captured = "".join("\n--- %s ---\n%s" % (name, content) for name, content in report.sections)
    sys.stderr.write("\n===== tried again: %s (%s) =====\n%s%s\n===== end of %s =====\n"
                     % (report.nodeid, report.when, text[-6000:], captured[-4000:], report.nodeid))
    sys.stderr.flush()


# An image no build makes, whose environment the fake registry is told
# explicitly: this interpreter (the venv of scripts/test.sh, with datasets
# and debugpy). For the few jobs that need a package too big for the
# wheelhouse; every other job runs in an image the fake Cloud Build built.
TESTS_VENV_IMAGE = "us-docker.pkg.dev/fake-project/kn-fake/tests-venv:stand-in"




def _workspace_version() -> str:
    with open(os.path.join(REPO, "Cargo.toml")) as f:
        for line in f:
            if line.startswith("version = "):
                return line.split('"')[1]
    raise AssertionError("no version in Cargo.toml")


# A prebuilt base image (``container_image="prebuilt"``) in the fake
# registry: no build of the fake makes it, so its environment is named
# explicitly (a venv the ``prebuilt_image`` fixture makes when a test needs it:
# cloudpickle from the wheelhouse, as the image's packages the wheelhouse has).
PREBUILT_REPO = "us-docker.pkg.dev/fake-project/kn-fake/prebuilt"
PREBUILT_IMAGE = "%s/base-cpu:%s" % (PREBUILT_REPO, _workspace_version())


def _fake_gcp_binary() -> str:
    path = os.environ.get("KINETIC_FAKE_GCP_BIN") or os.path.join(REPO, "target", "debug", "kinetic-fake-gcp")
    if not os.access(path, os.X_OK):
        pytest.fail("kinetic-fake-gcp not found at %s: build it (cargo build -p kinetic-fake-gcp-server) "
                    "or set KINETIC_FAKE_GCP_BIN" % path)
    return path


def _read_env(path: str) -> dict:
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("export "):
                continue
            name, _, value = line[len("export "):].partition("=")
            if name == "PATH":
                continue
            env[name] = shlex.split(value)[0] if value else ""
    return env


@pytest.fixture(scope="session")
def wheelhouse(tmp_path_factory):
    """The fake cloud's package index: the wheels of ``target/wheelhouse``
    (or ``KINETIC_TEST_WHEELHOUSE``), copied into a folder tests add their
    own stand-in wheels to."""
    source = os.environ.get("KINETIC_TEST_WHEELHOUSE") or os.path.join(REPO, "target", "wheelhouse")
    wheels = sorted(os.listdir(source)) if os.path.isdir(source) else []
    if not any(w.lower().startswith("cloudpickle-") for w in wheels):
        pytest.fail("no cloudpickle wheel in %s: run `pip download cloudpickle debugpy -d %s` "
                    "(scripts/test.sh does)" % (source, source))
    folder = tmp_path_factory.mktemp("wheelhouse")
    for wheel in wheels:
        shutil.copy(os.path.join(source, wheel), folder / wheel)
    return folder


@pytest.fixture(scope="session")
def prebuilt_env(tmp_path_factory):
    """Where the prebuilt image's environment is (made by ``prebuilt_image``)."""
    return tmp_path_factory.mktemp("prebuilt-image") / "venv"


@pytest.fixture(scope="session")
def prebuilt_image(prebuilt_env, wheelhouse):
    """The prebuilt image's environment, made once: a fresh venv with the
    image's packages the wheelhouse holds (cloudpickle)."""
    if not (prebuilt_env / "bin" / "python3").exists():
        subprocess.run([sys.executable, "-m", "venv", str(prebuilt_env)], check=True)
        subprocess.run([str(prebuilt_env / "bin" / "python3"), "-m", "pip", "install", "-q", "--no-index",
                        "--disable-pip-version-check", "--find-links", str(wheelhouse), "cloudpickle"], check=True)
    return PREBUILT_IMAGE


@pytest.fixture(scope="session")
def fake_gcp(tmp_path_factory, wheelhouse, prebuilt_env):
    """The fake cloud, started once; the environment that points at it.
    Image environments are kept under ``target/fake-images`` between runs."""
    state = tmp_path_factory.mktemp("fake-gcp")
    log = open(state / "server.log", "w")
    child = subprocess.Popen([_fake_gcp_binary(), "--state-dir", str(state), "--python", sys.executable,
                              "--wheelhouse", str(wheelhouse),
                              "--image-cache", os.path.join(REPO, "target", "fake-images"),
                              "--image", "%s=%s" % (TESTS_VENV_IMAGE, sys.executable),
                              "--image", "%s=%s" % (PREBUILT_IMAGE, prebuilt_env / "bin" / "python3")],
                             stdout=subprocess.PIPE, stderr=log, text=True)
    try:
        line = child.stdout.readline()
        if not line.startswith("ready"):
            child.kill()
            pytest.fail("kinetic-fake-gcp did not start: %r; see %s" % (line, state / "server.log"))
        yield _read_env(str(state / "env"))
    finally:
        child.terminate()
        try:
            child.wait(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        log.close()


@pytest.fixture(params=["local", "gke"])
def backend(request):
    return request.param


@pytest.fixture(autouse=True)
def kinetic_env(request, tmp_path, monkeypatch, backend):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    shutil.copytree(os.path.join(HERE, "project"), project)
    for name in list(os.environ):
        if name.startswith("KINETIC_") or name in ("KUBECONFIG", "GOOGLE_CLOUD_PROJECT"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KINETIC_LOCAL_ROOT", str(tmp_path / "local"))
    if backend != "local":  # gke, and pathways (which tests ask for by parametrizing `backend`)
        for name, value in request.getfixturevalue("fake_gcp").items():
            monkeypatch.setenv(name, value)
    else:
        monkeypatch.setenv("KINETIC_STORE_URL", "file://%s" % (tmp_path / "store"))
    monkeypatch.setenv("KINETIC_BACKEND", backend)
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    sys.modules.pop("work", None)
    yield project
    sys.modules.pop("work", None)
