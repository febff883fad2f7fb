"""Artifact download and verification, requirements install, context
extraction (zip-slip refusal, Unix permission bits)."""

import json
import os
import sys
import unittest
import zipfile

from runner import kinetic_runner as kr
from runner.tests.support import RunnerTestCase, file_uri, function_entry, sha256

WORK = """\
import os

def touch(path):
    with open(path, "w") as f:
        f.write("ran")
    return "ran"

def mode(name):
    return oct(os.stat(name).st_mode & 0o777)

def read(name):
    with open(name) as f:
        return f.read()
"""


class VerificationTests(RunnerTestCase):
    def test_context_sha_mismatch_refuses_to_run(self):
        marker = self.path("side-effect")
        spec = self.spec({"work.py": WORK}, function_entry("touch"), args=[marker])
        good = spec["context"]["sha256"]
        spec["context"]["sha256"] = "0" * 64
        run = self.run_runner(self.write_spec(spec))
        self.assertFailed(run, "artifact verification", "RunnerError", ["context", "0" * 64, good])
        self.assertFalse(os.path.exists(marker))

    def test_requirements_sha_mismatch_refuses_to_install_or_run(self):
        marker = self.path("side-effect")
        reqs = self.path("requirements.txt")
        with open(reqs, "w") as f:
            f.write("six\n")
        spec = self.spec({"work.py": WORK}, function_entry("touch"), args=[marker],
                         requirements={"uri": file_uri(reqs), "sha256": "a" * 64})
        run = self.run_runner(self.write_spec(spec), env={"KINETIC_INSTALL_COMMAND": json.dumps(["false"])})
        self.assertFailed(run, "artifact verification", "RunnerError", ["requirements", "a" * 64, sha256(reqs)])
        self.assertFalse(os.path.exists(marker))

    def test_missing_context_fails_artifact_download(self):
        spec = self.spec({"work.py": WORK}, function_entry("touch"))
        spec["context"]["uri"] = file_uri(self.path("gone.zip"))
        run = self.run_runner(self.write_spec(spec))
        self.assertFailed(run, "artifact download", "RunnerError", ["gone.zip"])

    def test_context_that_is_not_a_zip_fails_context_extract(self):
        bogus = self.path("bogus.zip")
        with open(bogus, "wb") as f:
            f.write(b"definitely not a zip")
        spec = self.spec({"work.py": WORK}, function_entry("touch"))
        spec["context"] = {"uri": file_uri(bogus), "sha256": sha256(bogus)}
        run = self.run_runner(self.write_spec(spec))
        error = self.assertFailed(run, "context extract", "RunnerError", ["BadZipFile"])
        self.assertIn("BadZipFile", error["traceback"])


class RequirementsTests(RunnerTestCase):
    # The fake installer copies the requirements file it is given to a marker, or fails.
    INSTALLER = ("import shutil, sys\n"
                 "if sys.argv[1] == 'fail':\n"
                 "    print('resolving...', file=sys.stderr)\n"
                 "    print('ERROR: no matching distribution for nonexistent-pkg', file=sys.stderr)\n"
                 "    sys.exit(3)\n"
                 "shutil.copyfile(sys.argv[-1], sys.argv[1])\n")

    def run_with_requirements(self, content, mode):
        reqs = self.path("requirements.txt")
        with open(reqs, "w") as f:
            f.write(content)
        spec = self.spec({"work.py": WORK}, function_entry("read"), args=[self.path("installed")],
                         requirements={"uri": file_uri(reqs), "sha256": sha256(reqs)})
        command = [sys.executable, "-c", self.INSTALLER, mode]
        return self.run_runner(self.write_spec(spec), env={"KINETIC_INSTALL_COMMAND": json.dumps(command)})

    def test_install_command_gets_the_requirements_file(self):
        run = self.run_with_requirements("numpy==2.0\n", self.path("installed"))
        self.assertSucceeded(run, "numpy==2.0\n")

    def test_install_failure_reports_exit_code_and_stderr_tail(self):
        run = self.run_with_requirements("nonexistent-pkg\n", "fail")
        self.assertFailed(run, "requirements install", "RunnerError",
                          ["exited with code 3", "no matching distribution for nonexistent-pkg"])
        self.assertIn("resolving...", run.stderr)  # echoed live too
        self.assertEqual(run.stdout, "")

    def test_empty_requirements_file_installs_nothing(self):
        run = self.run_with_requirements("\n", "fail")
        self.assertEqual(run.returncode, 1)  # the function then finds no marker file
        self.assertEqual(run.result["error"]["phase"], "execute")
        self.assertIn("nothing to install", run.stderr)

    def test_default_install_command(self):
        path = "/tmp/r.txt"
        self.assertEqual(kr.install_command({"KINETIC_INSTALL_COMMAND": '["inst", "-q"]'}, path),
                         ["inst", "-q", path])
        default = kr.install_command({}, path)
        self.assertEqual(default[-2:], ["-r", path])
        self.assertTrue(default[1:4] == ["pip", "install", "--system"] or default[1:3] == ["-m", "pip"], default)
        with self.assertRaises(kr.RunnerError):
            kr.install_command({"KINETIC_INSTALL_COMMAND": "uv pip install"}, path)


