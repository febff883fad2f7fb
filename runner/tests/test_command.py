"""Command entrypoints: exit codes, signals, working directory and environment."""

import json
import sys
import unittest

from runner.tests.support import RunnerTestCase, default_plan

TRAIN = """\
import json, os, sys
import mylib
print("training with", sys.argv[1:])
with open(sys.argv[1], "w") as f:
    json.dump({"cwd": os.getcwd(), "job": os.environ["KINETIC_JOB_ID"], "lib": mylib.NAME}, f)
sys.exit(int(sys.argv[2]))
"""


def command(*argv):
    return {"kind": "command", "argv": list(argv)}


class CommandTests(RunnerTestCase):
    FILES = {"scripts/train.py": TRAIN, "src/mylib.py": "NAME = 'mylib'\n"}
    PLAN = dict(default_plan(), client_cwd_rel="scripts", sys_path_rel=["", "src"])

    def test_exit_0_is_success_with_null_in_the_plan_cwd(self):
        out = self.path("out.json")
        run = self.run_job(self.FILES, command(sys.executable, "train.py", out, "0"), plan=self.PLAN)
        self.assertSucceeded(run, None)
        self.assertEqual(run.stdout, "training with ['%s', '0']\n" % out)
        with open(out) as f:
            seen = json.load(f)
        self.assertEqual(seen["job"], "job-0a1b2c3d")
        self.assertEqual(seen["lib"], "mylib")  # plan entries reach the child through PYTHONPATH
        self.assertTrue(seen["cwd"].endswith("/workspace/scripts"), seen["cwd"])

    def test_non_zero_exit_is_command_failed_with_the_code(self):
        run = self.run_job(self.FILES, command(sys.executable, "train.py", self.path("o.json"), "4"), plan=self.PLAN)
        self.assertFailed(run, "execute", "CommandFailed", ["exited with code 4", "train.py"])

    def test_death_by_signal_names_the_signal(self):
        kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
        run = self.run_job(self.FILES, command(sys.executable, "-c", kill), plan=self.PLAN)
        self.assertFailed(run, "execute", "CommandFailed", ["SIGKILL"])

    def test_command_that_cannot_start_is_command_failed(self):
        run = self.run_job(self.FILES, command("/nonexistent/bin/tool"), plan=self.PLAN)
        self.assertFailed(run, "execute", "CommandFailed", ["/nonexistent/bin/tool"])


if __name__ == "__main__":
    unittest.main()
