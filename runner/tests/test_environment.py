"""Captured variables, KINETIC_* variables, host index rules and worker
result naming."""

import json
import os
import unittest
from unittest import mock

from runner import kinetic_runner as kr
from runner.kinetic_runner import environment
from runner.tests.support import RunnerTestCase, data_ref, file_uri, function_entry

SENTINEL = "s3cr3t-SENTINEL-value-7f1e"

WORK = """\
import os

def kinetic_env():
    return {k: v for k, v in os.environ.items() if k.startswith(("KINETIC_", "SKYPILOT_"))}

def secret_length(name):
    return len(os.environ[name])

def fail():
    raise RuntimeError("host failed")

def value():
    return float("nan")  # a non-leader never serialises its value
"""


def _raise(name):
    raise OSError("%s does not resolve" % name)


class CapturedEnvTests(RunnerTestCase):
    def assertNoSentinel(self, run):
        for text in (run.stdout, run.stderr, json.dumps(run.result)):
            self.assertNotIn(SENTINEL, text)

    def test_missing_names_fail_environment_setup_naming_them_all(self):
        run = self.run_job({"work.py": WORK}, function_entry("secret_length"), args=["API_TOKEN"],
                           env_names=["API_TOKEN", "WANDB_API_KEY", "HF_TOKEN"],
                           env={"API_TOKEN": SENTINEL})
        error = self.assertFailed(run, "environment setup", "RunnerError", ["WANDB_API_KEY, HF_TOKEN"])
        self.assertNotIn("API_TOKEN", error["message"])
        self.assertNoSentinel(run)

    def test_present_names_reach_the_function_and_are_never_printed(self):
        run = self.run_job({"work.py": WORK}, function_entry("secret_length"), args=["API_TOKEN"],
                           env_names=["API_TOKEN"], env={"API_TOKEN": SENTINEL})
        self.assertSucceeded(run, len(SENTINEL))
        self.assertNoSentinel(run)

    def test_kinetic_variables(self):
        volume = self.path("volume-src")
        os.makedirs(volume)
        cluster = {"accelerator": "v5litepod-16", "num_nodes": 4, "num_gpus_per_node": 0,
                   "num_accelerators_per_node": 4,
                   "node_ips": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"],
                   "cluster_name": "kinetic-cluster", "cloud": "GCP", "region": "us-central2",
                   "zone": "us-central2-b"}
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster,
                           volumes=[{"mount_path": "/data", "data": data_ref(file_uri(volume), mount_path="/data")}],
                           env={"TPU_WORKER_ID": "0"})
        env = run.result["value"]
        info = json.loads(env.pop("KINETIC_CLUSTER_INFO"))
        volumes = json.loads(env.pop("KINETIC_VOLUMES"))
        self.assertEqual(json.loads(env.pop("SKYPILOT_CLUSTER_INFO")), info)
        self.assertEqual(env, {
            "KINETIC_JOB_ID": "job-0a1b2c3d",
            "KINETIC_ATTEMPT": "1",
            "KINETIC_OUTPUT_DIR": "gs://p-kn-c-jobs/outputs/job-0a1b2c3d",
            "KINETIC_NODE_RANK": "0",
            "KINETIC_NUM_NODES": "4",
            "KINETIC_NODE_IPS": "10.0.0.1\n10.0.0.2\n10.0.0.3\n10.0.0.4",
            "KINETIC_NUM_GPUS_PER_NODE": "0",
            "KINETIC_NUM_ACCELERATORS_PER_NODE": "4",
            "KINETIC_TASK_ID": "job-0a1b2c3d",
            "SKYPILOT_NODE_RANK": "0",
            "SKYPILOT_NUM_NODES": "4",
            "SKYPILOT_NODE_IPS": "10.0.0.1\n10.0.0.2\n10.0.0.3\n10.0.0.4",
            "SKYPILOT_NUM_GPUS_PER_NODE": "0",
            "SKYPILOT_TASK_ID": "job-0a1b2c3d",
        })
        self.assertEqual(info, {"cluster_name": "kinetic-cluster", "cloud": "GCP", "region": "us-central2",
                                "zone": "us-central2-b", "job_id": "job-0a1b2c3d", "task_id": "job-0a1b2c3d",
                                "node_rank": 0, "num_nodes": 4, "node_ips": cluster["node_ips"],
                                "num_gpus_per_node": 0, "num_accelerators_per_node": 4,
                                "accelerator": "v5litepod-16"})
        self.assertEqual(volumes, {"/data": self.path("mnt", "data")})

    def test_node_ips_set_by_the_backend_win(self):
        cluster = {"accelerator": "l4", "num_nodes": 2, "num_gpus_per_node": 1, "node_ips": ["10.9.9.9"]}
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster,
                           env={"KINETIC_NODE_IPS": "10.1.0.5\n 10.1.0.6\n"})
        env = run.result["value"]
        self.assertEqual(env["KINETIC_NODE_IPS"], "10.1.0.5\n10.1.0.6")
        self.assertEqual(env["SKYPILOT_NODE_IPS"], "10.1.0.5\n10.1.0.6")
        self.assertEqual(json.loads(env["KINETIC_CLUSTER_INFO"])["node_ips"], ["10.1.0.5", "10.1.0.6"])
        self.assertEqual(env["KINETIC_NUM_GPUS_PER_NODE"], "1")
        # A value the job captured from the client is not the backend's.
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster,
                           env_names=["KINETIC_NODE_IPS"], env={"KINETIC_NODE_IPS": "10.1.0.5"})
        self.assertEqual(run.result["value"]["KINETIC_NODE_IPS"], "10.9.9.9")

    def test_a_local_job_counts_the_devices_it_was_given(self):
        cluster = {"accelerator": "l4-2", "num_nodes": 1, "num_gpus_per_node": 2, "node_ips": [], "cloud": "local"}
        for visible, gpus in (("0,1", "2"), ("3", "1"), ("", "0"), ("0,-1,2", "1")):
            with self.subTest(visible=visible):
                run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster,
                                   env={"CUDA_VISIBLE_DEVICES": visible})
                self.assertEqual(run.result["value"]["KINETIC_NUM_GPUS_PER_NODE"], gpus)
                self.assertEqual(run.result["value"]["SKYPILOT_NUM_GPUS_PER_NODE"], gpus)
        # Not given by the local backend: the accelerator's count.
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=dict(cluster, cloud="GCP"),
                           env={"CUDA_VISIBLE_DEVICES": "0"})
        self.assertEqual(run.result["value"]["KINETIC_NUM_GPUS_PER_NODE"], "2")


