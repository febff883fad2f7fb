"""Each test gets its own local state (store, jobs, home) and a copy of the
test project on sys.path, as a user's checkout would be; and runs twice:
on the local backend, and with ``backend="gke"`` (through ``KINETIC_BACKEND``)
on the fake Google Cloud of ``kinetic-fake-gcp`` (Kubernetes, GCS and Cloud
Build on loopback, its pods run as processes on this interpreter)."""

import os
import shlex
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _fake_gcp_binary() -> str:
    path = os.environ.get("KINETIC_FAKE_GCP_BIN") or os.path.join(REPO, "target", "debug", "kinetic-fake-gcp")
    if not os.access(path, os.X_OK):
        pytest.fail("kinetic-fake-gcp not found at %s: build it (cargo build -p kinetic-fake-gcp) "
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
def fake_gcp(tmp_path_factory):
    """The fake cloud, started once; the environment that points at it."""
    state = tmp_path_factory.mktemp("fake-gcp")
    log = open(state / "server.log", "w")
    child = subprocess.Popen([_fake_gcp_binary(), "--state-dir", str(state), "--python", sys.executable],
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
