"""Debug jobs with debugpy installed: the runner listens where the backend
says, writes the readiness marker, and fails clearly when no debugger
attaches in time.

Needs a Python with `debugpy`: scripts/test.sh runs it with
KINETIC_RUNNER_PYTHON set to its venv's interpreter (not found by
`unittest discover`, whose Python has no `debugpy`)."""

import json
import os
import socket
import unittest

from runner.tests.support import RunnerTestCase, file_uri, function_entry

WORK = "def square(x):\n    return x * x\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DebugpySessionTests(RunnerTestCase):
    def test_no_debugger_within_the_wait_is_a_debugger_setup_failure_after_the_marker(self):
        port = free_port()
        marker = os.path.join(self.store, ".debug_ready")
        spec = self.spec({"work.py": WORK}, function_entry("square"), args=[3],
                         debug={"ready_uri": file_uri(marker), "port": 5678, "wait_timeout_seconds": 1})
        run = self.run_runner(self.write_spec(spec),
                              env={"KINETIC_DEBUG_HOST": "127.0.0.1", "KINETIC_DEBUG_PORT": str(port)})
        self.assertFailed(run, "debugger setup", "RunnerError", ["no debugger attached within 1s"])
        with open(marker, encoding="utf-8") as f:
            ready = json.load(f)
        self.assertEqual((ready["host"], ready["port"]), ("127.0.0.1", port))
        self.assertTrue(ready["workspace"].endswith("/workspace"), ready)
        self.assertIn("debugpy listens on 127.0.0.1:%d" % port, run.stderr)


if __name__ == "__main__":
    unittest.main()
