"""Secret values (spec.secret_names, found in the runner's environment) are
redacted from the job's output, the runner's lines and failure results."""

import os
import unittest

from runner import kinetic_runner as kr
from runner.tests.support import WORKER_HOSTS, RunnerTestCase, file_uri, function_entry

SECRET = "tok-3f9a1c77e2"

WORK = """\
import os
import subprocess
import sys
import time

def leak(name):
    value = os.environ[name]
    print("stdout has " + value, flush=True)
    print("stderr has " + value, file=sys.stderr, flush=True)
    os.write(1, ("raw fd write " + value + "\\n").encode())
    subprocess.run(["sh", "-c", 'echo "child says $' + name + '"'], check=True)
    # Split across writes: the start is held back until the rest arrives.
    sys.stdout.write(value[:5])
    sys.stdout.flush()
    time.sleep(0.02)
    sys.stdout.write(value[5:] + " end\\n")
    sys.stdout.flush()
    raise RuntimeError("cannot use token " + value)

def quiet_prefix(name):
    value = os.environ[name]
    sys.stdout.write("waiting " + value[:4])
    sys.stdout.flush()
    time.sleep(0.5)
    sys.stdout.write(" done\\n")
    return "ok"

def slow_split(name):
    value = os.environ[name]
    sys.stdout.write("slow:" + value[:6])
    sys.stdout.flush()
    time.sleep(0.5)
    sys.stdout.write(value[6:] + "\\n")
    sys.stdout.flush()
    return "ok"

def shout():
    print("nothing secret here", flush=True)
    return "ok"
"""


class RedactorTests(unittest.TestCase):
    def test_text_bytes_and_held_back_prefixes(self):
        r = kr.Redactor(["abcdefgh-ij", "", "xyzxyzxy", "abcdefgh"])
        self.assertEqual(r.text("1 abcdefgh-ij 2 xyzxyzxy abcdefgh"), "1 <redacted> 2 <redacted> <redacted>")
        self.assertEqual(r.data(b"<abcdefgh-ij>"), b"<<redacted>>")
        self.assertEqual(r.held_back(b"hello ab"), 2)
        self.assertEqual(r.held_back(b"hello xy"), 2)
        self.assertEqual(r.held_back(b"hello"), 0)
        self.assertFalse(kr.Redactor(["", None]))
        self.assertEqual(kr.Redactor.from_spec({"secret_names": ["A", "B"]}, {"A": "one-long-value"}).values,
                         ["one-long-value"])

    def test_values_below_the_floor_are_left_alone(self):
        r = kr.Redactor(["k", "1234567"])
        self.assertFalse(r)
        self.assertEqual(r.text("[kinetic] 1234567"), "[kinetic] 1234567")
        self.assertEqual(r.data(b"[kinetic]"), b"[kinetic]")
        self.assertEqual(kr.Redactor(["\u00e9" * kr.MIN_REDACTED_CHARS]).text("\u00e9" * 8), "<redacted>")


class RedactionEndToEndTests(RunnerTestCase):
    def run_secret_job(self, function, names=("API_TOKEN",)):
        return self.run_job({"work.py": WORK}, function_entry(function), args=["API_TOKEN"],
                            env_names=["API_TOKEN"], secret_names=list(names),
                            env={"API_TOKEN": SECRET})

    def test_secret_values_are_redacted_everywhere_the_job_reports(self):
        run = self.run_secret_job("leak")
        error = self.assertFailed(run, "execute", "RuntimeError", ["cannot use token <redacted>"])
        self.assertNotIn(SECRET, error["message"] + error["traceback"])
        self.assertIn("<redacted>", error["traceback"])
        self.assertNotIn(SECRET, run.stdout + run.stderr, run)
        for line in ("stdout has <redacted>", "raw fd write <redacted>", "child says <redacted>",
                     "<redacted> end"):
            self.assertIn(line, run.stdout, run)
        self.assertIn("stderr has <redacted>", run.stderr, run)
        self.assertIn("cannot use token <redacted>", run.stderr, run)

    def test_held_back_output_is_written_after_a_pause(self):
        run = self.run_secret_job("quiet_prefix")
        self.assertSucceeded(run, "ok")
        self.assertIn("waiting " + SECRET[:4] + " done", run.stdout)

    def test_a_secret_split_over_a_pause_is_redacted_in_every_copy(self):
        # The pause is longer than the hold window: the start of the secret
        # must stay held, in the output and in the stored log chunks alike.
        logs = os.path.join(self.store, "logs", "host-0")
        spec = self.spec({"work.py": WORK}, function_entry("slow_split"), args=["API_TOKEN"],
                         env_names=["API_TOKEN"], secret_names=["API_TOKEN"],
                         log_uris=[file_uri(logs)] + [None] * (WORKER_HOSTS - 1))
        run = self.run_runner(self.write_spec(spec), env={"API_TOKEN": SECRET})
        self.assertSucceeded(run, "ok")
        self.assertIn("slow:<redacted>\n", run.stdout)
        self.assertNotIn(SECRET[:6], run.stdout + run.stderr)
        stored = ""
        for name in sorted(os.listdir(logs)):
            with open(os.path.join(logs, name), encoding="utf-8") as f:
                stored += f.read()
        # (the runner's own stderr lines may land between "slow:" and the rest)
        self.assertIn("slow:", stored)
        self.assertIn("<redacted>\n", stored)
        self.assertNotIn(SECRET[:6], stored)

    def test_captured_values_not_named_secret_are_left_alone(self):
        run = self.run_secret_job("leak", names=())
        self.assertEqual(run.returncode, 1)
        self.assertIn(SECRET, run.stdout)


if __name__ == "__main__":
    unittest.main()
