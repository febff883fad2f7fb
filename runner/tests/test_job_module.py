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