class TopologyTests(RunnerTestCase):
    LWS = {"LWS_LEADER_ADDRESS": "keras-pathways-job-1-0.keras-pathways-job-1.default", "LWS_GROUP_SIZE": "4"}

    def test_lws_hosts_are_derived_leader_first(self):
        self.assertEqual(kr.lws_host_addresses(self.LWS), [
            "keras-pathways-job-1-0.keras-pathways-job-1.default",
            "keras-pathways-job-1-0-1.keras-pathways-job-1.default",
            "keras-pathways-job-1-0-2.keras-pathways-job-1.default",
            "keras-pathways-job-1-0-3.keras-pathways-job-1.default",
        ])
        for env in ({}, {"LWS_LEADER_ADDRESS": "a.b.c"}, {"LWS_GROUP_SIZE": "2"},
                    {"LWS_LEADER_ADDRESS": "a.b.c", "LWS_GROUP_SIZE": "zero"},
                    {"LWS_LEADER_ADDRESS": "a.b.c", "LWS_GROUP_SIZE": "0"},
                    {"LWS_LEADER_ADDRESS": "$(LWS_LEADER_ADDRESS)", "LWS_GROUP_SIZE": "2"}):
            with self.subTest(env=env):
                self.assertEqual(kr.lws_host_addresses(env), [])

    def test_every_host_of_a_group_sees_its_rank_and_the_same_addresses(self):
        names = kr.lws_host_addresses(self.LWS)
        table = {name: "10.4.0.%d" % (i + 7) for i, name in enumerate(names)}
        infos = []
        with mock.patch.object(environment, "_lookup", lambda name: table[name] if name in table else _raise(name)):
            for rank in range(4):
                env = dict(self.LWS, LWS_WORKER_INDEX=str(rank))
                infos.append(json.loads(kr.topology_env(self.group_spec(), rank, env)["KINETIC_CLUSTER_INFO"]))
        self.assertEqual([i["node_rank"] for i in infos], [0, 1, 2, 3])
        self.assertEqual({json.dumps(i["node_ips"]) for i in infos},
                         {json.dumps(["10.4.0.7", "10.4.0.8", "10.4.0.9", "10.4.0.10"])})
        self.assertEqual({i["task_id"] for i in infos}, {"job-0a1b2c3d"})
        self.assertEqual({i["num_accelerators_per_node"] for i in infos}, {4})

    def test_names_are_looked_up_again_until_they_all_resolve(self):
        answers = {"a": ["10.0.0.1"], "b": [None, None, "10.0.0.2"]}

        def lookup(name):
            value = answers[name].pop(0) if len(answers[name]) > 1 else answers[name][0]
            if value is None:
                raise OSError("not yet")
            return value
        sleeps = []
        got = kr.resolve_hosts(["a", "b", "10.0.0.3"], lookup=lookup, timeout=60, clock=lambda: 0.0,
                               sleep=sleeps.append)
        self.assertEqual(got, (["10.0.0.1", "10.0.0.2", "10.0.0.3"], []))
        self.assertEqual(sleeps, [0.1, 0.2])

    def test_names_that_never_resolve_stay_names_after_the_timeout(self):
        now = [0.0]

        def sleep(seconds):
            now[0] += seconds
        got = kr.resolve_hosts(["a", "b"], lookup=lambda name: "10.0.0.1" if name == "a" else _raise(name),
                               timeout=5, clock=lambda: now[0], sleep=sleep)
        self.assertEqual(got, (["10.0.0.1", "b"], ["b"]))
        self.assertGreaterEqual(now[0], 5)
        # A lookup that answers something other than an address is no answer.
        self.assertEqual(kr.resolve_hosts(["a"], lookup=lambda name: "a.example", timeout=0),
                         (["a"], ["a"]))
        # A name the system resolver refuses to encode (a label over 63 characters).
        long_name = "a" * 70 + ".b"
        self.assertEqual(kr.resolve_hosts([long_name], timeout=0), ([long_name], [long_name]))

    def group_spec(self, **cluster):
        doc = {"accelerator": "v5litepod-16", "num_nodes": 4, "num_gpus_per_node": 0,
               "num_accelerators_per_node": 4, "node_ips": []}
        doc.update(cluster)
        return kr.Spec({"job_id": "job-0a1b2c3d", "entrypoint": function_entry("value"), "cluster": doc,
                        "context": {"uri": "file:///nonexistent/context.zip", "sha256": "0" * 64}})

    def test_a_spec_without_accelerators_per_node_reads_the_gpus(self):
        cluster = {"accelerator": "l4-2", "num_nodes": 1, "num_gpus_per_node": 2, "node_ips": []}
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster)
        self.assertEqual(run.result["value"]["KINETIC_NUM_ACCELERATORS_PER_NODE"], "2")

    def test_a_host_count_the_addresses_contradict_is_warned_about(self):
        cluster = {"accelerator": "cpu", "num_nodes": 2, "num_gpus_per_node": 0, "node_ips": []}
        run = self.run_job({"work.py": WORK}, function_entry("kinetic_env"), cluster=cluster,
                           env={"KINETIC_NODE_IPS": "10.0.0.1\n10.0.0.2\n10.0.0.3\n10.0.0.4"})
        self.assertIn("4 host addresses for 2 hosts", run.stderr)


