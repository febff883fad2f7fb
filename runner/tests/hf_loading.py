"""hf:// data loaded for real by the runner with the `datasets` package, from
a dataset the test builds locally (no hub is reached: HF_HUB_OFFLINE and
HF_DATASETS_OFFLINE are set, and the repository id is a directory of the
job's project).

Needs a Python with `datasets`: scripts/test.sh runs it with
KINETIC_RUNNER_PYTHON set to its venv's interpreter (not found by
`unittest discover`, whose Python has no `datasets`)."""

import os
import unittest

from runner.tests.support import RunnerTestCase, data_ref, function_entry

WORK = """\
import os

def rows(path):
    import datasets
    d = datasets.load_from_disk(path)
    return {"n": len(d), "text": list(d["text"]), "label": list(d["label"]), "dir": os.path.isdir(path)}

def volume_rows(mount):
    import json
    return rows(json.loads(os.environ["KINETIC_VOLUMES"])[mount])
"""

FILES = {
    "work.py": WORK,
    "ds/train.csv": "text,label\nhello,1\nbye,0\n",
    "ds/test.csv": "text,label\nonly,1\n",
    # A module of the user's named like the package does not stand in for it.
    "datasets.py": "raise RuntimeError('the user datasets.py was imported')\n",
}


def hf_ref(uri, trust=False):
    ref = data_ref(uri)
    ref["hf_trust_remote_code"] = trust
    return ref


class HuggingFaceDataTests(RunnerTestCase):
    def env(self):
        return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": self.path("hf-home")}

    def test_a_split_is_loaded_and_saved_for_the_function(self):
        run = self.run_job(FILES, function_entry("rows"), args=[hf_ref("hf://./ds?split=train")], env=self.env())
        self.assertSucceeded(run, {"n": 2, "text": ["hello", "bye"], "label": [1, 0], "dir": True})
        self.assertIn("loading hf://./ds?split=train (Hugging Face dataset ./ds, split=train)", run.stderr)

    def test_another_split_and_trusted_code_as_a_volume(self):
        run = self.run_job(FILES, function_entry("volume_rows"), args=["/data/hf"], env=self.env(),
                           volumes=[{"mount_path": "/data/hf",
                                     "data": dict(hf_ref("hf://./ds?split=test", trust=True), mount_path="/data/hf")}])
        self.assertSucceeded(run, {"n": 1, "text": ["only"], "label": [1], "dir": True})
        self.assertIn("hf_trust_remote_code=True", run.stderr)

    def test_a_dataset_that_does_not_exist_fails_data_resolve(self):
        run = self.run_job(FILES, function_entry("rows"), args=[hf_ref("hf://./missing?split=train")],
                           env=self.env())
        self.assertFailed(run, "data resolve", "RunnerError")


if __name__ == "__main__":
    unittest.main()
