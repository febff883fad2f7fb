"""Plan application: sys.path entries under the workspace,
escapes rejected, chdir to the client cwd; the spec's plan wins over
.kinetic/plan.json."""

import json
import os
import shutil
import tempfile
import unittest

from runner import kinetic_runner as kr
from runner.tests.support import RunnerTestCase, default_plan, function_entry

PROBE = """\
import os, sys

WS = os.path.dirname(os.path.abspath(__file__))

def probe(package_root=None):
    # The job's kinetic module comes first of all (test_job_module); the plan's entries follow.
    path = [p for p in sys.path if os.path.basename(p) != "kinetic-module"]
    return {
        "cwd": os.getcwd(),
        "cwd_rel": os.path.relpath(os.getcwd(), WS),
        "ws_first": path[0] == WS,
        "head": [os.path.relpath(p, WS) for p in path[:3]],
        "package_root_exists": bool(package_root) and os.path.exists(package_root),
    }
"""


class PlanActionsTests(unittest.TestCase):
    def setUp(self):
        self.ws = os.path.realpath(tempfile.mkdtemp(prefix="kinetic-plan-"))
        self.addCleanup(shutil.rmtree, self.ws, True)
        for d in ("src", "sub/dir", "lib"):
            os.makedirs(os.path.join(self.ws, d))

    def rel(self, actions):
        return [os.path.relpath(p, self.ws) for p in actions.sys_path]

    def test_legacy_when_the_plan_is_missing_or_not_a_non_empty_object(self):
        for plan in (None, [], ["src"], "plan", {}, 3):
            with self.subTest(plan=plan):
                actions = kr.plan_actions(plan, self.ws)
                self.assertTrue(actions.legacy)
                self.assertEqual(actions.sys_path, [self.ws])
                self.assertIsNone(actions.cwd)

    def test_root_is_prepended_only_when_absent(self):
        self.assertEqual(self.rel(kr.plan_actions({"sys_path_rel": ["src"]}, self.ws)), [".", "src"])
        self.assertEqual(self.rel(kr.plan_actions({"sys_path_rel": ["src", ""]}, self.ws)), ["src", "."])
        self.assertEqual(self.rel(kr.plan_actions({"sys_path_rel": ["", "src", "lib"]}, self.ws)), [".", "src", "lib"])

    def test_dot_and_empty_mean_root_and_entries_are_deduplicated(self):
        actions = kr.plan_actions({"sys_path_rel": ["", ".", "src", "src/", "./src"]}, self.ws)
        self.assertEqual(self.rel(actions), [".", "src"])
        self.assertEqual(actions.warnings, [])

    def test_escaping_entries_are_rejected_with_a_warning(self):
        actions = kr.plan_actions({"sys_path_rel": ["../../etc", "/etc", "src"]}, self.ws)
        self.assertEqual(self.rel(actions), [".", "src"])
        self.assertEqual(len(actions.warnings), 2)
        self.assertTrue(all("escapes the workspace" in w for w in actions.warnings))

    def test_symlink_escape_is_rejected(self):
        os.symlink("/", os.path.join(self.ws, "root-link"))
        actions = kr.plan_actions({"sys_path_rel": ["root-link"]}, self.ws)
        self.assertEqual(self.rel(actions), ["."])
        self.assertEqual(len(actions.warnings), 1)

    def test_missing_directories_are_skipped(self):
        actions = kr.plan_actions({"sys_path_rel": ["", "gone", "src"]}, self.ws)
        self.assertEqual(self.rel(actions), [".", "src"])

    def test_non_list_sys_path_rel_warns_and_counts_as_empty(self):
        actions = kr.plan_actions({"sys_path_rel": "src", "client_cwd_rel": ""}, self.ws)
        self.assertEqual(self.rel(actions), ["."])
        self.assertEqual(len(actions.warnings), 1)

    def test_non_string_items_are_dropped_with_a_warning(self):
        actions = kr.plan_actions({"sys_path_rel": ["src", 3, None]}, self.ws)
        self.assertEqual(self.rel(actions), [".", "src"])
        self.assertEqual(len(actions.warnings), 2)

    def test_chdir_rules(self):
        cases = [
            ("sub/dir", "sub/dir", 0),
            ("missing", ".", 1),
            ("", ".", 0),
            (None, ".", 0),
            (5, ".", 1),
            (["sub"], ".", 1),
            ("../..", ".", 1),
        ]
        for cwd_rel, expected, warnings in cases:
            with self.subTest(client_cwd_rel=cwd_rel):
                actions = kr.plan_actions({"sys_path_rel": [""], "client_cwd_rel": cwd_rel}, self.ws)
                self.assertFalse(actions.legacy)
                self.assertEqual(os.path.relpath(actions.cwd, self.ws), expected)
                self.assertEqual(len(actions.warnings), warnings, actions.warnings)

    def test_read_plan_prefers_the_spec(self):
        os.makedirs(os.path.join(self.ws, ".kinetic"))
        with open(os.path.join(self.ws, ".kinetic", "plan.json"), "w") as f:
            json.dump({"sys_path_rel": ["lib"]}, f)
        self.assertEqual(kr.read_plan({"sys_path_rel": ["src"]}, self.ws), {"sys_path_rel": ["src"]})
        self.assertEqual(kr.read_plan(None, self.ws), {"sys_path_rel": ["lib"]})
        with open(os.path.join(self.ws, ".kinetic", "plan.json"), "w") as f:
            f.write("{broken")
        self.assertIsNone(kr.read_plan(None, self.ws))


