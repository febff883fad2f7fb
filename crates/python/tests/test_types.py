"""The package as installed: its version, and stubs that the type checks of
scripts/check-python-types.py (run by scripts/test.sh) hold to the module —
here, that those checks fail when the stubs drift. The checks read code,
not jobs: they run once, on the local backend."""

import importlib.metadata
import os
import subprocess
import sys
import types

import pytest

import kinetic

from conftest import REPO, _workspace_version

TYPING = os.path.join(REPO, "crates", "python", "typing")

# Static checks: one backend is enough (the `backend` fixture, overridden).
local_only = pytest.mark.parametrize("backend", ["local"])


def test_the_version_is_the_distributions():
    assert kinetic.__version__ == _workspace_version()
    # The distribution has a name of its own (PyPI's `kinetic` is another
    # package); the import name is `kinetic`.
    assert importlib.metadata.version("kinetic-rs") == kinetic.__version__


@local_only
def test_every_public_name_is_exported_so_the_stub_check_sees_it():
    # stubtest checks the names of __all__: a public name left out of it
    # would escape the check.
    public = {name for name, value in vars(kinetic).items()
              if not name.startswith("_") and not isinstance(value, types.ModuleType)}
    assert public <= set(kinetic.__all__), public - set(kinetic.__all__)


def _package_copy(tmp_path, edit_stub):
    """The installed package copied into tmp_path (the extension linked),
    with its stub edited by ``edit_stub``."""
    source = os.path.dirname(kinetic.__file__)
    target = tmp_path / "kinetic"
    target.mkdir()
    for name in os.listdir(source):
        path = os.path.join(source, name)
        if name.endswith((".py", ".pyi", ".typed")):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if name == "__init__.pyi":
                edited = edit_stub(text)
                assert edited != text, "the edit did not change the stub"
                text = edited
            (target / name).write_text(text, encoding="utf-8")
        elif name.startswith("_native."):
            os.symlink(path, target / name)
    return tmp_path


def _stubtest(folder):
    env = dict(os.environ, PYTHONPATH=str(folder), MYPYPATH=str(folder))
    return subprocess.run([sys.executable, "-m", "mypy.stubtest", "--mypy-config-file",
                           os.path.join(TYPING, "mypy.ini"), "kinetic"],
                          cwd=str(folder), env=env, capture_output=True, text=True, timeout=600)


@local_only
@pytest.mark.parametrize("edit, complaint", [
    # A method of the module the stub lost.
    (lambda text: text.replace("    def attempts(self)", "    def _attempts(self)"),
     "kinetic.JobHandle.attempts is not present in stub"),
    # A parameter the stub lost.
    (lambda text: text.replace("    restarts: int | None = None,\n", ""),
     'stub does not have parameter "restarts"'),
    # A default that differs.
    (lambda text: text.replace('accelerator: str = "tpu-v5e-1"', 'accelerator: str = "cpu"'),
     "kinetic.run is inconsistent"),
])
def test_the_stub_check_fails_when_the_stubs_drift(tmp_path, edit, complaint):
    done = _stubtest(_package_copy(tmp_path, edit))
    assert done.returncode != 0 and complaint in done.stdout, done.stdout + done.stderr


@local_only
def test_the_typed_examples_fail_when_a_decorated_function_returns_any(tmp_path):
    # The stub as it was: the decorator's result untyped.
    def untyped(text):
        return text.replace(") -> Callable[[Callable[_P, _R]], _Remote[_P, _R]]:",
                            ") -> Callable[[Callable[..., Any]], Any]:")

    folder = _package_copy(tmp_path, untyped)
    env = dict(os.environ, MYPYPATH=str(folder))
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", os.path.join(TYPING, "mypy.ini"),
                           "--cache-dir", str(tmp_path / "cache"), "--strict",
                           os.path.join(TYPING, "examples.py")],
                          cwd=str(folder), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0, done.stdout + done.stderr
    assert 'Expression is of type "Any", not "int"' in done.stdout, done.stdout
    assert "Unused \"type: ignore\" comment" in done.stdout, done.stdout
