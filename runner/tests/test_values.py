"""User values on the wire: integers of any size, nesting up to the
protocol's limit, strings with surrogate code points (tagged both ways)."""

import json
import unittest

from runner import kinetic_runner as kr
from runner.tests.support import RunnerTestCase, function_entry

WORK = """\
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}

def codes(value):
    return [ord(c) for c in value]

def big():
    return [2 ** 100, -(3 ** 90), 10 ** 5000]

def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value

def lone():
    return "a\\ud800b"
"""


class WireTests(unittest.TestCase):
    def test_values_round_trip_through_the_wire(self):
        values = [
            2 ** 100,
            "a\ud800b",
            "\ud83d\ude00",
            "\U0001f600",
            {"k\udfff": ["\udc00"]},
            {"__kinetic_str__": [1, 2]},
            {"__kinetic_dict__": "user data"},
            [{"x": "plain"}, None, 1.5, True],
        ]
        for value in values:
            with self.subTest(value=ascii(value)):
                text = kr.encode_value(value)
                # What the text decodes to is valid Unicode: UTF-8 holds it.
                json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
                self.assertEqual(kr.from_wire(json.loads(text)), value)

    def test_the_tags(self):
        self.assertEqual(json.loads(kr.encode_value("a\ud800b")), {"__kinetic_str__": ["a", 0xD800, "b"]})
        self.assertEqual(json.loads(kr.encode_value({"k\udfff": 1})),
                         {"__kinetic_dict__": [[{"__kinetic_str__": ["k", 0xDFFF]}, 1]]})
        # A user's object that merely looks like a tag is not read as one.
        self.assertEqual(kr.from_wire({"__kinetic_str__": ["a", 65]}), {"__kinetic_str__": ["a", 65]})

    def test_depth_limit(self):
        value = 1
        for _ in range(kr.MAX_JSON_DEPTH):
            value = [value]
        self.assertEqual(kr.json_depth(kr.encode_value(value)), kr.MAX_JSON_DEPTH)
        with self.assertRaisesRegex(ValueError, "512 levels"):
            kr.encode_value([value])
        self.assertEqual(kr.json_depth('["[[[", {"a": [1]}]'), 3)


class ValuesEndToEndTests(RunnerTestCase):
    def test_big_integers_both_ways(self):
        big = 2 ** 100
        run = self.run_job({"work.py": WORK}, function_entry("echo"), args=[big], kwargs={"n": -big})
        self.assertSucceeded(run, {"args": [big], "kwargs": {"n": -big}})
        run = self.run_job({"work.py": WORK}, function_entry("big"))
        with kr.unlimited_int_digits():
            self.assertSucceeded(run, [2 ** 100, -(3 ** 90), 10 ** 5000])

    def test_deep_values_up_to_the_limit(self):
        run = self.run_job({"work.py": WORK}, function_entry("nested"), args=[300])
        self.assertEqual(run.returncode, 0, run)
        self.assertEqual(kr.json_depth(json.dumps(run.result["value"])), 300)
        run = self.run_job({"work.py": WORK}, function_entry("nested"), args=[513])
        self.assertFailed(run, "result serialization", "ResultNotJSON", ["512 levels"])

    def test_numbers_beyond_a_float_are_refused_naming_the_argument(self):
        for text, where in (("[1, [1e999]]", "argument 1"), ('{"x": -1E400}', "keyword argument 'x'"),
                            ("[1.5e-999]", "argument 0")):
            with self.subTest(text=text):
                field = "kwargs" if text.startswith("{") else "args"
                spec = self.spec({"work.py": WORK}, function_entry("echo"), **{field: "@VALUE@"})
                uri = self.write_spec(spec)
                path = uri[len("file://"):]
                with open(path, encoding="utf-8") as f:
                    doc = f.read().replace('"@VALUE@"', text)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(doc)
                run = self.run_runner(uri)
                number = text.strip("[]{}").split()[-1].strip("[]")
                self.assertFailed(run, "startup", "RunnerError", [where, number, "out of the range"])
        # In range, and integers of any size, are numbers as before.
        run = self.run_job({"work.py": WORK}, function_entry("echo"), args=[1e300, 5e-324, 0.0, 10 ** 400])
        self.assertSucceeded(run, {"args": [1e300, 5e-324, 0.0, 10 ** 400], "kwargs": {}})

    def test_surrogate_strings_are_tagged_and_read_back(self):
        run = self.run_job({"work.py": WORK}, function_entry("lone"))
        self.assertSucceeded(run, {"__kinetic_str__": ["a", 0xD800, "b"]})
        run = self.run_job({"work.py": WORK}, function_entry("codes"),
                           args=[{"__kinetic_str__": ["a", 0xD800, "b"]}])
        self.assertSucceeded(run, [97, 0xD800, 98])


if __name__ == "__main__":
    unittest.main()
