"""Function entrypoints end to end: values, exceptions, sys.exit, results that
JSON cannot encode, bad invocations."""

import os
import time
import unittest

from runner.tests.support import RunnerTestCase, file_uri, function_entry, path_entry

WORK = """\
import sys

def square(x):
    print("hello from square")
    return x * x

def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}

def configure(a, b=2, *, scale, name="n"):
    return {"a": a, "b": b, "scale": scale, "name": name}

def do_exit(code):
    if code == "none":
        sys.exit()
    sys.exit(code)

def interrupt():
    raise KeyboardInterrupt("stop")

not_a_function = 42

class Thing:
    def __repr__(self):
        return "Thing(42)"

def nan():
    return {"loss": float("nan")}

def a_set():
    return {1, 2}

def an_object():
    return [Thing()]

def huge_nan():
    return ["x" * 5000, float("inf")]
"""

ERRORS = {
    "work.py": WORK,
    "errs.py": """\
class TrainError(Exception):
    pass

def fail(n):
    try:
        {}["missing"]
    except KeyError as exc:
        raise TrainError("step %d diverged" % n) from exc

def builtin():
    raise ValueError("bad input")
""",
}


class FunctionTests(RunnerTestCase):
    def test_module_form_round_trip_and_stdout_untouched(self):
        run = self.run_job({"work.py": WORK}, function_entry("square"), args=[7])
        self.assertSucceeded(run, 49)
        self.assertEqual(run.stdout, "hello from square\n")
        self.assertIn("[kinetic] startup: ", run.stderr)
        self.assertEqual(run.written(), ["result.json"])

    def test_path_form_loads_the_file_under_a_derived_module_name(self):
        files = {
            "pkg/tools/double.py": "from helper import base\n"
                                   "def run(x):\n    return [base() * x, __name__]\n",
            "helper.py": "def base():\n    return 2\n",
        }
        run = self.run_job(files, path_entry("pkg/tools/double.py", "run"), args=[5])
        self.assertSucceeded(run, [10, "pkg.tools.double"])

    def test_args_and_kwargs_json_values_round_trip(self):
        value = {"n": None, "t": True, "f": 1.5, "s": "héllo ✓", "l": [1, [2, {"x": []}]]}
        run = self.run_job({"work.py": WORK}, function_entry("echo"), args=[1, "two", value],
                           kwargs={"k": value})
        self.assertSucceeded(run, {"args": [1, "two", value], "kwargs": {"k": value}})

    def test_kwargs_fill_keyword_only_and_defaults(self):
        run = self.run_job({"work.py": WORK}, function_entry("configure"), args=[1], kwargs={"scale": 0.5})
        self.assertSucceeded(run, {"a": 1, "b": 2, "scale": 0.5, "name": "n"})

    def test_user_exception_reports_qualified_type_message_and_full_traceback(self):
        run = self.run_job(ERRORS, function_entry("fail", module="errs"), args=[3])
        error = self.assertFailed(run, "execute", "errs.TrainError")
        self.assertEqual(error["message"], "step 3 diverged")
        tb = error["traceback"]
        self.assertTrue(tb.startswith("Traceback (most recent call last):"), tb)
        self.assertIn("KeyError: 'missing'", tb)
        self.assertIn("direct cause", tb)
        self.assertIn('errs.py", line 8, in fail', tb)
        self.assertNotIn("kinetic_runner.py", tb)

    def test_builtin_exception_type_is_unqualified(self):
        run = self.run_job(ERRORS, function_entry("builtin", module="errs"))
        self.assertFailed(run, "execute", "ValueError", ["bad input"])

    def test_wrong_arguments_fail_in_execute(self):
        run = self.run_job({"work.py": WORK}, function_entry("square"), args=[1, 2])
        self.assertFailed(run, "execute", "TypeError", ["square()"])

    def test_exception_at_import_fails_entrypoint_load(self):
        files = {"work.py": "raise RuntimeError('no GPU visible')\n"}
        run = self.run_job(files, function_entry("square"))
        error = self.assertFailed(run, "entrypoint load", "RuntimeError", ["no GPU visible"])
        self.assertIn('work.py", line 1', error["traceback"])

    def test_missing_module_fails_entrypoint_load(self):
        run = self.run_job({"work.py": WORK}, function_entry("f", module="nowhere"))
        self.assertFailed(run, "entrypoint load", "ModuleNotFoundError", ["nowhere"])

    def test_missing_attribute_names_module_and_function(self):
        run = self.run_job({"work.py": WORK}, function_entry("absent"))
        self.assertFailed(run, "entrypoint load", "RunnerError", ["'work'", "'absent'"])

    def test_not_callable_names_module_and_function(self):
        run = self.run_job({"work.py": WORK}, function_entry("not_a_function"))
        self.assertFailed(run, "entrypoint load", "RunnerError", ["work.not_a_function", "not callable"])

    def test_missing_entrypoint_path_fails_entrypoint_load(self):
        run = self.run_job({"work.py": WORK}, path_entry("nope/run.py", "main"))
        self.assertFailed(run, "entrypoint load", "RunnerError", ["nope/run.py"])

    def test_sys_exit_none_and_zero_are_success_with_null(self):
        for code in ("none", 0):
            with self.subTest(code=code):
                run = self.run_job({"work.py": WORK}, function_entry("do_exit"), args=[code])
                self.assertSucceeded(run, None)

    def test_sys_exit_with_other_codes_is_a_systemexit_error(self):
        for code, text in ((3, "sys.exit(3)"), ("bad config", "sys.exit('bad config')")):
            with self.subTest(code=code):
                run = self.run_job({"work.py": WORK}, function_entry("do_exit"), args=[code])
                self.assertFailed(run, "execute", "SystemExit", [text])

    def test_keyboard_interrupt_is_reported_by_type_name(self):
        run = self.run_job({"work.py": WORK}, function_entry("interrupt"))
        self.assertFailed(run, "execute", "KeyboardInterrupt", ["stop"])

    def test_values_json_cannot_encode_are_result_not_json_with_repr(self):
        for function, shown in (("nan", "{'loss': nan}"), ("a_set", "{1, 2}"), ("an_object", "[Thing(42)]")):
            with self.subTest(function=function):
                run = self.run_job({"work.py": WORK}, function_entry(function))
                error = self.assertFailed(run, "result serialization", "ResultNotJSON", [shown, "Python API"])
                self.assertEqual(error["traceback"], "")

    def test_result_not_json_repr_is_cut_at_2000_characters(self):
        run = self.run_job({"work.py": WORK}, function_entry("huge_nan"))
        error = self.assertFailed(run, "result serialization", "ResultNotJSON", ["['xxxx"])
        self.assertLess(len(error["message"]), 2400)
        self.assertNotIn("inf", error["message"][-50:])

    def test_live_non_daemon_thread_is_named_and_does_not_hang_the_job(self):
        files = {"work.py": "import threading, time\n"
                            "def main():\n"
                            "    threading.Thread(target=time.sleep, args=(60,), name='stuck-worker').start()\n"
                            "    return 'done'\n"}
        started = time.monotonic()
        run = self.run_job(files, function_entry("main"))
        self.assertLess(time.monotonic() - started, 30)
        self.assertSucceeded(run, "done")
        self.assertIn("non-daemon threads still running: 'stuck-worker'", run.stderr)


