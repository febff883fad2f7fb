"""Pickled Python values (spec.python_values): argument leaves unpickled after
the entrypoint loads, results JSON cannot hold pickled back, a leaf pickled by
another Python minor version refused."""

import base64
import pickle
import sys
import unittest

from runner.tests.support import RunnerTestCase, function_entry

WORK = """\
import fractions

class Box:
    def __init__(self, v):
        self.v = v

def unbox(box, scale=1):
    return box.v * scale

def halves(n):
    return fractions.Fraction(n, 2)

def echo(x):
    return x

def scaled(items, n):
    return {"value": float(items[0] * n), "types": [type(i).__name__ for i in items], "n": type(n).__name__}
"""

MINOR = "%d.%d" % sys.version_info[:2]


def leaf(value, python=MINOR):
    return {"__kinetic_pickle__": base64.b64encode(pickle.dumps(value)).decode("ascii"), "python": python}


class PythonValuesTest(RunnerTestCase):
    def test_pickled_arguments_are_unpickled_and_json_passes_through(self):
        import fractions

        run = self.run_job({"work.py": WORK}, function_entry("scaled"),
                           args=[[leaf(fractions.Fraction(1, 3)), {"k": "v"}]],
                           kwargs={"n": leaf(fractions.Fraction(3))}, python_values=MINOR)
        self.assertSucceeded(run, {"value": 1.0, "types": ["Fraction", "dict"], "n": "Fraction"})

    def test_a_result_json_cannot_hold_comes_back_pickled(self):
        import fractions

        run = self.run_job({"work.py": WORK}, function_entry("halves"), args=[3], python_values=MINOR)
        self.assertEqual(run.returncode, 0, run)
        encoded = run.result["value"]
        self.assertEqual(pickle.loads(base64.b64decode(encoded["__kinetic_pickle__"])), fractions.Fraction(3, 2))

    def test_without_python_values_results_stay_json_only(self):
        run = self.run_job({"work.py": WORK}, function_entry("halves"), args=[3])
        self.assertFailed(run, "result serialization", "ResultNotJSON")

    def test_a_leaf_from_another_python_minor_is_refused(self):
        run = self.run_job({"work.py": WORK}, function_entry("echo"), args=[leaf(1, python="2.7")],
                           python_values=MINOR)
        self.assertFailed(run, "data resolve", "PythonVersionMismatch", ["pickled by Python 2.7", MINOR])

    def test_call_pickled_calls_its_first_argument(self):
        import operator

        run = self.run_job({"work.py": WORK}, {"kind": "function", "module": "__kinetic_runner__",
                                               "function": "call_pickled"},
                           args=[leaf(operator.add), 2, 3], python_values=MINOR)
        self.assertSucceeded(run, 5)

    def test_a_decorated_function_runs_unwrapped(self):
        files = {"work.py": "def inner(x):\n    return x + 1\n\n"
                            "def wrapper(x):\n    raise AssertionError('the wrapper ran')\n\n"
                            "wrapper.__kinetic_function__ = inner\n"}
        run = self.run_job(files, function_entry("wrapper"), args=[1])
        self.assertSucceeded(run, 2)


if __name__ == "__main__":
    unittest.main()
