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

def mixed_keys():
    return {1: "a", True: "b", None: "c", 2.5: "d"}

def pair():
    return (1, [2, (3,)])

def lone():
    return "a\\ud800"

def marker():
    return {"__kinetic_pickle__": "not base64!", "python": "3.11"}

def plain():
    return {"a": [1, 2.5, None, True, "x"]}

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

    def unpickled(self, run):
        self.assertEqual(run.returncode, 0, run)
        encoded = run.result["value"]
        self.assertEqual(sorted(encoded), ["__kinetic_pickle__", "python"], encoded)
        return pickle.loads(base64.b64decode(encoded["__kinetic_pickle__"]))

    def test_a_result_json_would_change_comes_back_pickled_exactly(self):
        # JSON would turn the keys into strings (and merge 1 and True), the tuples into lists.
        run = self.run_job({"work.py": WORK}, function_entry("mixed_keys"), python_values=MINOR)
        value = self.unpickled(run)
        self.assertEqual(value, {1: "b", None: "c", 2.5: "d"})
        self.assertEqual([type(k) for k in value], [int, type(None), float])
        run = self.run_job({"work.py": WORK}, function_entry("pair"), python_values=MINOR)
        self.assertEqual(self.unpickled(run), (1, [2, (3,)]))
        # A value JSON keeps exactly stays JSON, readable from any language.
        run = self.run_job({"work.py": WORK}, function_entry("plain"), python_values=MINOR)
        self.assertSucceeded(run, {"a": [1, 2.5, None, True, "x"]})

    def test_results_that_look_like_markers_or_hold_surrogates_come_back_pickled(self):
        run = self.run_job({"work.py": WORK}, function_entry("lone"), python_values=MINOR)
        self.assertEqual(self.unpickled(run), "a\ud800")
        run = self.run_job({"work.py": WORK}, function_entry("marker"), python_values=MINOR)
        self.assertEqual(self.unpickled(run), {"__kinetic_pickle__": "not base64!", "python": "3.11"})
        # Without a Python client, a dict shaped like a pickled leaf is tagged, never taken for one.
        run = self.run_job({"work.py": WORK}, function_entry("marker"))
        self.assertSucceeded(run, {"__kinetic_dict__": [["__kinetic_pickle__", "not base64!"], ["python", "3.11"]]})

    def test_json_keeps(self):
        from runner import kinetic_runner as kr

        shared = [1]
        cyclic = []
        cyclic.append(cyclic)
        for value in [None, True, 2 ** 100, 1.5, -0.0, "é", [1, {"a": [None]}], {}]:
            self.assertTrue(kr.json_keeps(value), value)
        for value in [(1,), {1: 2}, float("nan"), float("inf"), "\udfff", {"\ud800": 1}, {1, 2},
                      {"__kinetic_str__": []}, {"__data_ref__": 1}, [shared, shared], cyclic,
                      type("S", (str,), {})("x")]:
            self.assertFalse(kr.json_keeps(value), ascii(value))

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
