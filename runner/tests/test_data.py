"""Data references from file:// sources: directories, single files, nesting,
one resolution per URI, volumes under --mount-root, FUSE mount paths."""

import hashlib
import json
import os
import unittest

from runner import kinetic_runner as kr
from runner.tests.support import RunnerTestCase, data_ref, file_uri, function_entry


def cache_entry(root, files, kind="dir"):
    """Writes a data cache entry as the engine does: its files under
    ``{root}/data-cache/{hash}``, then the marker ``{root}/data-markers/{hash}``
    listing them (``files``: name -> bytes, in the content hash's order).
    Returns (entry dir, marker path)."""
    digests = []
    listed = []
    for name, content in files.items():
        digest = hashlib.sha256(name.encode() + b"\0" + content).hexdigest()
        digests.append(digest)
        listed.append({"name": name, "size": len(content), "digest": digest})
    outer = hashlib.sha256(b"dir:" if kind == "dir" else b"file:")
    for d in digests:
        outer.update(bytes.fromhex(d))
    content_hash = outer.hexdigest()
    entry = os.path.join(root, "data-cache", content_hash)
    for name, content in files.items():
        path = os.path.join(entry, *name.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    marker = os.path.join(root, "data-markers", content_hash)
    os.makedirs(os.path.dirname(marker), exist_ok=True)
    with open(marker, "w") as f:
        json.dump({"kinetic_data_marker": 1, "hash": content_hash, "kind": kind, "files": listed}, f)
    return entry, marker


def cached_ref(entry, marker, is_dir=True):
    ref = data_ref(file_uri(entry), is_dir=is_dir)
    ref["cache_marker"] = file_uri(marker)
    return ref

WORK = """\
import os

def listing(path):
    out = []
    for base, _, files in os.walk(path):
        for f in files:
            full = os.path.join(base, f)
            with open(full) as fh:
                out.append([os.path.relpath(full, path), fh.read()])
    return sorted(out)

def read(path):
    with open(path) as f:
        return [os.path.basename(path), f.read()]

def shape(*args, **kwargs):
    def walk(v):
        if isinstance(v, str) and os.path.exists(v):
            return "file:" + os.path.basename(v) if os.path.isfile(v) else "dir"
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v
    return {"args": walk(list(args)), "kwargs": walk(kwargs)}

def same(a, b):
    return [a == b, os.path.isdir(a)]

def paths(*args):
    return list(args)

def volume(name):
    import json
    mounts = json.loads(os.environ["KINETIC_VOLUMES"])
    with open(os.path.join(mounts["/data"], name)) as f:
        return [mounts["/data"], f.read()]
"""


class FileDataTests(RunnerTestCase):
    def setUp(self):
        super().setUp()
        self.dataset = self.path("dataset")
        os.makedirs(os.path.join(self.dataset, "sub", "deep"))
        for rel, text in (("train.csv", "a,b\n"), ("sub/deep/x.txt", "deep")):
            with open(os.path.join(self.dataset, rel), "w") as f:
                f.write(text)
        # An uploaded local file: a cache directory holding the one file.
        self.cached = self.path("data-cache", "hash1")
        os.makedirs(self.cached)
        with open(os.path.join(self.cached, "weights.bin"), "w") as f:
            f.write("w")

    def test_directory_ref_is_copied_preserving_relative_paths(self):
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[data_ref(file_uri(self.dataset))])
        self.assertSucceeded(run, [["sub/deep/x.txt", "deep"], ["train.csv", "a,b\n"]])

    def test_file_ref_to_a_cache_directory_gives_the_single_file(self):
        run = self.run_job({"work.py": WORK}, function_entry("read"),
                           args=[data_ref(file_uri(self.cached), is_dir=False)])
        self.assertSucceeded(run, ["weights.bin", "w"])

    def test_file_ref_to_a_file_gives_that_file(self):
        ref = data_ref(file_uri(os.path.join(self.dataset, "train.csv")), is_dir=False)
        run = self.run_job({"work.py": WORK}, function_entry("read"), args=[ref])
        self.assertSucceeded(run, ["train.csv", "a,b\n"])

    def test_refs_nested_at_any_depth_in_args_and_kwargs(self):
        d = data_ref(file_uri(self.dataset))
        f = data_ref(file_uri(self.cached), is_dir=False)
        run = self.run_job({"work.py": WORK}, function_entry("shape"),
                           args=[[1, {"inputs": [d, {"w": f}]}]],
                           kwargs={"cfg": {"data": d, "n": 3, "plain": {"__data_ref__": False}}})
        self.assertSucceeded(run, {
            "args": [[1, {"inputs": ["dir", {"w": "file:weights.bin"}]}]],
            "kwargs": {"cfg": {"data": "dir", "n": 3, "plain": {"__data_ref__": False}}},
        })

    def test_same_uri_is_resolved_once(self):
        d = data_ref(file_uri(self.dataset))
        run = self.run_job({"work.py": WORK}, function_entry("same"), args=[d, dict(d)])
        self.assertSucceeded(run, [True, True])

    def test_distinct_uris_get_numbered_directories(self):
        run = self.run_job({"work.py": WORK}, function_entry("paths"),
                           args=[data_ref(file_uri(self.dataset)), data_ref(file_uri(self.cached))])
        first, second = run.result["value"]
        self.assertEqual((os.path.basename(first), os.path.basename(second)), ("0", "1"))
        self.assertEqual(os.path.basename(os.path.dirname(first)), "data")

    def test_volume_is_placed_under_the_mount_root(self):
        volume = {"mount_path": "/data", "data": data_ref(file_uri(self.dataset), mount_path="/data")}
        run = self.run_job({"work.py": WORK}, function_entry("volume"), args=["train.csv"], volumes=[volume])
        self.assertSucceeded(run, [self.path("mnt", "data"), "a,b\n"])
        # The volume outlives the runner's temp dir, like a mount would.
        self.assertTrue(os.path.isfile(self.path("mnt", "data", "sub", "deep", "x.txt")))

    def test_fuse_refs_resolve_under_the_mount_root(self):
        # The backend mounted gs://b/data/ at /_kinetic/fuse-data/0 (under the
        # mount root, as volumes are); one object is read by its name in the
        # mount, never by whatever the directory lists first.
        mount = self.path("mnt", "_kinetic", "fuse-data", "0")
        os.makedirs(mount)
        for name in ("a.txt", "weights.h5"):
            with open(os.path.join(mount, name), "w") as f:
                f.write("mounted " + name)
        run = self.run_job({"work.py": WORK}, function_entry("paths"),
                           args=[data_ref("gs://b/data", is_dir=True, mount_path="/_kinetic/fuse-data/0", fuse=True),
                                 data_ref("gs://b/data/weights.h5", is_dir=False,
                                          mount_path="/_kinetic/fuse-data/0", fuse=True)])
        self.assertSucceeded(run, [mount, os.path.join(mount, "weights.h5")])

    def test_fuse_volumes_are_listed_where_they_are_mounted(self):
        mount = self.path("mnt", "data")
        os.makedirs(mount)
        volume = {"mount_path": "/data", "data": data_ref("gs://b/d", mount_path="/data", fuse=True)}
        run = self.run_job({"work.py": "import os\ndef volumes():\n    return os.environ['KINETIC_VOLUMES']\n"},
                           function_entry("volumes"), volumes=[volume])
        self.assertSucceeded(run, json.dumps({"/data": mount}))

    def test_missing_fuse_mount_fails_data_resolve(self):
        ref = data_ref("gs://b/x", mount_path="/not-mounted", fuse=True)
        run = self.run_job({"work.py": WORK}, function_entry("paths"), args=[ref])
        self.assertFailed(run, "data resolve", "RunnerError", ["/not-mounted", "missing"])

    def test_a_fuse_file_missing_from_its_mount_fails_data_resolve(self):
        os.makedirs(self.path("mnt", "m"))
        with open(self.path("mnt", "m", "other.txt"), "w") as f:
            f.write("x")
        ref = data_ref("gs://b/d/wanted.txt", is_dir=False, mount_path="/m", fuse=True)
        run = self.run_job({"work.py": WORK}, function_entry("paths"), args=[ref])
        self.assertFailed(run, "data resolve", "RunnerError", ["holds no file 'wanted.txt'"])

    def test_missing_source_fails_data_resolve(self):
        run = self.run_job({"work.py": WORK}, function_entry("paths"), args=[data_ref(file_uri(self.path("nope")))])
        self.assertFailed(run, "data resolve", "RunnerError", ["nope", "does not exist"])

    def test_a_cache_entry_gives_exactly_the_files_its_marker_lists(self):
        entry, marker = cache_entry(self.path("store"), {"b.txt": b"bb", "sub/c.txt": b"c"})
        # A killed upload's leftover: never listed, never received.
        open(os.path.join(entry, "b.txt#1"), "w").close()
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[cached_ref(entry, marker)])
        self.assertSucceeded(run, [["b.txt", "bb"], ["sub/c.txt", "c"]])
        single, single_marker = cache_entry(self.path("store"), {"w.bin": b"w"}, kind="file")
        run = self.run_job({"work.py": WORK}, function_entry("read"),
                           args=[cached_ref(single, single_marker, is_dir=False)])
        self.assertSucceeded(run, ["w.bin", "w"])

    def test_cache_content_changed_after_upload_fails_before_the_call(self):
        entry, marker = cache_entry(self.path("store"), {"b.txt": b"bb"})
        with open(os.path.join(entry, "b.txt"), "wb") as f:
            f.write(b"XX")  # same size, other bytes
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[cached_ref(entry, marker)])
        self.assertFailed(run, "data resolve", "RunnerError", ["b.txt", "does not match its marker"])

    def test_cache_entry_without_marker_or_files_fails_data_resolve(self):
        entry, marker = cache_entry(self.path("store"), {"b.txt": b"bb", "c.txt": b"c"})
        os.unlink(os.path.join(entry, "c.txt"))
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[cached_ref(entry, marker)])
        self.assertFailed(run, "data resolve", "RunnerError", ["c.txt is missing"])
        os.unlink(marker)
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[cached_ref(entry, marker)])
        self.assertFailed(run, "data resolve", "RunnerError", ["has no marker"])

    def test_a_marker_that_does_not_hash_to_its_entry_is_refused(self):
        entry, marker = cache_entry(self.path("store"), {"b.txt": b"bb", "c.txt": b"c"})
        with open(marker) as f:
            doc = json.load(f)
        doc["files"] = doc["files"][:1]
        with open(marker, "w") as f:
            json.dump(doc, f)
        run = self.run_job({"work.py": WORK}, function_entry("listing"), args=[cached_ref(entry, marker)])
        self.assertFailed(run, "data resolve", "RunnerError", ["do not hash to"])

    def test_hf_data_without_the_datasets_package_is_a_clear_phase_error(self):
        # -S: no site-packages, so no 'datasets' whatever the machine has
        # (the runner itself needs only the standard library); a datasets.py
        # of the user's own is not taken for it.
        spec = self.spec({"work.py": WORK, "datasets.py": "raise RuntimeError('the user module was imported')\n"},
                         function_entry("paths"), args=[data_ref("hf://imdb?split=train")])
        run = self.run_runner(self.write_spec(spec), python_flags=["-S"])
        self.assertFailed(run, "data resolve", "RunnerError",
                          ["The 'datasets' package is required to load 'hf://' URIs (hf://imdb?split=train)"])

    def test_hf_uris_are_checked_before_loading(self):
        for uri, part in (("hf://", "names no dataset"), ("hf://org/ds?split=train&shard=2", "unknown query key shard"),
                          ("hf://org/ds?split=a&split=b", "split must be given once"),
                          ("hf://org/ds?split=", "split must be given once")):
            with self.assertRaises(kr.RunnerError) as caught:
                kr.parse_hf_uri(uri)
            self.assertIn(part, str(caught.exception))
        self.assertEqual(kr.parse_hf_uri("hf://org/ds?split=train[:10]&revision=main"),
                         {"repo_id": "org/ds", "split": "train[:10]", "config_name": None, "revision": "main"})
        self.assertEqual(kr.parse_hf_uri("hf://imdb")["repo_id"], "imdb")

    def test_hf_with_fuse_is_refused(self):
        ref = data_ref("hf://imdb?split=train", fuse=True, mount_path="/data")
        run = self.run_job({"work.py": WORK}, function_entry("paths"), args=[ref])
        self.assertFailed(run, "data resolve", "RunnerError", ["fuse=True is not supported for Hugging Face"])


if __name__ == "__main__":
    unittest.main()
