"""gs:// through a fake GCS XML API server (in this file): downloads, result
upload, listing pagination, retries, 404, metadata-server tokens."""

import json
import sys
import threading
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from xml.sax.saxutils import escape

from runner import kinetic_runner as kr
from runner.tests.support import JOB_ID, RunnerTestCase, data_ref, default_plan, function_entry, write_zip, sha256

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


class FakeGcs:
    """A stateful fake of the GCS XML API (and of the metadata token endpoint).

    ``fail(method, bucket, name, *statuses)`` makes the next requests for that
    object answer those statuses first; ``requests`` records
    ``(method, bucket, name, query, authorization)``.
    """

    def __init__(self, page_size=1000):
        self.objects = {}
        # Each object's generation: a new one for every write, as GCS's.
        self.generations = {}
        self.next_generation = 1
        # Writes whose answer is lost after they land: (bucket, name) -> statuses.
        self.lost_answers = {}
        self.page_size = page_size
        self.requests = []
        self.failures = {}
        self.tokens_issued = 0
        self.token_lifetime = 3600
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.handle(self, "GET")

            def do_PUT(self):
                fake.handle(self, "PUT")

            def do_HEAD(self):
                fake.handle(self, "HEAD")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def put(self, bucket, name, data):
        self.objects[(bucket, name)] = data.encode() if isinstance(data, str) else data
        self.generations[(bucket, name)] = self.next_generation
        self.next_generation += 1

    def lose_answer(self, bucket, name, *statuses):
        """The next writes of that object land, then answer those statuses."""
        self.lost_answers.setdefault((bucket, name), []).extend(statuses)

    def fail(self, method, bucket, name, *statuses):
        self.failures.setdefault((method, bucket, name), []).extend(statuses)

    def calls(self, method, bucket, name=None, list_prefix=None):
        return [r for r in self.requests if r[0] == method and r[1] == bucket
                and (name is None or r[2] == name)
                and (list_prefix is None or r[3].get("prefix") == list_prefix)]

    # -- serving

    def handle(self, request, method):
        parts = urllib.parse.urlsplit(request.path)
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        body = b""
        if method == "PUT":
            body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        if parts.path == TOKEN_PATH:
            return self.token(request)
        bucket, _, name = parts.path.lstrip("/").partition("/")
        name = urllib.parse.unquote(name)
        with self.lock:
            self.requests.append((method, bucket, name, query, request.headers.get("Authorization")))
            pending = self.failures.get((method, bucket, name))
            status = pending.pop(0) if pending else None
        if status is not None:
            return self.send(request, status, b"<Error><Code>Injected</Code></Error>")
        if method == "PUT":
            # GCS's precondition: x-goog-if-generation-match must be the
            # object's generation (0: the object must not exist), else 412.
            wanted = request.headers.get("x-goog-if-generation-match")
            with self.lock:
                current = self.generations.get((bucket, name), 0)
                if wanted is not None and int(wanted) != current:
                    return self.send(request, 412, b"<?xml version='1.0' encoding='UTF-8'?><Error>"
                                     b"<Code>PreconditionFailed</Code><Message>At least one of the pre-conditions "
                                     b"you specified did not hold.</Message></Error>", "application/xml")
                self.put(bucket, name, body)
                lost = self.lost_answers.get((bucket, name))
                status = lost.pop(0) if lost else 200
            return self.send(request, status, b"")
        if not name and query.get("list-type") == "2":
            return self.listing(request, bucket, query)
        data = self.objects.get((bucket, name))
        if data is None:
            return self.send(request, 404, b"<Error><Code>NoSuchKey</Code></Error>")
        return self.send(request, 200, data)

    def listing(self, request, bucket, query):
        prefix = query.get("prefix", "")
        after = query.get("continuation-token")
        names = sorted(n for (b, n) in self.objects if b == bucket and n.startswith(prefix))
        if after:
            names = [n for n in names if n > after]
        page, rest = names[:self.page_size], names[self.page_size:]
        xml = ["<?xml version='1.0' encoding='UTF-8'?>",
               "<ListBucketResult xmlns='http://doc.s3.amazonaws.com/2006-03-01'>",
               "<Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount>" % (bucket, escape(prefix), len(page)),
               "<IsTruncated>%s</IsTruncated>" % ("true" if rest else "false")]
        for name in page:
            xml.append("<Contents><Key>%s</Key><Size>%d</Size></Contents>"
                       % (escape(name), len(self.objects[(bucket, name)])))
        if rest:
            xml.append("<NextContinuationToken>%s</NextContinuationToken>" % escape(page[-1]))
        xml.append("</ListBucketResult>")
        self.send(request, 200, "".join(xml).encode(), "application/xml")

    def token(self, request):
        if request.headers.get("Metadata-Flavor") != "Google":
            return self.send(request, 403, b"missing Metadata-Flavor")
        with self.lock:
            self.tokens_issued += 1
            doc = {"access_token": "tok-%d" % self.tokens_issued, "expires_in": self.token_lifetime,
                   "token_type": "Bearer"}
        self.send(request, 200, json.dumps(doc).encode(), "application/json")

    @staticmethod
    def send(request, status, body, content_type="application/octet-stream"):
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(body)))
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(body)


