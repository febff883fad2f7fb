"""Index mode (``--batch-spec``): a pod of an Indexed Job runs input
JOB_COMPLETION_INDEX of a batch as that input's child job, named as the
client names children (checked against vectors the Rust function wrote),
at the attempt its failure count says, and writes the child's handle.json,
spec.json, result and log chunks under the child's id."""

import json
import os
import subprocess

from runner import kinetic_runner as kr
from runner.tests.support import PYTHON, RUNNER, Run, RunnerTestCase, file_uri, function_entry

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_job_ids.json")
GROUP = "grp-0a1b2c3d"

WORK = """\
import os, sys

def double(x, bonus=0):
    print("input %s on attempt %s" % (x, os.environ["KINETIC_ATTEMPT"]))
    return {"value": 2 * x + bonus, "attempt": os.environ["KINETIC_ATTEMPT"], "job": os.environ.get("KINETIC_JOB_ID"),
            "JOB_ID": os.environ.get("JOB_ID")}

def dies(x):
    os._exit(3)
"""


class ChildIds(RunnerTestCase):
    def test_child_ids_are_the_rust_ids(self):
        with open(VECTORS, encoding="utf-8") as f:
            vectors = json.load(f)
        self.assertGreater(len(vectors), 20)
        for v in vectors:
            self.assertEqual(kr.child_job_id(v["group_id"], v["index"], v["attempt"]), v["job_id"], v)

    def test_positions_without_a_deterministic_id_are_refused(self):
        for index, attempt in ((1 << 24, 1), (0, 0), (0, 256), (-1, 1)):
            with self.assertRaises(kr.RunnerError):
                kr.child_job_id(GROUP, index, attempt)

    def test_the_attempt_is_one_more_than_the_index_failures(self):
        self.assertEqual(kr.batch_position({"JOB_COMPLETION_INDEX": "7"}), (7, 1))
        self.assertEqual(kr.batch_position({"JOB_COMPLETION_INDEX": "7", "KINETIC_INDEX_FAILURE_COUNT": "2"}),
                         (7, 3))
        # The annotation is absent before a first failure: the downward API gives "".
        self.assertEqual(kr.batch_position({"JOB_COMPLETION_INDEX": "0", "KINETIC_INDEX_FAILURE_COUNT": ""}),
                         (0, 1))
        for bad in ({}, {"JOB_COMPLETION_INDEX": "x"}, {"JOB_COMPLETION_INDEX": "-1"}):
            with self.assertRaises(kr.RunnerError):
                kr.batch_position(bad)


