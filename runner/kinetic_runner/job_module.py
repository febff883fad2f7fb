"""The job-side ``kinetic`` module the runner writes first on every job's
``sys.path``."""

from __future__ import annotations

import importlib
import os
import sys

from .protocol import RunnerError


# The text of the job-side `kinetic` module (runner/kinetic_job.py). The
# built runner carries it on the next line (the build writes it there:
# crates/runner/build.rs); the package, imported from a checkout, reads
# runner/kinetic_job.py beside the package.
JOB_MODULE_SOURCE = None
JOB_MODULE_FILE = "kinetic_job.py"
# The directory the job's ``kinetic`` package is written under (its frames
# are the library's, not the user's: see ``_user_traceback``).
JOB_MODULE_DIR = "kinetic-module"


def job_module_source() -> str:
    """The job-side ``kinetic`` module's source: embedded, or the file beside the package."""
    if JOB_MODULE_SOURCE is not None:
        return JOB_MODULE_SOURCE
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), JOB_MODULE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise RunnerError("the job's kinetic module is neither embedded in the runner nor beside it (%s): %s"
                          % (path, err)) from None


def place_job_module(run_dir: str) -> str:
    """Writes the job's ``kinetic`` package under ``run_dir`` and puts it
    first on ``sys.path``, ahead of any ``kinetic`` the interpreter has
    installed (a local job's may have the client's): inside a job,
    ``import kinetic`` gives the job's side of the API, whose decorated
    functions run in-process. Returns the directory put on ``sys.path``."""
    root = os.path.join(run_dir, JOB_MODULE_DIR)
    package = os.path.join(root, "kinetic")
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w", encoding="utf-8") as f:
        f.write(job_module_source())
    for name in [n for n in sys.modules if n == "kinetic" or n.startswith("kinetic.")]:
        del sys.modules[name]
    sys.path.insert(0, root)
    importlib.invalidate_caches()
    return root
