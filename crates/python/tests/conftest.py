"""Each test gets its own local state (store, jobs, home) and a copy of the
test project on sys.path, as a user's checkout would be."""

import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(autouse=True)
def kinetic_env(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    project = tmp_path / "project"
    shutil.copytree(os.path.join(HERE, "project"), project)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KINETIC_LOCAL_ROOT", str(tmp_path / "local"))
    monkeypatch.setenv("KINETIC_STORE_URL", "file://%s" % (tmp_path / "store"))
    for name in list(os.environ):
        if name.startswith("KINETIC_") and name not in ("KINETIC_LOCAL_ROOT", "KINETIC_STORE_URL"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("KINETIC_BACKEND", "local")
    monkeypatch.chdir(project)
    monkeypatch.syspath_prepend(str(project))
    sys.modules.pop("work", None)
    yield project
    sys.modules.pop("work", None)