class IndexMode(RunnerTestCase):
    def batch(self, calls, chunk_size=2, **fields):
        """Writes the context, the calls' chunks and batch.json under the store; returns its URI."""
        root = os.path.join(self.tmp, "store")
        child = self.spec({"work.py": WORK}, function_entry(fields.pop("function", "double")))
        for key in ("job_id", "args", "kwargs", "result_uri", "worker_result_uris"):
            child.pop(key)
        calls_dir = os.path.join(root, "_groups", GROUP, "calls")
        os.makedirs(calls_dir)
        for start in range(0, len(calls), chunk_size):
            with open(os.path.join(calls_dir, "%08d.jsonl" % (start // chunk_size)), "w") as f:
                for call in calls[start:start + chunk_size]:
                    f.write(json.dumps(call) + "\n")
        doc = {
            "protocol": 1, "kind": "indexed_batch", "group_id": GROUP, "inputs": len(calls),
            "chunk_size": chunk_size, "calls_uri": file_uri(calls_dir),
            "job_uri": file_uri(root) + "/{job_id}", "child": child,
            "record": {"job_id": "{job_id}", "k8s_name": "kinetic-{job_id}", "backend": "gke", "group_id": GROUP,
                       "group_kind": "map"},
        }
        doc.update(fields)
        path = os.path.join(root, "_groups", GROUP, "batch.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return file_uri(path)

    def child_file(self, job_id, name):
        path = os.path.join(self.tmp, "store", job_id, name)
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return f.read()

    def run_index(self, uri, index, failures=None, dies=False):
        env = {"JOB_COMPLETION_INDEX": str(index)}
        if failures is not None:
            env["KINETIC_INDEX_FAILURE_COUNT"] = str(failures)
        if dies:
            # The process dies with the input: nothing cleans its workdir
            # (a pod's goes with the pod), so the usual check is not made.
            env.update({k: v for k, v in os.environ.items() if k == "PATH"})
            proc = subprocess.run([PYTHON, "-u", RUNNER, "--batch-spec", uri, "--workdir", self.workdir],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  universal_newlines=True, timeout=60)
            return Run(proc, self.store)
        return self.run_runner(None, env=env, extra_args=["--batch-spec", uri])

    def test_each_index_runs_its_input_as_its_child(self):
        calls = [{"args": [i], "kwargs": {"bonus": 100} if i == 2 else {}} for i in range(5)]
        uri = self.batch(calls)
        for index in (0, 2, 4):
            run = self.run_index(uri, index)
            self.assertEqual(run.returncode, 0, run)
            job = kr.child_job_id(GROUP, index, 1)
            result = json.loads(self.child_file(job, "result.json"))
            want = 2 * index + (100 if index == 2 else 0)
            self.assertEqual(result["value"], {"value": want, "attempt": "1", "job": job, "JOB_ID": job}, run)
            record = json.loads(self.child_file(job, "handle.json"))
            self.assertEqual((record["job_id"], record["k8s_name"], record["group_id"], record["group_index"],
                              record["backend"]), (job, "kinetic-" + job, GROUP, index, "gke"))
            spec = json.loads(self.child_file(job, "spec.json"))
            self.assertEqual((spec["job_id"], spec["args"]), (job, [index]))
            logs = os.listdir(os.path.join(self.tmp, "store", job, "logs", "host-0"))
            text = "".join(self.child_file(job, "logs/host-0/" + n) for n in sorted(logs))
            self.assertIn("input %d on attempt 1" % index, text)
        # Only the inputs run have children.
        self.assertIsNone(self.child_file(kr.child_job_id(GROUP, 1, 1), "handle.json"))

    def test_a_failed_index_runs_again_as_the_next_attempts_child(self):
        uri = self.batch([{"args": [i]} for i in range(3)])
        run = self.run_index(uri, 1, failures=2)
        self.assertEqual(run.returncode, 0, run)
        job = kr.child_job_id(GROUP, 1, 3)
        result = json.loads(self.child_file(job, "result.json"))
        self.assertEqual(result["value"]["attempt"], "3")
        self.assertIsNone(self.child_file(kr.child_job_id(GROUP, 1, 1), "result.json"))

    def test_an_input_that_kills_its_process_leaves_its_child_without_a_result(self):
        uri = self.batch([{"args": [0]}], function="dies")
        run = self.run_index(uri, 0, dies=True)
        self.assertEqual(run.returncode, 3, run)
        job = kr.child_job_id(GROUP, 0, 1)
        self.assertIsNotNone(self.child_file(job, "handle.json"))
        self.assertIsNone(self.child_file(job, "result.json"))

    def test_a_bad_batch_spec_or_index_is_a_bad_invocation_naming_it(self):
        uri = self.batch([{"args": [0]}, {"args": [1]}])
        run = self.run_index(uri, 2)
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("JOB_COMPLETION_INDEX=2, but the batch has 2 inputs", run.stderr)
        run = self.run_runner(None, extra_args=["--batch-spec", uri])
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("JOB_COMPLETION_INDEX is not set", run.stderr)

    def test_a_batch_spec_of_another_kind_is_refused(self):
        uri = self.batch([{"args": [0]}], kind="map")
        run = self.run_index(uri, 0)
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("has kind 'map'; expected 'indexed_batch'", run.stderr)
