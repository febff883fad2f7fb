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

def flaky(x):
    attempt = int(os.environ["KINETIC_ATTEMPT"])
    print("input %s on attempt %s in %d" % (x, attempt, os.getpid()))
    if x == 1 and attempt == 1:
        raise ValueError("input 1 fails once")
    if x == 2 and attempt == 1:
        os._exit(3)
    if x == 4:
        raise ValueError("input 4 always fails")
    return {"value": 2 * x, "attempt": attempt, "pid": os.getpid(), "parent": os.getppid()}
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


class Batches(RunnerTestCase):
    """What the index and block tests share: a batch in the store, run."""

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



class IndexMode(Batches):
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


class BlockMode(Batches):
    """Block mode: one pod runs a block of inputs, each attempt in a fork
    of the interpreter that imported the function once, retried there,
    each start and end told by a marker in the block's folder."""

    def blocks(self, calls, block_size=3, retries=1, fail_fast=False, function="flaky"):
        root = os.path.join(self.tmp, "store")
        uri = self.batch(calls, chunk_size=2, function=function, block_size=block_size, retries=retries,
                         fail_fast=fail_fast, blocks_uri=file_uri(os.path.join(root, "_groups", GROUP, "blocks")),
                         stop_uri=file_uri(os.path.join(root, "_groups", GROUP, "stopping")))
        return uri

    def markers(self, block):
        folder = os.path.join(self.tmp, "store", "_groups", GROUP, "blocks", "%08d" % block)
        if not os.path.isdir(folder):
            return []
        found = [(kr.parse_marker(n), n.split(".", 4)[4]) for n in os.listdir(folder)]
        # Each input's attempts in order, each start before its end.
        return sorted(found, key=lambda f: (f[0][0], f[0][1], f[0][2] is not None))

    def result(self, index, attempt):
        text = self.child_file(kr.child_job_id(GROUP, index, attempt), "result.json")
        return None if text is None else json.loads(text)

    def test_a_block_runs_its_inputs_in_forks_of_one_worker_and_retries_each_alone(self):
        uri = self.blocks([{"args": [i]} for i in range(5)])
        run = self.run_index(uri, 0, failures=None)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual([m for m, _ in self.markers(0)], [
            (0, 1, None), (0, 1, 0),
            (1, 1, None), (1, 1, 1), (1, 2, None), (1, 2, 0),
            (2, 1, None), (2, 1, 3), (2, 2, None), (2, 2, 0),
        ])
        values = {i: self.result(i, a)["value"] for i, a in ((0, 1), (1, 2), (2, 2))}
        self.assertEqual({i: (v["value"], v["attempt"]) for i, v in values.items()},
                         {0: (0, 1), 1: (2, 2), 2: (4, 2)})
        # One worker: each input's fork has the same parent, and a fork each.
        self.assertEqual(len({v["parent"] for v in values.values()}), 1, values)
        self.assertEqual(len({v["pid"] for v in values.values()}), 3, values)
        self.assertIs(self.result(1, 1)["success"], False)
        self.assertIsNone(self.result(2, 1), "the fork that died wrote no result")
        # Each attempt is its child: its own log and record.
        job = kr.child_job_id(GROUP, 1, 2)
        logs = os.listdir(os.path.join(self.tmp, "store", job, "logs", "host-0"))
        text = "".join(self.child_file(job, "logs/host-0/" + n) for n in sorted(logs))
        self.assertIn("input 1 on attempt 2", text)
        self.assertNotIn("input 0", text)
        self.assertEqual(json.loads(self.child_file(job, "handle.json"))["group_index"], 1)
        # The last block is short; an input that fails for good ends there.
        run = self.run_index(uri, 1)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual([m for m, _ in self.markers(1)],
                         [(3, 1, None), (3, 1, 0), (4, 1, None), (4, 1, 1), (4, 2, None), (4, 2, 1)])
        run = self.run_index(uri, 2)
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("JOB_COMPLETION_INDEX=2, but the batch has 5 inputs in blocks of 3", run.stderr)

    def test_a_pod_run_again_skips_what_ended_and_counts_the_lost_attempt(self):
        uri = self.blocks([{"args": [i]} for i in (0, 3, 5)], block_size=3, retries=1)
        folder = os.path.join(self.tmp, "store", "_groups", GROUP, "blocks", "00000000")
        os.makedirs(folder)
        # The last pod ran input 0, and died in input 1's first attempt.
        for name in ("00000000.001.start.1.old", "00000000.001.exit-0.2.old", "00000001.001.start.3.old"):
            open(os.path.join(folder, name), "w").close()
        run = self.run_index(uri, 0, failures=1)
        self.assertEqual(run.returncode, 0, run)
        got = [m for m, pod in self.markers(0) if pod != "old"]
        self.assertEqual(got, [(1, 2, None), (1, 2, 0), (2, 1, None), (2, 1, 0)])
        self.assertEqual(self.result(1, 2)["value"]["attempt"], 2)
        self.assertIsNone(self.result(0, 1), "input 0 ended before: not run again")

    def test_the_stop_marker_ends_the_block_and_fail_fast_writes_it(self):
        uri = self.blocks([{"args": [i]} for i in (0, 4, 0, 0)], block_size=2, retries=0, fail_fast=True)
        run = self.run_index(uri, 0)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual([m for m, _ in self.markers(0)], [(0, 1, None), (0, 1, 0), (1, 1, None), (1, 1, 1)])
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "store", "_groups", GROUP, "stopping")))
        run = self.run_index(uri, 1)
        self.assertEqual(run.returncode, 0, run)
        self.assertIn("the batch stops starting inputs", run.stderr)
        self.assertEqual(self.markers(1), [])

    def test_marker_names_are_the_rust_ones(self):
        self.assertEqual(kr.marker_name(7, 2, "exit-1", 5, "p-1"), "00000007.002.exit-1.5.p-1")
        self.assertEqual(kr.parse_marker("00000007.002.exit-1.5.p.1"), (7, 2, 1))
        self.assertEqual(kr.parse_marker("00000007.002.start.5.p"), (7, 2, None))
        for bad in ("stop", "7.002.start.5.p", "00000007.000.start.5.p", "00000007.002.exit-x.5.p"):
            self.assertIsNone(kr.parse_marker(bad), bad)

    def test_a_batch_in_blocks_without_its_folders_is_refused(self):
        uri = self.batch([{"args": [0]}], function="flaky", block_size=2)
        run = self.run_index(uri, 0)
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("a batch in blocks needs blocks_uri", run.stderr)
