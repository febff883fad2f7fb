"""SIGTERM: in a pod the runner is its container's PID 1, to which the kernel
delivers no signal it has no handler for, so the runner catches SIGTERM from
its start and ends on it at once, as the signal's default action would end a
process that is not PID 1 (exit 128 + 15, no result written)."""

import os
import subprocess
import time
import unittest

from runner.tests.support import PYTHON, RUNNER, RunnerTestCase, function_entry

WORK = """\
import os, time

def wait_for(path):
    print("waiting", flush=True)
    while not os.path.exists(path):
        time.sleep(0.05)
    return "released"
"""

SIGTERM_BIT = 1 << (15 - 1)


def caught_signals(pid):
    """The signals ``pid`` catches (``SigCgt`` of its /proc status)."""
    with open("/proc/%d/status" % pid, encoding="ascii") as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return int(line.split()[1], 16)
    return 0


@unittest.skipUnless(os.path.exists("/proc/self/status"), "needs /proc")
class SigtermTests(RunnerTestCase):
    def test_the_runner_catches_sigterm_and_ends_on_it_at_once(self):
        never = self.path("never")
        spec = self.spec({"work.py": WORK}, function_entry("wait_for"), args=[never])
        argv = [PYTHON, "-u", RUNNER, "--spec", self.write_spec(spec),
                "--workdir", self.workdir, "--mount-root", self.mount_root]
        env = {k: v for k, v in os.environ.items() if not k.startswith("KINETIC_")}
        child = subprocess.Popen(argv, env=env, cwd=self.tmp, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, universal_newlines=True)
        try:
            # Once the function runs, the runner catches SIGTERM.
            self.assertEqual(child.stdout.readline(), "waiting\n")
            self.assertTrue(caught_signals(child.pid) & SIGTERM_BIT,
                            "the runner does not catch SIGTERM: as PID 1 it would ignore it")
            started = time.monotonic()
            child.terminate()
            code = child.wait(timeout=10)
            self.assertLess(time.monotonic() - started, 5)
            self.assertEqual(code, 128 + 15)
            # No result: the job did not end, it was stopped.
            self.assertFalse(os.path.exists(os.path.join(self.store, "result.json")))
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
            child.stdout.close()


if __name__ == "__main__":
    unittest.main()
