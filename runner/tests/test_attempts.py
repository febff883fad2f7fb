"""The attempt number (KINETIC_ATTEMPT): claimed under spec.starts_uri by
creating a marker only if absent, on a directory store and on GCS (the fake
XML API of test_gcs, which answers 412 as GCS does), never the same number
twice, even for runs that claim at once."""

import json
import os
import threading
import unittest

from runner import kinetic_runner as kr
from runner.tests.support import JOB_ID, RunnerTestCase, file_uri, function_entry
from runner.tests.test_gcs import BUCKET, FakeGcs

WORK = """\
import os

def attempt():
    return os.environ["KINETIC_ATTEMPT"]
"""


def claim_all(storage, prefix, runs):
    """``runs`` runs claiming under ``prefix`` at once; their numbers."""
    numbers = [None] * runs
    errors = []
    barrier = threading.Barrier(runs)

    def one(i):
        try:
            barrier.wait()
            numbers[i] = kr.claim_attempt(storage, prefix, "pod-%d" % i)
        except Exception as err:  # noqa: BLE001 - reported by the test
            errors.append(err)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return numbers, errors


class DirectoryStoreClaims(RunnerTestCase):
    def prefix(self):
        return file_uri(os.path.join(self.store, "starts"))

    def markers(self):
        directory = os.path.join(self.store, "starts")
        return sorted(os.listdir(directory)) if os.path.isdir(directory) else []

    def test_runs_number_on_from_the_markers_there(self):
        storage = kr.Storage({})
        self.assertEqual([kr.claim_attempt(storage, self.prefix(), "pod-%d" % i) for i in range(3)], [1, 2, 3])
        self.assertEqual(self.markers(), ["00000001", "00000002", "00000003"])
        with open(os.path.join(self.store, "starts", "00000002")) as f:
            self.assertEqual(json.load(f)["pod"], "pod-1")
        # What is not a marker does not count.
        with open(os.path.join(self.store, "starts", "00000009.123.part"), "w") as f:
            f.write("{}")
        self.assertEqual(kr.claim_attempt(storage, self.prefix(), "pod-3"), 4)

    def test_runs_claiming_at_once_get_distinct_numbers(self):
        numbers, errors = claim_all(kr.Storage({}), self.prefix(), 12)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(numbers), list(range(1, 13)))
        self.assertEqual(len(self.markers()), 12)

    def test_create_is_refused_when_the_object_exists(self):
        storage = kr.Storage({})
        uri = file_uri(os.path.join(self.store, "x"))
        self.assertTrue(storage.create_bytes(uri, b"first"))
        self.assertFalse(storage.create_bytes(uri, b"second"))
        self.assertEqual(storage.read_bytes(uri), b"first")
        self.assertEqual(sorted(os.listdir(self.store)), ["x"], "no partial file left")


class GcsClaims(unittest.TestCase):
    def setUp(self):
        self.gcs = FakeGcs(page_size=2)
        self.addCleanup(self.gcs.close)
        self.storage = kr.Storage({}, kr.Gcs(self.gcs.url, None, kr.Retrying(attempts=3, base_delay=0)))
        self.prefix = "gs://%s/%s/starts" % (BUCKET, JOB_ID)

    def markers(self):
        return sorted(n for (b, n) in self.gcs.objects if n.startswith(JOB_ID + "/starts/"))

    def test_create_only_if_absent_is_a_generation_precondition(self):
        uri = "gs://%s/o" % BUCKET
        self.assertTrue(self.storage.create_bytes(uri, b"first"))
        self.assertFalse(self.storage.create_bytes(uri, b"second"))
        self.assertEqual(self.gcs.objects[(BUCKET, "o")], b"first")
        puts = self.gcs.calls("PUT", BUCKET, "o")
        self.assertEqual(len(puts), 2, "a 412 is not retried")

    def test_runs_claiming_at_once_get_distinct_numbers(self):
        self.gcs.put(BUCKET, JOB_ID + "/starts/00000001", json.dumps({"pod": "old", "run": "r"}))
        numbers, errors = claim_all(self.storage, self.prefix, 8)
        self.assertEqual(errors, [])
        self.assertEqual(sorted(numbers), list(range(2, 10)))
        self.assertEqual(len(self.markers()), 9)

    def test_a_create_whose_answer_was_lost_keeps_its_number(self):
        # The marker lands, the answer is lost (503); the retried create is
        # refused (412) and the marker read back is this run's own.
        self.gcs.lose_answer(BUCKET, JOB_ID + "/starts/00000001", 503)
        self.assertEqual(kr.claim_attempt(self.storage, self.prefix, "pod-a"), 1)
        self.assertEqual(self.markers(), [JOB_ID + "/starts/00000001"])
        self.assertEqual(kr.claim_attempt(self.storage, self.prefix, "pod-b"), 2)

    def test_a_store_that_fails_fails_the_claim(self):
        self.gcs.fail("PUT", BUCKET, JOB_ID + "/starts/00000001", 403)
        with self.assertRaises(kr.StorageError):
            kr.claim_attempt(self.storage, self.prefix, "pod-a")


