"""The job's output copied to spec.log_uris while it runs: numbered chunks,
the last one marked .end, redacted, appended to by a retried run, and read
from the store while the job is still running."""

import os
import subprocess
import time
import unittest

from runner import kinetic_runner as kr
from runner.tests import support
from runner.tests.support import RunnerTestCase, file_uri, function_entry

SECRET = "tok-logs-5e1d9b07"

WORK = """\
import os, subprocess, sys, time

def chatty(n):
    for i in range(n):
        print("line %d" % i, flush=True)
    print("secret is " + os.environ["API_TOKEN"], flush=True)
    subprocess.run([sys.executable, "-c", "print('from a child')"], check=True)
    print("to stderr", file=sys.stderr, flush=True)
    return n

def split_print():
    os.write(1, b"first half ")
    time.sleep(0.02)
    os.write(2, b"an error line\\n")
    time.sleep(0.02)
    os.write(1, b"second half\\n")
    return 0

def slow(path):
    print("first line", flush=True)
    while not os.path.exists(path):
        time.sleep(0.02)
    print("second line", flush=True)
    return 1
"""


def chunks(directory):
    if not os.path.isdir(directory):
        return []
    return sorted(os.listdir(directory))


def joined(directory):
    out = b""
    for name in chunks(directory):
        with open(os.path.join(directory, name), "rb") as f:
            out += f.read()
    return out.decode()


class StoredLogTests(RunnerTestCase):
    def logs_dir(self, host=0):
        return os.path.join(self.store, "logs", "host-%d" % host)

    def log_spec(self, entry, **fields):
        return self.spec({"work.py": WORK}, entry,
                         log_uris=[file_uri(self.logs_dir(h)) for h in range(support.WORKER_HOSTS)], **fields)

    def test_output_is_copied_redacted_and_ends_with_an_end_chunk(self):
        spec = self.log_spec(function_entry("chatty"), args=[3], env_names=["API_TOKEN"],
                             secret_names=["API_TOKEN"])
        run = self.run_runner(self.write_spec(spec), env={"API_TOKEN": SECRET})
        self.assertSucceeded(run, 3)
        names = chunks(self.logs_dir())
        self.assertTrue(names and names[-1].endswith(".end"), names)
        self.assertTrue(all(kr.LOG_CHUNK_RE.match(n) for n in names), names)
        text = joined(self.logs_dir())
        for line in ("line 0", "line 2", "secret is <redacted>", "from a child", "to stderr",
                     "[kinetic] startup: job", "[kinetic] result upload: wrote"):
            self.assertIn(line, text)
        self.assertNotIn(SECRET, text)
        # What the pod log shows is what the store holds.
        self.assertIn("line 2", run.stdout)
        self.assertIn("to stderr", run.stderr)

    def test_a_line_written_in_pieces_is_not_cut_by_the_other_stream(self):
        run = self.run_runner(self.write_spec(self.log_spec(function_entry("split_print"))))
        self.assertSucceeded(run, 0)
        lines = joined(self.logs_dir()).splitlines()
        self.assertIn("first half second half", lines)
        self.assertIn("an error line", lines)

    def test_a_retried_run_appends_after_the_first(self):
        spec_uri = self.write_spec(self.log_spec(function_entry("chatty"), args=[1], env_names=["API_TOKEN"]))
        self.run_runner(spec_uri, env={"API_TOKEN": "x"})
        first = chunks(self.logs_dir())
        self.run_runner(spec_uri, env={"API_TOKEN": "x"})
        both = chunks(self.logs_dir())
        self.assertEqual(both[:len(first)], first)
        self.assertGreater(len(both), len(first))
        self.assertEqual(joined(self.logs_dir()).count("line 0"), 2)

    def test_each_host_writes_under_its_own_prefix(self):
        spec_uri = self.write_spec(self.log_spec(function_entry("chatty"), args=[1], env_names=["API_TOKEN"]))
        self.run_runner(spec_uri, env={"API_TOKEN": "x", "TPU_WORKER_ID": "2"})
        self.assertEqual(chunks(self.logs_dir(0)), [])
        self.assertIn("line 0", joined(self.logs_dir(2)))

    def test_without_log_uris_nothing_is_copied(self):
        run = self.run_job({"work.py": WORK}, function_entry("chatty"), args=[1], env_names=["API_TOKEN"],
                           env={"API_TOKEN": "x"})
        self.assertSucceeded(run, 1)
        self.assertFalse(os.path.exists(os.path.join(self.store, "logs")))

    def test_with_log_copy_off_nothing_is_copied_and_output_stays_redacted(self):
        spec = self.log_spec(function_entry("chatty"), args=[3], env_names=["API_TOKEN"],
                             secret_names=["API_TOKEN"])
        run = self.run_runner(self.write_spec(spec), env={"API_TOKEN": SECRET}, extra_args=["--log-copy", "off"])
        self.assertSucceeded(run, 3)
        self.assertEqual(chunks(self.logs_dir()), [])
        # The output the backend keeps (the process's own streams) is still
        # redacted.
        self.assertIn("secret is <redacted>", run.stdout)
        self.assertNotIn(SECRET, run.stdout + run.stderr)

    def test_log_copy_takes_on_or_off_only(self):
        spec_uri = self.write_spec(self.log_spec(function_entry("chatty"), args=[1], env_names=["API_TOKEN"]))
        run = self.run_runner(spec_uri, env={"API_TOKEN": "x"}, extra_args=["--log-copy", "later"])
        self.assertEqual(run.returncode, kr.EXIT_BAD_INVOCATION, run)
        self.assertIn("bad invocation", run.stderr)
        self.assertIn("--log-copy", run.stderr)
        self.assertEqual(chunks(self.logs_dir()), [])

    def test_output_is_readable_from_the_store_while_the_job_runs(self):
        release = self.path("release")
        spec_uri = self.write_spec(self.log_spec(function_entry("slow"), args=[release]))
        env = {k: v for k, v in os.environ.items() if not k.startswith("KINETIC_") and k not in support._SCRUBBED}
        proc = subprocess.Popen([support.PYTHON, "-u", support.RUNNER, "--spec", spec_uri, "--workdir",
                                 self.workdir, "--mount-root", self.mount_root], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 30
            while "first line" not in joined(self.logs_dir()):
                self.assertLess(time.monotonic(), deadline, "the first line never reached the store")
                self.assertIsNone(proc.poll())
                time.sleep(0.05)
            self.assertFalse(any(n.endswith(".end") for n in chunks(self.logs_dir())))
        finally:
            open(release, "w").close()
            proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0)
        self.assertIn("second line", joined(self.logs_dir()))