class HostIndexTests(unittest.TestCase):
    def test_pinned_cases(self):
        cases = [
            ({}, 0, 0),
            ({"TPU_WORKER_ID": " 2 "}, 2, 0),
            ({"TPU_WORKER_ID": "", "LWS_WORKER_INDEX": "5"}, 5, 0),
            ({"TPU_WORKER_ID": "   ", "LWS_WORKER_INDEX": "5"}, 5, 0),
            ({"TPU_WORKER_ID": "1", "LWS_WORKER_INDEX": "3"}, 1, 0),
            ({"TPU_WORKER_ID": "$(LWS_WORKER_INDEX)", "LWS_WORKER_INDEX": "4"}, 4, 1),
            ({"TPU_WORKER_ID": "worker-2"}, 0, 1),
            ({"TPU_WORKER_ID": "-1"}, 0, 1),
            ({"LWS_WORKER_INDEX": "-1"}, 0, 1),
            ({"TPU_WORKER_ID": "1_0"}, 0, 1),
        ]
        for env, index, warnings in cases:
            with self.subTest(env=env):
                got, messages = kr.host_index_from_env(env)
                self.assertEqual((got, len(messages)), (index, warnings), messages)

    def test_warning_names_the_variable(self):
        _, messages = kr.host_index_from_env({"TPU_WORKER_ID": "worker-2"})
        self.assertIn("TPU_WORKER_ID", messages[0])
        self.assertIn("worker-2", messages[0])

    def test_result_target_comes_from_the_spec(self):
        spec = {"result_uri": "gs://bucket/a/j/result.json",
                "worker_result_uris": ["gs://bucket/a/j/result-worker-1.json", "file:///w/2.json"]}
        self.assertEqual(kr.result_target(spec, 0), "gs://bucket/a/j/result.json")
        self.assertEqual(kr.result_target(spec, 1), "gs://bucket/a/j/result-worker-1.json")
        self.assertEqual(kr.result_target(spec, 2), "file:///w/2.json")
        self.assertIsNone(kr.result_target(spec, 3))
        self.assertIsNone(kr.result_target({"result_uri": "gs://b/j/result.json"}, 1))
        self.assertIsNone(kr.result_target({"result_uri": "x", "worker_result_uris": [7]}, 1))