WORK = """\
import os

def main(data, weights, scale=1):
    out = []
    for base, _, files in os.walk(data):
        for f in files:
            full = os.path.join(base, f)
            with open(full) as fh:
                out.append([os.path.relpath(full, data), fh.read()])
    with open(weights) as fh:
        w = fh.read()
    return {"files": sorted(out), "weights": [os.path.basename(weights), w], "scale": scale}

def fail():
    raise RuntimeError("worker broke")
"""

BUCKET = "p-kn-c-jobs"


class GcsJobTests(RunnerTestCase):
    def setUp(self):
        super().setUp()
        self.gcs = FakeGcs(page_size=2)
        self.addCleanup(self.gcs.close)

    def gs(self, name):
        return "gs://%s/%s" % (BUCKET, name)

    def stage(self, files=None, **fields):
        """Puts context.zip and spec.json in the fake bucket; returns the spec URI."""
        local = self.path("context.zip")
        write_zip(local, files or {"work.py": WORK})
        with open(local, "rb") as f:
            self.gcs.put(BUCKET, JOB_ID + "/context.zip", f.read())
        spec = {
            "protocol": 1, "job_id": JOB_ID, "entrypoint": function_entry("main"),
            "args": [], "kwargs": {}, "volumes": [], "env_names": [],
            "output_dir": self.gs("outputs/" + JOB_ID),
            "context": {"uri": self.gs(JOB_ID + "/context.zip"), "sha256": sha256(local)},
            "requirements": None, "plan": default_plan(),
            "result_uri": self.gs(JOB_ID + "/result.json"),
            "worker_result_uris": [self.gs(JOB_ID + "/result-worker-1.json")],
            "cluster": {"accelerator": "cpu", "num_nodes": 1, "num_gpus_per_node": 0, "node_ips": []},
        }
        spec.update(fields)
        self.gcs.put(BUCKET, JOB_ID + "/spec.json", json.dumps(spec))
        return self.gs(JOB_ID + "/spec.json")

    def run_gcs(self, spec_uri, env=None):
        full = {"KINETIC_GCS_ENDPOINT": self.gcs.url}
        full.update(env or {})
        return self.run_runner(spec_uri, env=full)

    def result(self, name="result.json"):
        data = self.gcs.objects.get((BUCKET, JOB_ID + "/" + name))
        return None if data is None else json.loads(data.decode())

    def put_dataset(self):
        for name, text in (("a.csv", "1"), ("b.csv", "2"), ("sub/c.csv", "3"), ("sub/deep/d.csv", "4"),
                           ("e.csv", "5")):
            self.gcs.put(BUCKET, "default/data-cache/h1/" + name, text)
        self.gcs.put(BUCKET, "default/data-cache/h1/", "")          # a folder placeholder: skipped
        self.gcs.put(BUCKET, "default/data-cache/h1/empty/", "")
        self.gcs.put(BUCKET, "default/data-cache/h10/other.csv", "x")  # sibling prefix: not included
        self.gcs.put(BUCKET, "default/data-cache/h2/model.bin", "weights")

    def test_job_runs_from_gcs_with_paginated_data_and_uploads_its_result(self):
        self.put_dataset()
        spec = self.stage(args=[data_ref(self.gs("default/data-cache/h1")),
                                data_ref(self.gs("default/data-cache/h2/model.bin"), is_dir=False)],
                          kwargs={"scale": 2})
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(self.result(), {"protocol": 1, "success": True, "host_index": 0, "value": {
            "files": [["a.csv", "1"], ["b.csv", "2"], ["e.csv", "5"], ["sub/c.csv", "3"], ["sub/deep/d.csv", "4"]],
            "weights": ["model.bin", "weights"],
            "scale": 2,
        }})
        listings = self.gcs.calls("GET", BUCKET, "", list_prefix="default/data-cache/h1/")
        self.assertEqual(len(listings), 4)  # 7 names, 2 per page
        self.assertEqual([bool(r[3].get("continuation-token")) for r in listings], [False, True, True, True])
        self.assertTrue(all(r[4] is None for r in self.gcs.requests))  # no auth with KINETIC_GCS_ENDPOINT

    def test_file_ref_to_one_object_downloads_that_object(self):
        self.put_dataset()
        spec = self.stage(args=[data_ref(self.gs("default/data-cache/h1/sub")),
                                data_ref(self.gs("default/data-cache/h1/e.csv"), is_dir=False)])
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 0, run)
        value = self.result()["value"]
        self.assertEqual(value["files"], [["c.csv", "3"], ["deep/d.csv", "4"]])
        self.assertEqual(value["weights"], ["e.csv", "5"])

    def test_without_a_trailing_slash_the_uri_is_the_object_even_when_a_directory_shares_its_name(self):
        self.gcs.put(BUCKET, "shared/x", "the object")
        self.gcs.put(BUCKET, "shared/x/a.csv", "1")
        spec = self.stage(args=[data_ref(self.gs("shared/x"), is_dir=True),
                                data_ref(self.gs("shared/x"), is_dir=False)])
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 0, run)
        value = self.result()["value"]
        self.assertEqual(value["files"], [["a.csv", "1"]])
        self.assertEqual(value["weights"], ["x", "the object"])

    def test_a_missing_object_is_named_and_a_directory_of_that_name_hinted(self):
        self.gcs.put(BUCKET, "shared/only-dir/a.csv", "1")
        spec = self.stage(args=[data_ref(self.gs("shared/only-dir"), is_dir=False), "x"])
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 1, run)
        error = self.result()["error"]
        self.assertEqual(error["phase"], "data resolve")
        self.assertIn("data %s: no such object" % self.gs("shared/only-dir"), error["message"])
        self.assertIn("end the URI with a slash", error["message"])

    def test_an_empty_directory_is_an_error_naming_the_object_of_that_name(self):
        self.gcs.put(BUCKET, "shared/only-object", "o")
        spec = self.stage(args=[data_ref(self.gs("shared/only-object"), is_dir=True), "x"])
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 1, run)
        error = self.result()["error"]
        self.assertIn("no objects under this directory", error["message"])
        self.assertIn("leave out the trailing slash", error["message"])

    def test_volume_from_gcs_lands_under_the_mount_root(self):
        self.put_dataset()
        volume = {"mount_path": "/data", "data": data_ref(self.gs("default/data-cache/h1"), mount_path="/data")}
        spec = self.stage(args=["/ignored", self.path("mnt", "data", "a.csv")], volumes=[volume],
                          entrypoint=function_entry("main"))
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(self.result()["value"]["weights"], ["a.csv", "1"])
        with open(self.path("mnt", "data", "sub", "deep", "d.csv")) as f:
            self.assertEqual(f.read(), "4")

    def test_transient_errors_are_retried(self):
        self.put_dataset()
        spec = self.stage(args=[data_ref(self.gs("default/data-cache/h2")),
                                data_ref(self.gs("default/data-cache/h2/model.bin"), is_dir=False)])
        self.gcs.fail("GET", BUCKET, JOB_ID + "/context.zip", 503, 503)
        self.gcs.fail("GET", BUCKET, "", 429)
        self.gcs.fail("PUT", BUCKET, JOB_ID + "/result.json", 500)
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 0, run)
        self.assertIs(self.result()["success"], True)
        self.assertEqual(len(self.gcs.calls("GET", BUCKET, JOB_ID + "/context.zip")), 3)
        self.assertEqual(len(self.gcs.calls("PUT", BUCKET, JOB_ID + "/result.json")), 2)

    def test_404_is_not_retried(self):
        spec = self.stage()
        del self.gcs.objects[(BUCKET, JOB_ID + "/context.zip")]
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 1, run)
        error = self.result()["error"]
        self.assertEqual((error["phase"], error["type"]), ("artifact download", "RunnerError"))
        self.assertIn("404", error["message"])
        self.assertEqual(len(self.gcs.calls("GET", BUCKET, JOB_ID + "/context.zip")), 1)

    def test_missing_data_fails_data_resolve(self):
        spec = self.stage(args=[data_ref(self.gs("default/data-cache/nothing"), is_dir=False), "x"])
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 1, run)
        self.assertEqual(self.result()["error"]["phase"], "data resolve")

    def test_data_object_escaping_the_target_is_refused(self):
        self.gcs.put(BUCKET, "default/data-cache/h3/../../../../evil.py", "pwned")
        spec = self.stage(args=[data_ref(self.gs("default/data-cache/h3")), "x"])
        run = self.run_gcs(spec)
        self.assertEqual(self.result()["error"]["phase"], "data resolve", run)
        self.assertIn("refusing data object", self.result()["error"]["message"])

    def test_failing_worker_uploads_its_own_result(self):
        spec = self.stage(entrypoint=function_entry("fail"))
        run = self.run_gcs(spec, env={"TPU_WORKER_ID": "1"})
        self.assertEqual(run.returncode, 1, run)
        self.assertIsNone(self.result())
        worker = self.result("result-worker-1.json")
        self.assertEqual((worker["host_index"], worker["error"]["type"]), (1, "RuntimeError"))

    def test_upload_failure_exits_1(self):
        spec = self.stage(entrypoint=function_entry("fail"))
        self.gcs.fail("PUT", BUCKET, JOB_ID + "/result.json", 403)
        run = self.run_gcs(spec)
        self.assertEqual(run.returncode, 1, run)
        self.assertIn("[kinetic] result upload: cannot write the result", run.stderr)
        self.assertIn("HTTP 403", run.stderr)

    def test_missing_spec_exits_2(self):
        run = self.run_gcs(self.gs("job-absent/spec.json"))
        self.assertEqual(run.returncode, 2, run)
        self.assertEqual(len(self.gcs.calls("PUT", BUCKET)), 0)


