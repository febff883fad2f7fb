"""The job's ``kinetic`` module: ``import kinetic`` works in every job (even
where the interpreter has another ``kinetic``), a decorated function called
in a job runs there, in-process, once, and client-only calls raise; a
function that travels by value needs cloudpickle, installed at start or
named in a clear error."""

import json
import os
import unittest

from runner.tests.support import RunnerTestCase, function_entry

WORK = """\
import kinetic

calls = []

@kinetic.run(accelerator="cpu")
def inner(x):
    calls.append(x)
    return x + 1

def outer(x):
    value = inner(x)
    return {"value": value, "calls": calls, "in_job": kinetic.IN_JOB,
            "status": kinetic.JobStatus.SUCCEEDED.value, "data": kinetic.Data("/tmp").path,
            "errors": [kinetic.RemoteError.__name__, kinetic.BatchError.__name__]}

@kinetic.run(accelerator="cpu")
def lookup(table, key):
    return table[key]

def outer_lookup():
    return lookup({}, "missing")

def client_only(which):
    try:
        if which == "run_async":
            inner.run_async(1)
        elif which == "run_async_map":
            inner.run_async_map([1])
        elif which == "attach":
            kinetic.attach("job-00000000")
        elif which == "list_jobs":
            kinetic.list_jobs()
        elif which == "JobHandle":
            kinetic.JobHandle("job-00000000")
    except kinetic.ClientOnlyError as err:
        return str(err)
    return "no error"
"""

# A `kinetic` the job's interpreter might have installed (the client's):
# calling a decorated function would submit a job.
SHADOW = {"kinetic/__init__.py": "def run(**kw):\n    raise RuntimeError('the client kinetic was imported')\n"}


class JobModuleTests(RunnerTestCase):
    def test_a_decorated_function_called_in_a_job_runs_there_once(self):
        run = self.run_job({"work.py": WORK, **SHADOW}, function_entry("outer"), args=[41])
        self.assertSucceeded(run, {"value": 42, "calls": [41], "in_job": True, "status": "SUCCEEDED",
                                   "data": "/tmp", "errors": ["RemoteError", "BatchError"]})

    def test_a_failure_through_a_decorated_function_shows_the_users_frames_only(self):
        run = self.run_job({"work.py": WORK}, function_entry("outer_lookup"))
        error = self.assertFailed(run, "execute", "KeyError")
        self.assertEqual(error["message"], "'missing'")
        tb = error["traceback"]
        self.assertIn("in outer_lookup", tb)
        self.assertIn("in lookup", tb)
        self.assertIn("KeyError: 'missing'", tb)
        # Neither the runner's frames nor the job-side module's wrapper.
        self.assertNotIn("kinetic_runner", tb)
        self.assertNotIn("kinetic-module", tb)
        self.assertNotIn("in wrapper", tb)

    def test_client_only_calls_raise_an_error_that_says_why(self):
        for which in ("run_async", "run_async_map", "attach", "list_jobs", "JobHandle"):
            run = self.run_job({"work.py": WORK}, function_entry("client_only"), args=[which])
            self.assertEqual(run.returncode, 0, run)
            message = run.result["value"]
            self.assertIn("cannot be called inside a Kinetic job", message, which)
            self.assertIn("from the client", message, which)

    def test_a_command_job_imports_the_job_module_too(self):
        argv = ["python3", "-c", "import json, kinetic; print(json.dumps([kinetic.IN_JOB, kinetic.__file__]))"]
        # The other `kinetic` on PYTHONPATH, as an installed one would be.
        shadow = self.path("site", "kinetic")
        os.makedirs(shadow)
        with open(os.path.join(shadow, "__init__.py"), "w") as f:
            f.write(SHADOW["kinetic/__init__.py"])
        run = self.run_job({"work.py": WORK}, {"kind": "command", "argv": argv},
                           env={"PYTHONPATH": self.path("site")})
        self.assertSucceeded(run, None)
        in_job, path = json.loads(run.stdout.strip().splitlines()[-1])
        self.assertTrue(in_job)
        self.assertIn("kinetic-module", path)

    def test_where_the_image_lacks_cloudpickle_it_is_installed_at_start(self):
        import base64
        import pickle
        import sys

        import cloudpickle

        def by_value(x):
            import kinetic
            return [x * 2, kinetic.IN_JOB]

        by_value.__module__ = "__main__"  # as a script's function: pickled by value
        payload = base64.b64encode(cloudpickle.dumps(by_value, protocol=pickle.HIGHEST_PROTOCOL)).decode()
        minor = "%d.%d" % sys.version_info[:2]
        entry = {"kind": "function", "module": "__kinetic_runner__", "function": "call_pickled"}
        spec_uri = self.write_spec(self.spec({"work.py": WORK}, entry, python_values=minor,
                                             args=[{"__kinetic_pickle__": payload, "python": minor}, 21]))
        # -S: no site-packages, so no cloudpickle; the "install" copies it onto PYTHONPATH.
        site = self.path("installed")
        os.makedirs(site)
        source = os.path.dirname(cloudpickle.__file__)
        install = json.dumps(["sh", "-c", 'cp -r "$0" "$1"', source, site])
        run = self.run_runner(spec_uri, env={"KINETIC_INSTALL_COMMAND": install, "PYTHONPATH": site},
                              python_flags=("-S",))
        self.assertSucceeded(run, [42, True])
        self.assertIn("this image has no cloudpickle; running sh -c", run.stderr)

    def test_without_cloudpickle_a_function_by_value_is_a_clear_error(self):
        entry = {"kind": "function", "module": "__kinetic_runner__", "function": "call_pickled"}
        spec_uri = self.write_spec(self.spec({"work.py": WORK}, entry, python_values="3.0"))
        # -S: no site-packages, so no cloudpickle; the install "fails".
        run = self.run_runner(spec_uri, env={"KINETIC_INSTALL_COMMAND": '["false"]'}, python_flags=("-S",))
        error = self.assertFailed(run, "entrypoint load", "RunnerError",
                                  ["travels by value", "cloudpickle", "add cloudpickle to the image"])
        self.assertIn("false cloudpickle exited with code 1", error["message"])


if __name__ == "__main__":
    unittest.main()