class AttemptOfARun(RunnerTestCase):
    def starts(self):
        return file_uri(os.path.join(self.store, "starts"))

    def test_each_run_of_the_job_sees_its_attempt(self):
        spec = self.write_spec(self.spec({"work.py": WORK}, function_entry("attempt"), starts_uri=self.starts()))
        first = self.run_runner(spec, env={"KINETIC_POD_NAME": "kinetic-job-0a1b2c3d-abcde"})
        self.assertSucceeded(first, "1")
        self.assertIn("attempt 1 (claimed under", first.stderr)
        second = self.run_runner(spec, env={"KINETIC_POD_NAME": "kinetic-job-0a1b2c3d-fghij"})
        self.assertSucceeded(second, "2")
        pods = []
        for name in sorted(os.listdir(os.path.join(self.store, "starts"))):
            with open(os.path.join(self.store, "starts", name)) as f:
                pods.append(json.load(f)["pod"])
        self.assertEqual(pods, ["kinetic-job-0a1b2c3d-abcde", "kinetic-job-0a1b2c3d-fghij"])

    def test_the_backends_number_wins_and_a_captured_one_does_not(self):
        spec = self.spec({"work.py": WORK}, function_entry("attempt"), starts_uri=self.starts())
        run = self.run_runner(self.write_spec(spec), env={"KINETIC_ATTEMPT": "3"})
        self.assertSucceeded(run, "3")
        self.assertFalse(os.path.exists(os.path.join(self.store, "starts")), "no marker")
        spec["env_names"] = ["KINETIC_ATTEMPT"]
        run = self.run_runner(self.write_spec(spec), env={"KINETIC_ATTEMPT": "7"})
        self.assertSucceeded(run, "1")

    def test_without_starts_uri_the_job_is_attempt_1(self):
        run = self.run_job({"work.py": WORK}, function_entry("attempt"))
        self.assertSucceeded(run, "1")

    def test_only_host_0_of_a_slice_claims(self):
        spec = kr.Spec(self.spec({"work.py": WORK}, function_entry("attempt"), starts_uri=self.starts()))
        storage = kr.Storage({})
        self.assertEqual(kr.resolve_attempt(spec, storage, {}, 1)[0], 1)
        self.assertFalse(os.path.exists(os.path.join(self.store, "starts")))
        self.assertEqual(kr.resolve_attempt(spec, storage, {}, 0)[0], 1)
        self.assertEqual(kr.resolve_attempt(spec, storage, {}, 0)[0], 2)

    def test_a_batch_retry_numbers_on_from_its_inputs_earlier_runs(self):
        # A batch input's second attempt (a job of its own) after one run:
        # the backend's number and the claimed one both count on from it.
        spec = self.spec({"work.py": WORK}, function_entry("attempt"), starts_uri=self.starts())
        spec["attempt_offset"] = 1
        self.assertSucceeded(self.run_runner(self.write_spec(spec)), "2")
        spec["attempt_offset"] = 2
        self.assertSucceeded(self.run_runner(self.write_spec(spec), env={"KINETIC_ATTEMPT": "1"}), "3")
        for bad in (-1, "1", True, 1.5):
            spec["attempt_offset"] = bad
            run = self.run_runner(self.write_spec(spec))
            self.assertFailed(run, "startup", "RunnerError", ["spec.attempt_offset"])

    def test_bad_values_fail_startup(self):
        run = self.run_job({"work.py": WORK}, function_entry("attempt"), env={"KINETIC_ATTEMPT": "zero"})
        self.assertFailed(run, "startup", "RunnerError", ["KINETIC_ATTEMPT='zero'"])
        run = self.run_job({"work.py": WORK}, function_entry("attempt"), starts_uri=7)
        self.assertFailed(run, "startup", "RunnerError", ["spec.starts_uri"])


if __name__ == "__main__":
    unittest.main()