class WorkerResultTests(RunnerTestCase):
    def test_failing_worker_writes_its_own_result(self):
        run = self.run_job({"work.py": WORK}, function_entry("fail"), env={"TPU_WORKER_ID": "2"})
        error = self.assertFailed(run, "execute", "RuntimeError", ["host failed"], name="result-worker-2.json")
        self.assertEqual(run.read("result-worker-2.json")["host_index"], 2)
        self.assertEqual(run.written(), ["result-worker-2.json"])
        self.assertTrue(error["traceback"])

    def test_worker_setup_failure_also_writes_its_own_result(self):
        run = self.run_job({"work.py": WORK}, function_entry("fail"), env={"LWS_WORKER_INDEX": "3"},
                           env_names=["NOT_THERE"])
        self.assertFailed(run, "environment setup", "RunnerError", ["NOT_THERE"], name="result-worker-3.json")
        self.assertEqual(run.written(), ["result-worker-3.json"])

    def test_succeeding_worker_writes_nothing(self):
        run = self.run_job({"work.py": WORK}, function_entry("value"),
                           env={"TPU_WORKER_ID": "$(LWS_WORKER_INDEX)", "LWS_WORKER_INDEX": "1"})
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(run.written(), [])

    def test_worker_the_spec_names_no_place_for_writes_nothing(self):
        run = self.run_job({"work.py": WORK}, function_entry("fail"), env={"TPU_WORKER_ID": "9"})
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(run.written(), [])
        self.assertIn("names no result URI for host 9", run.stderr)

    def test_leader_with_bad_index_value_warns_and_writes_result_json(self):
        run = self.run_job({"work.py": WORK}, function_entry("secret_length"), args=["HOME"],
                           env={"TPU_WORKER_ID": "worker-2", "HOME": "/root"})
        self.assertSucceeded(run, 5)
        self.assertIn("[kinetic] startup: warning: ignoring TPU_WORKER_ID='worker-2'", run.stderr)


if __name__ == "__main__":
    unittest.main()
