"""A full disk (issue 25.9): the runner's stderr and its result's storage
raise ENOSPC, simulated by patching the writes in the runner's process; the
failure is still reported in a result.json, never a crash that leaves none."""

import json
import os
import unittest

from runner.tests.support import RUNNER, RunnerTestCase, function_entry

ERRS = {"errs.py": "def builtin():\n    raise ValueError('bad input')\n"}

# Runs the runner's main() with the real stderr full and, when
# KINETIC_TEST_FULL_ABOVE is set, the result storage full for any write
# larger than that many bytes.
FULL_DISK = """\
import errno, os, sys
sys.path.insert(0, %r)
import kinetic_runner


class Full:
    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass  # nothing is held back: every write failed


sys.stderr = sys.__stderr__ = Full()
limit = os.environ.get("KINETIC_TEST_FULL_ABOVE")
if limit:
    write_partial = kinetic_runner._write_partial

    def small_only(path, data):
        if len(data) > int(limit):
            with open(path + ".part-tried", "wb"):
                pass
            raise OSError(errno.ENOSPC, "No space left on device")
        return write_partial(path, data)

    kinetic_runner._write_partial = small_only
sys.exit(kinetic_runner.main(sys.argv[1:]))
""" % os.path.dirname(RUNNER)


class FullDiskTests(RunnerTestCase):
    def run_full(self, env=None):
        spec_uri = self.write_spec(self.spec(ERRS, function_entry("builtin", module="errs")))
        # `python -u -c CODE RUNNER --spec …`: CODE sees the runner's arguments after RUNNER.
        argv_fix = ["-c", FULL_DISK.replace("main(sys.argv[1:])", "main(sys.argv[2:])")]
        return self.run_runner(spec_uri, env=env, python_flags=argv_fix)

    def test_a_full_stderr_does_not_keep_the_failure_result_from_being_written(self):
        run = self.run_full()
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(run.stderr, "", run)
        error = run.result["error"]
        self.assertEqual((error["phase"], error["type"], error["message"]), ("execute", "ValueError", "bad input"))
        self.assertIn("raise ValueError('bad input')", error["traceback"])

    def test_a_result_too_large_for_the_disk_is_written_without_its_traceback(self):
        run = self.run_full({"KINETIC_TEST_FULL_ABOVE": "300"})
        self.assertEqual(run.returncode, 1, run)
        result = run.result
        self.assertIsNotNone(result, run)
        self.assertLessEqual(len(json.dumps(result)), 300)
        error = result["error"]
        self.assertEqual((error["phase"], error["type"], error["message"]), ("execute", "ValueError", "bad input"))
        self.assertIn("traceback not kept", error["traceback"])
        self.assertIn("No space left on device", error["traceback"])
        # The full document was tried first; no partial file is left behind.
        names = os.listdir(self.store)
        self.assertIn("result.json.part-tried", names)
        self.assertEqual([n for n in names if n.endswith(".part")], [])


if __name__ == "__main__":
    unittest.main()
