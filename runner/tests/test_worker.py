"""A pool worker's runner (``PoolWorker``): the shared phases once per
worker, each input's own phases in a fork, driven as the local backend's
supervisor (worker mode) drives them."""

import json
import os
import subprocess
import unittest

from runner.tests.test_python_values import MINOR, leaf
from runner.tests.support import PYTHON, RUNNER, RunnerTestCase, file_uri, function_entry, path_entry

# The worker's loop, as supervisor.py's: the runner loaded once as a module,
# then per job `prepare` in the worker and `main(argv, prepared)` in a fork
# whose output goes to the job's log. Prints one JSON line per job.
DRIVER = """\
import json, os, sys
module = type(sys)("kinetic_runner")
module.__file__ = sys.argv[1]
sys.modules["kinetic_runner"] = module
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), module.__dict__)
scratch = sys.argv[2]
shared = module.PoolWorker(scratch)
for line in sys.stdin:
    job = json.loads(line)
    if job.get("unlink"):
        os.unlink(job["unlink"])  # the test's outage ends
    # As the supervisor: what the worker holds already, else a preparation.
    prepared = shared.held(job["argv"])
    held = prepared is not None
    if prepared is None:
        prepared = shared.prepare(job["argv"], job["log"])
    log_fd = os.open(job["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.environ["KINETIC_ATTEMPT"] = "1"
        code = module.main(job["argv"], prepared)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(log_fd)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if prepared is None:
        shared.ended(code)
    print(json.dumps({"code": code, "prepared": prepared is not None, "held": held,
                      "scratch": sorted(n for n in os.listdir(scratch) if not n.startswith("."))}))
    sys.stdout.flush()
shared.close()
print(json.dumps({"left": sorted(os.listdir(scratch))}))
"""

# Each import of the module appends this process's pid to imports.txt.
COUNTED = """\
import os
with open(os.environ["IMPORTS_FILE"], "a") as f:
    f.write("%d\\n" % os.getpid())
VERSION = "v1"

def square(x):
    return [VERSION, x * x]
"""

RAISES = """\
raise RuntimeError("the module cannot be imported")
"""


