"""Helpers shared by the runner tests: build a job (context.zip + spec.json) in
a temp dir, run the real runner as a subprocess over it, read what it wrote.

Set KINETIC_RUNNER_PYTHON to run the runner under another interpreter (e.g. a
Python 3.9) than the one running the tests.
"""

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from runner import assemble

RUNNER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build_runner():
    """The runner as the engine ships it: the package built into one file
    (runner/assemble.py, the rules of crates/runner/build.rs), in a
    directory of its own, as in an image's /app."""
    directory = tempfile.mkdtemp(prefix="kinetic-runner-built-")
    atexit.register(shutil.rmtree, directory, True)
    path = os.path.join(directory, "kinetic_runner.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(assemble.assemble())
    return path


# The built runner every test runs.
RUNNER = _build_runner()
PYTHON = os.environ.get("KINETIC_RUNNER_PYTHON") or sys.executable
JOB_ID = "job-0a1b2c3d"
# Hosts a test spec names result URIs for (the engine names one per host of the slice).
WORKER_HOSTS = 4

# Variables of the test process that would change what the runner does.
_SCRUBBED = ("TPU_WORKER_ID", "LWS_WORKER_INDEX", "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "KINETIC_NODE_IPS",
             "PYTHONPATH", "http_proxy", "https_proxy",
             "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "GCE_METADATA_HOST")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_zip(path, files):
    """``files``: name -> text | bytes | (content, unix mode); a name ending '/' is a directory."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            mode = None
            if isinstance(content, tuple):
                content, mode = content
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.create_system = 3
            if name.endswith("/"):
                info.external_attr = ((mode or 0o40755) << 16) | 0x10
                archive.writestr(info, b"")
                continue
            info.external_attr = (mode if mode is not None else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content.encode() if isinstance(content, str) else content)


def function_entry(function, module="work"):
    return {"kind": "function", "module": module, "function": function}


def path_entry(path, function):
    return {"kind": "function", "path": path, "function": function}


def data_ref(uri, is_dir=True, mount_path=None, fuse=False):
    return {"__data_ref__": True, "uri": uri, "is_dir": is_dir, "mount_path": mount_path, "fuse": fuse}


def file_uri(path):
    return "file://" + path


def default_plan():
    return {"package_root": "/nonexistent/client/proj", "entry_rel": "", "client_cwd_rel": "", "sys_path_rel": [""]}


class Run:
    """What one runner process did."""

    def __init__(self, proc, store):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.store = store

    def read(self, name):
        path = os.path.join(self.store, name)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)

    @property
    def result(self):
        return self.read("result.json")

    def written(self):
        return sorted(n for n in os.listdir(self.store) if n.startswith("result"))

    def __repr__(self):
        return "Run(rc=%s)\n--- stdout\n%s--- stderr\n%s" % (self.returncode, self.stdout, self.stderr)


class RunnerTestCase(unittest.TestCase):
    """Each test gets a temp dir with a job store, a workdir and a mount root."""

    maxDiff = None

    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp(prefix="kinetic-runner-test-"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.store = os.path.join(self.tmp, "store", JOB_ID)
        self.workdir = os.path.join(self.tmp, "work")
        self.mount_root = os.path.join(self.tmp, "mnt")
        for d in (self.store, self.workdir, self.mount_root):
            os.makedirs(d)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def spec(self, files, entrypoint, **fields):
        """Writes context.zip and returns the spec dict (not yet written)."""
        context = os.path.join(self.store, "context.zip")
        write_zip(context, files)
        spec = {
            "protocol": 1,
            "job_id": JOB_ID,
            "entrypoint": entrypoint,
            "args": [],
            "kwargs": {},
            "volumes": [],
            "env_names": [],
            "output_dir": "gs://p-kn-c-jobs/outputs/" + JOB_ID,
            "context": {"uri": file_uri(context), "sha256": sha256(context)},
            "requirements": None,
            "plan": default_plan(),
            "result_uri": file_uri(os.path.join(self.store, "result.json")),
            "worker_result_uris": [file_uri(os.path.join(self.store, "result-worker-%d.json" % n))
                                   for n in range(1, WORKER_HOSTS)],
            "cluster": {"accelerator": "cpu", "num_nodes": 1, "num_gpus_per_node": 0, "node_ips": []},
        }
        spec.update(fields)
        return spec

    def write_spec(self, spec):
        path = os.path.join(self.store, "spec.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(spec, f)
        return file_uri(path)

    def run_runner(self, spec_uri, env=None, extra_args=(), cwd=None, timeout=60, python=None, python_flags=()):
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("KINETIC_") and k not in _SCRUBBED}
        full_env["PYTHONDONTWRITEBYTECODE"] = "1"
        full_env.update(env or {})
        argv = [python or PYTHON, "-u"] + list(python_flags) + [RUNNER]
        if spec_uri is not None:
            argv += ["--spec", spec_uri]
        argv += ["--workdir", self.workdir, "--mount-root", self.mount_root] + list(extra_args)
        proc = subprocess.run(argv, env=full_env, cwd=cwd or self.tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout)
        run = Run(proc, self.store)
        # Whatever happened, the runner's temp dir is gone.
        self.assertEqual(os.listdir(self.workdir), [], run)
        return run

    def run_job(self, files, entrypoint, env=None, extra_args=(), cwd=None, **fields):
        return self.run_runner(self.write_spec(self.spec(files, entrypoint, **fields)), env, extra_args, cwd)

    # -- assertions

    def assertSucceeded(self, run, value):
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.result, {"protocol": 1, "success": True, "value": value, "host_index": 0}, run)

    def assertFailed(self, run, phase, error_type, message_parts=(), name="result.json"):
        """Asserts a failure result and exit 1; returns the error object."""
        self.assertEqual(run.returncode, 1, run)
        result = run.read(name)
        self.assertIsNotNone(result, run)
        self.assertEqual(result["protocol"], 1)
        self.assertIs(result["success"], False, run)
        error = result["error"]
        self.assertEqual((error["phase"], error["type"]), (phase, error_type), run)
        for part in message_parts:
            self.assertIn(part, error["message"], run)
        self.assertIn("[kinetic] %s: failed" % phase, run.stderr)
        return error