class ExtractTests(RunnerTestCase):
    def test_permission_bits_are_restored(self):
        files = {"work.py": WORK, "run.sh": ("#!/bin/sh\n", 0o100755), "secret.cfg": ("x", 0o100640),
                 "ckpt/": None}
        for name, expected in (("run.sh", "0o755"), ("secret.cfg", "0o640"), ("work.py", "0o644")):
            with self.subTest(name=name):
                run = self.run_job(files, function_entry("mode"), args=[name])
                self.assertSucceeded(run, expected)

    def test_zip_slip_entries_are_refused_before_anything_is_written(self):
        escape = self.path("escaped.txt")
        for bad in ("../evil.py", "sub/../../evil.py", escape, "..\\evil.py"):
            with self.subTest(entry=bad):
                marker = self.path("side-effect")
                run = self.run_job({"work.py": WORK, bad: "pwned"}, function_entry("touch"), args=[marker])
                self.assertFailed(run, "context extract", "RunnerError", ["refusing context entry", repr(bad)])
                self.assertFalse(os.path.exists(marker))
                self.assertFalse(os.path.exists(escape))

    def test_symlink_out_of_the_workspace_is_refused(self):
        outside = self.path("outside")
        os.makedirs(outside)
        files = {"work.py": WORK, "link": ("../../../outside", 0o120777), "link/evil.py": "pwned"}
        run = self.run_job(files, function_entry("touch"), args=[self.path("side-effect")])
        self.assertFailed(run, "context extract", "RunnerError", ["'link'", "out of the workspace"])
        self.assertEqual(os.listdir(outside), [])

    def test_symlink_that_escapes_through_a_later_symlink_is_refused(self):
        # Checked one by one as they are extracted, both links look inside:
        # `esc` first (p/up does not exist yet), then `p/up` -> `..`. Together
        # `esc` resolves to the workspace's parent.
        files = {"work.py": WORK, "esc": ("p/up/..", 0o120777), "p/": None, "p/up": ("..", 0o120777)}
        marker = self.path("side-effect")
        run = self.run_job(files, function_entry("touch"), args=[marker])
        self.assertFailed(run, "context extract", "RunnerError", ["'esc'", "out of the workspace"])
        self.assertFalse(os.path.exists(marker))

    def test_symlink_loops_are_refused(self):
        files = {"work.py": WORK, "a": ("b", 0o120777), "b": ("a", 0o120777)}
        run = self.run_job(files, function_entry("touch"), args=[self.path("side-effect")])
        self.assertFailed(run, "context extract", "RunnerError", ["out of the workspace"])

    def test_symlink_inside_the_workspace_is_kept(self):
        files = {"work.py": WORK, "data/real.txt": "payload", "alias.txt": ("data/real.txt", 0o120777)}
        run = self.run_job(files, function_entry("read"), args=["alias.txt"])
        self.assertSucceeded(run, "payload")

    def test_archives_beyond_the_limits_are_refused_before_extracting(self):
        marker = self.path("side-effect")
        cases = (
            ({"work.py": WORK, "a.txt": "a", "b.txt": "b"}, {"max_entries": 2}, "KINETIC_CONTEXT_MAX_FILES",
             ["3 entries", "limit of 2 entries"]),
            ({"work.py": WORK, "big.txt": "x" * 5000}, {"max_bytes": 4096}, "KINETIC_CONTEXT_MAX_MB",
             ["expands to", "limit of 4096 bytes"]),
            ({"work.py": WORK, "zeros.bin": b"\0" * (8 << 20)}, None, "KINETIC_CONTEXT_MAX_RATIO",
             ["limit of 200:1"]),
        )
        for files, limits, setting, parts in cases:
            with self.subTest(setting=setting):
                fields = {} if limits is None else {"extract_limits": limits}
                run = self.run_job(files, function_entry("touch"), args=[marker], **fields)
                error = self.assertFailed(run, "context extract", "RunnerError", parts + [setting])
                self.assertNotIn("Traceback", error["message"])
                self.assertFalse(os.path.exists(marker))

    def test_limits_are_checked_before_anything_is_written(self):
        archive = self.path("bomb.zip")
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for n in range(20):
                z.writestr("f%02d.bin" % n, b"\0" * (1 << 20))
        workspace = self.path("ws")
        with self.assertRaisesRegex(kr.RunnerError, "200:1"):
            kr.extract_context(archive, workspace)
        self.assertEqual(os.listdir(workspace), [])
        limits = dict(kr.DEFAULT_EXTRACT_LIMITS, max_ratio=10_000)
        self.assertEqual(kr.extract_context(archive, self.path("ws2"), limits), 20)

    def test_bad_limits_in_the_spec_fail_startup(self):
        run = self.run_job({"work.py": WORK}, function_entry("touch"), args=[self.path("x")],
                           extract_limits={"max_entries": 0})
        self.assertFailed(run, "startup", "RunnerError", ["extract_limits.max_entries"])

    def test_unsafe_entry_reason(self):
        for name in ("../x", "a/../../x", "/etc/passwd", "\\x", "C:/x", "a\\..\\x", ""):
            with self.subTest(name=name):
                self.assertIsNotNone(kr.unsafe_entry_reason(name))
        for name in ("a/b.py", "a/..b/c", "..hidden", "dir/", "./x"):
            with self.subTest(name=name):
                self.assertIsNone(kr.unsafe_entry_reason(name))

    def test_extract_context_in_process(self):
        archive = self.path("c.zip")
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("a/b.txt", "b")
            z.writestr("a/", "")
            z.writestr("./c.txt", "c")
        workspace = self.path("ws")
        self.assertEqual(kr.extract_context(archive, workspace), 3)
        with open(os.path.join(workspace, "a", "b.txt")) as f:
            self.assertEqual(f.read(), "b")
        self.assertTrue(os.path.isfile(os.path.join(workspace, "c.txt")))


if __name__ == "__main__":
    unittest.main()