class UploaderTests(unittest.TestCase):
    def test_a_failed_copy_keeps_its_bytes_for_the_next(self):
        class Flaky:
            def __init__(self):
                self.fail = True
                self.objects = {}

            def write_bytes(self, uri, data, content_type):
                if self.fail:
                    raise kr.StorageError("unavailable")
                self.objects[uri] = data

        store = Flaky()
        uploader = kr.LogUploader(store, "gs://b/j/logs/host-0", intervals=((None, 0.01),))
        uploader.append(b"kept\n")
        time.sleep(0.1)
        self.assertEqual(store.objects, {})
        store.fail = False
        uploader.append(b"more\n")
        self.assertTrue(uploader.close())
        self.assertEqual(b"".join(store.objects[k] for k in sorted(store.objects)), b"kept\nmore\n")
        self.assertTrue(sorted(store.objects)[-1].endswith(".end"))
        self.assertEqual(uploader.copied_bytes, 10)

    def test_a_fresh_job_numbers_its_chunks_from_0_without_listing(self):
        class Store:
            def __init__(self):
                self.listed = []
                self.objects = {}

            def list_names(self, uri):
                self.listed.append(uri)
                return [uri + "00000000"]

            def write_bytes(self, uri, data, content_type):
                self.objects[uri] = data

        spec = {"log_uris": ["gs://b/j/logs/host-0"]}
        for fresh, first in ((False, "gs://b/j/logs/host-0/00000001.end"),
                             (True, "gs://b/j/logs/host-0/00000000.end")):
            store = Store()
            uploader = kr.start_log_upload(spec, store, {}, fresh)
            uploader.append(b"x\n")
            self.assertTrue(uploader.close())
            self.assertEqual(list(store.objects), [first])
            self.assertEqual(len(store.listed), 0 if fresh else 1)

    def test_intervals_grow_with_the_run(self):
        now = [0.0]
        uploader = kr.LogUploader(None, "p", clock=lambda: now[0])
        self.assertEqual(uploader.interval(), 1.0)
        now[0] = 1000.0
        self.assertEqual(uploader.interval(), 5.0)
        now[0] = 7200.0
        self.assertEqual(uploader.interval(), 15.0)
        uploader.closing = True
        with uploader.lock:
            uploader.wake.notify()


if __name__ == "__main__":
    unittest.main()
