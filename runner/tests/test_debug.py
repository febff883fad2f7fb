"""Debug jobs without debugpy: the runner never installs it, so its absence
is a clear `debugger setup` failure naming the fix, and nothing listens; and
the other hosts of a multi-host debug job, which run no debugger and wait
for the leader's."""

import os
import threading
import time
import unittest

from runner import kinetic_runner as kr
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


# Each host's function records when it ran.
STAMP = ("import os, time\n"
         "def stamp():\n"
         "    path = os.path.join(os.environ['STAMP_DIR'], 'ran-%s' % os.environ.get('TPU_WORKER_ID', '0'))\n"
         "    with open(path, 'w') as f:\n"
         "        f.write(repr(time.time()))\n"
         "    return 'stamped'\n")


class WorkersWaitForTheLeaderTests(RunnerTestCase):
    """A worker of a multi-host debug job (KINETIC_DEBUG_WAIT_LEADER=1) runs no
    debugger: it waits before its call until the leader writes
    spec.debug.leader_ready_uri (once its debugger has a client), and fails in
    `debugger setup` without running the function when the leader ended
    first. No debugpy is needed on a worker."""

    def leader_ready(self):
        return os.path.join(self.store, ".leader_ready")

    def worker(self, leader_ready_uri=True, wait_env="1", timeout=60):
        debug = {"ready_uri": file_uri(os.path.join(self.store, ".debug_ready")), "port": 5678,
                 "wait_timeout_seconds": 5}
        if leader_ready_uri:
            debug["leader_ready_uri"] = file_uri(self.leader_ready())
        spec = self.spec({"work.py": STAMP}, function_entry("stamp"), debug=debug)
        env = {"TPU_WORKER_ID": "1", "STAMP_DIR": self.tmp, kr.WAIT_LEADER_ENV: wait_env}
        return self.run_runner(self.write_spec(spec), env=env, timeout=timeout, python_flags=("-S",))

    def ran(self):
        path = os.path.join(self.tmp, "ran-1")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return float(f.read())

    def test_a_worker_runs_its_function_only_once_the_leader_is_ready(self):
        released = []

        def release():
            released.append(time.time())
            with open(self.leader_ready(), "wb"):
                pass

        timer = threading.Timer(3.0, release)
        timer.start()
        try:
            run = self.worker()
        finally:
            timer.cancel()
        self.assertEqual(run.returncode, 0, run)
        self.assertIn("host 1 waits up to 65s for the leader's debugger", run.stderr)
        self.assertIn("host 1 runs the function", run.stderr)
        self.assertEqual(len(released), 1, run)
        self.assertIsNotNone(self.ran(), run)
        self.assertGreaterEqual(self.ran(), released[0], "the worker ran before the leader was ready")

    def test_a_worker_whose_leader_ended_first_fails_without_running_the_function(self):
        with open(os.path.join(self.store, "result.json"), "w") as f:
            f.write('{"protocol": 1, "success": false}')
        run = self.worker()
        self.assertFailed(run, "debugger setup", "RunnerError",
                          ["the leader ended before its debugger had a client", "did not run the function"],
                          name="result-worker-1.json")
        self.assertIsNone(self.ran())

    def test_without_the_variable_a_worker_runs_at_once(self):
        run = self.worker(wait_env="0")
        self.assertEqual(run.returncode, 0, run)
        self.assertNotIn("waits", run.stderr)
        self.assertIsNotNone(self.ran())

    def test_a_bad_variable_or_a_spec_without_the_marker_is_a_clear_failure(self):
        run = self.worker(wait_env="yes")
        self.assertFailed(run, "debugger setup", "RunnerError", ["KINETIC_DEBUG_WAIT_LEADER must be 1", "'yes'"],
                          name="result-worker-1.json")
        run = self.worker(leader_ready_uri=False)
        self.assertFailed(run, "debugger setup", "RunnerError", ["names no leader_ready_uri"],
                          name="result-worker-1.json")
        self.assertIsNone(self.ran())


class WaitForLeaderTests(unittest.TestCase):
    """The wait itself, on a fake clock: bounded, polling, and said when it runs out."""

    def setUp(self):
        self.now = 0.0
        self.objects = set()
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def read_bytes(self, uri):
        if uri not in self.objects:
            raise kr.NotFound(uri)
        return b""

    def test_it_polls_until_the_marker_appears(self):
        def sleep(seconds):
            self.sleep(seconds)
            if self.now >= 6:
                self.objects.add("gs://b/j/.leader_ready")
        waited = kr.wait_for_leader(self, "gs://b/j/.leader_ready", "gs://b/j/result.json", 100,
                                    poll=2, clock=self.clock, sleep=sleep)
        self.assertEqual(waited, 6)
        self.assertEqual(self.sleeps, [2, 2, 2])

    def test_it_gives_up_at_the_bound_saying_what_was_missing(self):
        with self.assertRaises(kr.RunnerError) as err:
            kr.wait_for_leader(self, "gs://b/j/.leader_ready", None, 5, poll=2, clock=self.clock, sleep=self.sleep)
        self.assertEqual(self.sleeps, [2, 2, 1])
        message = str(err.exception)
        self.assertIn("no client within 5s", message)
        self.assertIn("gs://b/j/.leader_ready was not written", message)
        self.assertIn("did not run the function", message)