class PlanEndToEndTests(RunnerTestCase):
    FILES = {
        "work.py": PROBE,
        "src/mylib/__init__.py": "VALUE = 'from src'\n",
        "app/main.py": "import mylib\n\ndef run():\n    return mylib.VALUE\n",
        "app/conf/": None,
        "other/": None,
        ".kinetic/plan.json": json.dumps({"package_root": "/x", "entry_rel": "", "client_cwd_rel": "other",
                                          "sys_path_rel": [""]}),
    }

    def test_spec_plan_wins_over_the_context_plan(self):
        plan = dict(default_plan(), client_cwd_rel="app/conf", sys_path_rel=["", "src"])
        run = self.run_job(self.FILES, function_entry("probe"), plan=plan)
        value = run.result["value"]
        self.assertEqual(value["cwd_rel"], os.path.join("app", "conf"))
        self.assertEqual(value["head"][:2], [".", "src"])

    def test_context_plan_is_used_when_the_spec_has_none(self):
        run = self.run_job(self.FILES, function_entry("probe"), plan=None)
        self.assertEqual(run.result["value"]["cwd_rel"], "other")

    def test_src_layout_import(self):
        plan = dict(default_plan(), sys_path_rel=["", "src"])
        run = self.run_job(self.FILES, function_entry("run", module="app.main"), plan=plan)
        self.assertSucceeded(run, "from src")

    def test_legacy_puts_the_root_first_and_keeps_the_cwd(self):
        files = dict(self.FILES)
        del files[".kinetic/plan.json"]
        run = self.run_job(files, function_entry("probe"), plan=None, cwd=self.mount_root)
        value = run.result["value"]
        self.assertTrue(value["ws_first"])
        self.assertEqual(value["cwd"], self.mount_root)

    def test_escaping_plan_entries_warn_and_the_job_still_runs(self):
        plan = dict(default_plan(), sys_path_rel=["", "../../.."], client_cwd_rel="../..")
        run = self.run_job(self.FILES, function_entry("probe"), plan=plan)
        self.assertEqual(run.result["value"]["cwd_rel"], ".")
        self.assertIn("[kinetic] context extract: warning: rejecting plan sys_path_rel entry '../../..'", run.stderr)
        self.assertIn("client_cwd_rel '../..' escapes the workspace", run.stderr)

    def test_package_root_is_left_alone(self):
        missing_root = self.path("client", "home", "proj")
        plan = dict(default_plan(), package_root=missing_root)
        run = self.run_job(self.FILES, function_entry("probe"), plan=plan, args=[missing_root])
        self.assertIs(run.result["value"]["package_root_exists"], False)
        self.assertFalse(os.path.exists(self.path("client")))


if __name__ == "__main__":
    unittest.main()