class PoolWorkerTest(RunnerTestCase):

    def setUp(self):
        super().setUp()
        self.scratch = self.path("pool")
        os.makedirs(self.scratch)
        self.imports = self.path("imports.txt")
        self.driver = self.path("driver.py")
        with open(self.driver, "w") as f:
            f.write(DRIVER)
        self.jobs = 0

    def job(self, files, entrypoint, args, context_name="context.zip", **fields):
        """One input: its own store directory, spec.json, workdir; the job line for the driver."""
        self.jobs += 1
        job_id = "job-%04d" % self.jobs
        store = self.path("store", job_id)
        os.makedirs(store)
        spec = self.spec(files, entrypoint, args=args, job_id=job_id,
                         result_uri=file_uri(os.path.join(store, "result.json")),
                         output_dir="gs://p-kn-c-jobs/outputs/" + job_id, **fields)
        # The context is the batch's, shared: under the store's root.
        shared_context = self.path("store", context_name)
        os.replace(os.path.join(self.store, "context.zip"), shared_context)
        spec["context"]["uri"] = file_uri(shared_context)
        spec_path = os.path.join(store, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        workdir = self.path("jobs", job_id, "work")
        os.makedirs(workdir)
        return {"argv": ["--spec", file_uri(spec_path), "--workdir", workdir, "--mount-root", self.mount_root,
                         "--log-copy", "off"],
                "log": os.path.join(store, "output.log"), "store": store, "workdir": workdir}

    def drive(self, jobs):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KINETIC_")}
        env["IMPORTS_FILE"] = self.imports
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        proc = subprocess.run([PYTHON, "-u", self.driver, RUNNER, self.scratch],
                              input="".join(json.dumps(j) + "\n" for j in jobs), env=env, cwd=self.tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual(lines[-1], {"left": []}, "the worker leaves no preparation behind")
        for job in jobs:
            self.assertEqual(os.listdir(job["workdir"]), [], "each input's own directory is removed")
        return lines[:-1]

    def result(self, job):
        with open(os.path.join(job["store"], "result.json")) as f:
            return json.load(f)

    def log(self, job):
        with open(job["log"]) as f:
            return f.read()

    def import_count(self):
        if not os.path.exists(self.imports):
            return 0
        with open(self.imports) as f:
            return len(f.read().split())

    def test_inputs_of_one_batch_share_one_import(self):
        files = {"work.py": COUNTED}
        jobs = [self.job(files, function_entry("square"), [n]) for n in range(4)]
        runs = self.drive(jobs)
        self.assertEqual([r["code"] for r in runs], [0] * 4)
        self.assertEqual([r["prepared"] for r in runs], [True] * 4)
        # The first input prepares; the others find it held (no timer armed).
        self.assertEqual([r["held"] for r in runs], [False, True, True, True])
        self.assertEqual([self.result(j)["value"] for j in jobs], [["v1", n * n] for n in range(4)])
        self.assertEqual(self.import_count(), 1, "one import for the four inputs")
        # One preparation directory while the worker runs.
        self.assertEqual(len(runs[0]["scratch"]), 1)
        self.assertEqual(runs[0]["scratch"], runs[3]["scratch"])
        # Each input's log has its own run; the first also the preparation's lines.
        self.assertIn("[kinetic] entrypoint load: work.square", self.log(jobs[0]))
        for job in jobs:
            self.assertIn("[kinetic] startup: job %s" % os.path.basename(job["store"]), self.log(job))
            self.assertIn("done once by this worker (for job job-0001)", self.log(job))
        self.assertNotIn("[kinetic] entrypoint load:", self.log(jobs[1]))

    def test_functions_pickled_by_a_python_client_run_on_one_preparation(self):
        import operator

        entry = {"kind": "function", "module": "__kinetic_runner__", "function": "call_pickled"}
        jobs = [self.job({"work.py": COUNTED}, entry, [leaf(operator.add), n, 1], python_values=MINOR)
                for n in range(3)]
        runs = self.drive(jobs)
        self.assertEqual([(r["code"], r["prepared"]) for r in runs], [(0, True)] * 3)
        self.assertEqual([self.result(j)["value"] for j in jobs], [1, 2, 3])

    def test_another_project_is_prepared_again_with_its_own_code(self):
        first = [self.job({"work.py": COUNTED}, function_entry("square"), [n], "context-1.zip") for n in (1, 2)]
        second = [self.job({"work.py": COUNTED.replace('"v1"', '"v2"')}, function_entry("square"), [n],
                           "context-2.zip") for n in (3, 4)]
        back = [self.job({"work.py": COUNTED}, function_entry("square"), [5], "context-1.zip")]
        runs = self.drive(first + second + back)
        self.assertEqual([r["code"] for r in runs], [0] * 5)
        self.assertEqual([self.result(j)["value"] for j in first + second + back],
                         [["v1", 1], ["v1", 4], ["v2", 9], ["v2", 16], ["v1", 25]])
        self.assertEqual(self.import_count(), 3, "one import per change of project")
        self.assertNotEqual(runs[1]["scratch"], runs[2]["scratch"], "the old preparation dropped")
        self.assertEqual(len(runs[2]["scratch"]), 1)

    def plain_error(self, files, entrypoint):
        """The error document the runner writes for the job run on its own."""
        run = self.run_job(files, entrypoint, env={"IMPORTS_FILE": self.imports})
        self.assertEqual(run.returncode, 1, run)
        return run.result["error"]

    def assertSameFailure(self, files, entrypoint, phase):
        alone = self.plain_error(files, entrypoint)
        self.assertEqual(alone["phase"], phase)
        jobs = [self.job(files, entrypoint, [n]) for n in range(3)]
        runs = self.drive(jobs)
        self.assertEqual([r["code"] for r in runs], [1] * 3)
        self.assertEqual([r["prepared"] for r in runs], [False] * 3)
        for job in jobs:
            error = self.result(job)["error"]
            # The traceback names the run's own temporary directory.
            self.assertEqual({k: v for k, v in error.items() if k != "traceback"},
                             {k: v for k, v in alone.items() if k != "traceback"})
            self.assertEqual(self.log(job).count("[kinetic] %s: failed" % phase), 1, self.log(job))
        return jobs

    def test_a_missing_function_fails_each_input_as_a_job_on_its_own(self):
        self.assertSameFailure({"work.py": COUNTED}, function_entry("nope"), "entrypoint load")

    def test_an_import_that_raises_fails_each_input_as_a_job_on_its_own(self):
        self.assertSameFailure({"work.py": RAISES}, function_entry("square"), "entrypoint load")

    def test_a_missing_entrypoint_file_fails_each_input_as_a_job_on_its_own(self):
        self.assertSameFailure({"work.py": COUNTED}, path_entry("missing.py", "square"), "entrypoint load")

    def test_a_failed_preparation_does_not_poison_the_inputs_after_a_success(self):
        # The import fails while a flag file exists (an outage): the first
        # input fails alone, the second succeeds on its own run (the flag
        # gone), and the worker then prepares again for the third.
        flagged = ("import os\nif os.path.exists(%r):\n    raise RuntimeError('outage')\n" % self.path("flag")
                   + COUNTED)
        files = {"work.py": flagged}
        open(self.path("flag"), "w").close()
        jobs = [self.job(files, function_entry("square"), [n]) for n in range(3)]
        lines = []
        lines += self.drive(jobs[:1])
        os.unlink(self.path("flag"))
        lines += self.drive(jobs[1:])
        self.assertEqual([r["code"] for r in lines], [1, 0, 0])
        self.assertEqual(self.result(jobs[0])["error"]["message"], "outage")
        self.assertEqual([self.result(j)["value"] for j in jobs[1:]], [["v1", 1], ["v1", 4]])

    def test_a_failure_of_a_key_then_a_success_prepares_again(self):
        # Within one worker: the outage ends after the first input; the
        # key failed, so the second runs every phase itself, succeeds, and
        # the worker prepares again for the third.
        flagged = ("import os\nif os.path.exists(%r):\n    raise RuntimeError('outage')\n" % self.path("flag")
                   + COUNTED)
        open(self.path("flag"), "w").close()
        files = {"work.py": flagged}
        jobs = [self.job(files, function_entry("square"), [n]) for n in range(4)]
        jobs[1]["unlink"] = self.path("flag")
        runs = self.drive(jobs)
        self.assertEqual([r["code"] for r in runs], [1, 0, 0, 0])
        self.assertEqual([r["prepared"] for r in runs], [False, False, True, True])
        self.assertEqual([self.result(j)["value"] for j in jobs[1:]], [["v1", 1], ["v1", 4], ["v1", 9]])
        # Imports: the second input's own, and the worker's one for the last two.
        self.assertEqual(self.import_count(), 2)


if __name__ == "__main__":
    unittest.main()