class InvocationTests(RunnerTestCase):
    def test_unknown_arguments_are_ignored(self):
        spec = self.write_spec(self.spec({"work.py": WORK}, function_entry("square"), args=[3]))
        run = self.run_runner(spec, extra_args=["--future-flag", "x"])
        self.assertSucceeded(run, 9)

    def test_bad_invocations_exit_2_and_write_nothing(self):
        wrong_protocol = self.spec({"work.py": WORK}, function_entry("square"), protocol=2)
        no_result_uri = self.spec({"work.py": WORK}, function_entry("square"))
        del no_result_uri["result_uri"]
        not_json = self.path("not-json.json")
        with open(not_json, "w") as f:
            f.write("{nope")
        cases = {
            "no --spec": None,
            "missing spec": file_uri(self.path("absent.json")),
            "relative path": "spec.json",
            "not JSON": file_uri(not_json),
            "protocol 2": self.write_spec(wrong_protocol),
        }
        for label, uri in cases.items():
            with self.subTest(label):
                run = self.run_runner(uri)
                self.assertEqual(run.returncode, 2, run)
                self.assertEqual(run.written(), [])
                self.assertIn("[kinetic] startup: bad invocation", run.stderr)
        with self.subTest("no result_uri"):
            run = self.run_runner(self.write_spec(no_result_uri))
            self.assertEqual(run.returncode, 2, run)

    def test_invalid_spec_fields_fail_startup_with_a_result(self):
        run = self.run_job({"work.py": WORK}, {"kind": "notebook"})
        self.assertFailed(run, "startup", "RunnerError", ["spec.entrypoint.kind"])

    def test_plain_absolute_spec_path_is_accepted(self):
        spec_uri = self.write_spec(self.spec({"work.py": WORK}, function_entry("square"), args=[4]))
        run = self.run_runner(spec_uri[len("file://"):])
        self.assertSucceeded(run, 16)

    def test_unwritable_result_exits_1(self):
        blocker = self.path("blocker")
        with open(blocker, "w") as f:
            f.write("a file, not a directory")
        run = self.run_job({"work.py": WORK}, function_entry("square"), args=[2],
                           result_uri=file_uri(os.path.join(blocker, "result.json")))
        self.assertEqual(run.returncode, 1, run)
        self.assertIn("[kinetic] result upload: cannot write the result", run.stderr)


if __name__ == "__main__":
    unittest.main()
