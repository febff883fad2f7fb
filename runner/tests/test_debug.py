"""Debug jobs without debugpy: the runner never installs it, so its absence
is a clear `debugger setup` failure naming the fix, and nothing listens."""

import os

from runner.tests.support import RunnerTestCase, file_uri, function_entry, JOB_ID

WORK = "def square(x):\n    return x * x\n"


class DebugWithoutDebugpyTests(RunnerTestCase):
    def debug(self, timeout=5):
        return {"ready_uri": file_uri(os.path.join(self.store, ".debug_ready")), "port": 5678,
                "wait_timeout_seconds": timeout}

    def test_missing_debugpy_is_a_debugger_setup_failure_naming_the_fix(self):
        # -S: no site-packages, so debugpy cannot be importable whatever this host has installed.
        spec = self.spec({"work.py": WORK}, function_entry("square"), args=[3], debug=self.debug())
        run = self.run_runner(self.write_spec(spec), python_flags=("-S",))
        error = self.assertFailed(run, "debugger setup", "RunnerError",
                                  ["debugpy package cannot be imported", "add `debugpy` to the project's requirements"])
        self.assertNotIn("Traceback", error["message"])
        self.assertFalse(os.path.exists(os.path.join(self.store, ".debug_ready")))

    def test_a_command_cannot_run_under_the_debugger(self):
        spec = self.spec({"work.py": WORK}, {"kind": "command", "argv": ["true"]}, debug=self.debug())
        run = self.run_runner(self.write_spec(spec))
        self.assertFailed(run, "debugger setup", "RunnerError", ["a command cannot run under the debugger"])

    def test_a_malformed_debug_object_is_refused_at_startup(self):
        spec = self.spec({"work.py": WORK}, function_entry("square"), args=[3],
                         debug={"ready_uri": "file:///x", "port": 0, "wait_timeout_seconds": 1})
        run = self.run_runner(self.write_spec(spec))
        self.assertFailed(run, "startup", "RunnerError", ["spec.debug.port must be a port"])

    def test_without_debug_the_job_runs_as_before(self):
        run = self.run_job({"work.py": WORK}, function_entry("square"), args=[4])
        self.assertSucceeded(run, 16)
        self.assertNotIn("debugger", run.stderr)
        self.assertTrue(JOB_ID)
