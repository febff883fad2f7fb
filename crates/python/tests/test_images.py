"""A pod has only what its image holds (backends ``gke`` and ``pathways`` on
kinetic-fake-gcp): the fake Cloud Build turns each image into a fresh venv
with the image's packages and the project's filtered requirements installed
from the wheelhouse, and a pod runs that venv's ``python3``, never the
tests' interpreter. The dependencies page's example, with a stand-in ``pandas``
wheel built here (no index is reached), and a job whose image lacks a
package the tests' interpreter has."""

import base64
import hashlib
import os
import sys
import zipfile

import pytest

from conftest import PREBUILT_REPO
# jobs_ran_in_their_image (autouse): each job ran in its image's environment,
# on pathways in a LeaderWorkerSet's pod.
from test_main import _jobs, jobs_ran_in_their_image, run_script  # noqa: F401

PANDAS = '''"""A stand-in for pandas: what the dependencies page's example calls."""

STAND_IN = True


class Series(list):
    def sum(self):
        return sum(self)


class DataFrame:
    def __init__(self, data):
        self._data = {k: Series(v) for k, v in data.items()}

    def __getitem__(self, column):
        return self._data[column]
'''


def build_wheel(wheelhouse, name: str, version: str, source: str) -> str:
    """A pure-Python wheel of one module ``name`` (what ``pip wheel`` makes of
    a one-file project), written into ``wheelhouse``; its file name."""
    dist = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: source,
        "%s/METADATA" % dist: "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
        "%s/WHEEL" % dist: "Wheel-Version: 1.0\nGenerator: kinetic-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(text.encode())))
    record.append("%s/RECORD,," % dist)
    files["%s/RECORD" % dist] = "\n".join(record) + "\n"
    wheel = "%s-%s-py3-none-any.whl" % (name, version)
    with zipfile.ZipFile(os.path.join(str(wheelhouse), wheel), "w") as z:
        for path, text in files.items():
            z.writestr(zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0)), text)
    return wheel


@pytest.mark.parametrize("backend", ["gke", "pathways"])
def test_the_dependencies_pages_example_runs_with_its_requirements_in_the_image(kinetic_env, wheelhouse):
    build_wheel(wheelhouse, "pandas", "0.0.1", PANDAS)
    (kinetic_env / "requirements.txt").write_text("pandas\n")
    out = run_script(kinetic_env, """
        import sys
        import kinetic

        @kinetic.run(accelerator="cpu")
        def analyze():
            import pandas as pd  # installed in the image from requirements.txt
            _record()
            df = pd.DataFrame({"x": [1, 2, 3]})
            return int(df["x"].sum()), getattr(pd, "STAND_IN", False), sys.prefix

        total, stand_in, prefix = analyze()
        print("value", total, stand_in)
        print("prefix", prefix)
    """)
    assert "value 6 True" in out, out
    prefix = out.split("prefix ", 1)[1].strip()
    # The job ran in the image's environment, not the tests' interpreter.
    assert os.path.realpath(prefix) != os.path.realpath(sys.prefix), prefix
    assert len(_jobs(kinetic_env)) == 1


@pytest.mark.parametrize("backend", ["gke", "pathways"])
def test_a_package_the_image_lacks_is_no_module_as_on_a_real_pod(kinetic_env):
    # pytest is in the tests' interpreter, never in a job image.
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu")
        def uses_pytest():
            _record()
            import pytest
            return pytest.__name__

        try:
            uses_pytest()
        except Exception as err:
            print("error", type(err).__name__, err)
    """)
    assert "No module named 'pytest'" in out, out
    assert len(_jobs(kinetic_env)) == 1


@pytest.mark.parametrize("backend", ["gke", "pathways"])
def test_a_prebuilt_image_installs_the_requirements_when_the_job_starts(kinetic_env, wheelhouse, prebuilt_image):
    # The prebuilt image has no pandas: the runner installs requirements.txt
    # at start, from the fake cluster's package index (the wheelhouse).
    build_wheel(wheelhouse, "pandas", "0.0.1", PANDAS)
    (kinetic_env / "requirements.txt").write_text("pandas\n")
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu", container_image="prebuilt", base_image_repo=%r)
        def analyze():
            import pandas as pd
            _record()
            return int(pd.DataFrame({"x": [4, 5]})["x"].sum()), getattr(pd, "STAND_IN", False)

        print("value", *analyze())
    """ % PREBUILT_REPO)
    assert "value 9 True" in out, out
    assert len(_jobs(kinetic_env)) == 1