class GcsClientTests(unittest.TestCase):
    def setUp(self):
        self.gcs = FakeGcs(page_size=3)
        self.addCleanup(self.gcs.close)
        self.now = [1000.0]

    def client(self, token=None, attempts=5):
        return kr.Gcs(self.gcs.url, token, kr.Retrying(attempts=attempts, base_delay=0))

    def test_gives_up_after_the_configured_attempts(self):
        self.gcs.put("b", "o", "x")
        self.gcs.fail("GET", "b", "o", 503, 503, 503, 503)
        with self.assertRaises(kr.StorageError) as caught:
            self.client(attempts=3).read("b", "o")
        self.assertIn("after 3 attempts", str(caught.exception))
        self.assertEqual(len(self.gcs.calls("GET", "b", "o")), 3)

    def test_connection_errors_are_retried_then_reported(self):
        dead = kr.Gcs("http://127.0.0.1:9", None, kr.Retrying(attempts=2, base_delay=0))
        with self.assertRaises(kr.StorageError) as caught:
            dead.read("b", "o")
        self.assertIn("after 2 attempts", str(caught.exception))

    def test_other_client_errors_are_not_retried(self):
        self.gcs.fail("GET", "b", "o", 403)
        with self.assertRaises(kr.StorageError) as caught:
            self.client().read("b", "o")
        self.assertEqual(caught.exception.status, 403)
        self.assertEqual(len(self.gcs.calls("GET", "b", "o")), 1)

    def test_object_names_are_quoted(self):
        client = self.client()
        name = "dir with space/ünï+code?&#.txt"
        client.upload("b", name, b"data", "text/plain")
        self.assertEqual(self.gcs.objects[("b", name)], b"data")
        self.assertEqual(client.read("b", name), b"data")
        self.assertEqual(list(client.list("b", "dir with space/")), [name])

    def test_listing_follows_continuation_tokens(self):
        for i in range(7):
            self.gcs.put("b", "p/%d" % i, "x")
        self.gcs.put("b", "q/0", "x")
        self.assertEqual(list(self.client().list("b", "p/")), ["p/%d" % i for i in range(7)])
        self.assertEqual(len(self.gcs.calls("GET", "b", "")), 3)

    def token(self):
        host = self.gcs.url[len("http://"):]
        return kr.MetadataToken(host=host, retrying=kr.Retrying(base_delay=0), clock=lambda: self.now[0])

    def test_metadata_token_is_sent_and_cached_until_near_expiry(self):
        self.gcs.put("b", "o", "x")
        client = self.client(self.token())
        client.read("b", "o")
        client.read("b", "o")
        self.assertEqual(self.gcs.tokens_issued, 1)
        self.now[0] += 3600 - 30  # inside the last minute: refresh
        client.read("b", "o")
        self.assertEqual(self.gcs.tokens_issued, 2)
        self.assertEqual([r[4] for r in self.gcs.calls("GET", "b", "o")], ["Bearer tok-1", "Bearer tok-1", "Bearer tok-2"])

    def test_unauthorized_refreshes_the_token_once(self):
        self.gcs.put("b", "o", "x")
        self.gcs.fail("GET", "b", "o", 401)
        client = self.client(self.token())
        self.assertEqual(client.read("b", "o"), b"x")
        self.assertEqual(self.gcs.tokens_issued, 2)
        self.gcs.fail("GET", "b", "o", 401, 401)
        with self.assertRaises(kr.StorageError):
            client.read("b", "o")

    def test_storage_uses_the_endpoint_without_auth_when_configured(self):
        storage = kr.Storage(environ={"KINETIC_GCS_ENDPOINT": self.gcs.url + "/"})
        self.assertEqual(storage.gcs().endpoint, self.gcs.url)
        self.assertIsNone(storage.gcs().token)
        default = kr.Storage(environ={}).gcs()
        self.assertEqual(default.endpoint, "https://storage.googleapis.com")
        self.assertIsInstance(default.token, kr.MetadataToken)


if __name__ == "__main__":
    unittest.main()
