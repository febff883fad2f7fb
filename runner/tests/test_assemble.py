"""The runner's build: the package's modules joined into the one shipped
file in the order of its __init__.py, and the package shapes that file
could not keep refused (crates/runner/build.rs follows the same rules; a
test of that crate checks both give the same bytes)."""

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from runner import assemble
from runner.tests import support

PACKAGE = os.path.join(support.RUNNER_DIR, "kinetic_runner")


class BuiltRunnerTests(unittest.TestCase):
    def test_every_module_is_built_in_once_and_no_package_import_is_left(self):
        with open(support.RUNNER, encoding="utf-8") as f:
            built = f.read()
        modules = sorted(n for n in os.listdir(PACKAGE) if n.endswith(".py") and n != "__init__.py")
        self.assertGreaterEqual(len(modules), 10)
        for module in modules:
            self.assertEqual(built.count("\n# ---- kinetic_runner/%s\n" % module), 1, module)
        self.assertEqual(built.count("\n# ---- kinetic_runner/"), len(modules))
        self.assertNotIn("\nfrom .", built)
        ast.parse(built)

    def test_the_package_and_the_built_file_have_the_same_names(self):
        from runner import kinetic_runner as kr
        namespace = {"__name__": "built"}
        with open(support.RUNNER, encoding="utf-8") as f:
            exec(compile(f.read(), support.RUNNER, "exec"), namespace)
        public = {n for n in dir(kr) if not n.startswith("_")} - {"annotations"}
        missing = sorted(n for n in public if n not in namespace and not isinstance(getattr(kr, n), type(os)))
        self.assertEqual(missing, [])

    def test_the_command_line_builds_the_same_file(self):
        proc = subprocess.run([sys.executable, os.path.join(support.RUNNER_DIR, "assemble.py"), "-"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(support.RUNNER, encoding="utf-8") as f:
            self.assertEqual(proc.stdout, f.read())


class RefusedShapesTests(unittest.TestCase):
    """Each refusal on a copy of the package with one file changed."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="kinetic-assemble-test-")
        self.addCleanup(shutil.rmtree, self.root, True)
        shutil.copytree(PACKAGE, os.path.join(self.root, "kinetic_runner"))
        shutil.copy(os.path.join(support.RUNNER_DIR, "kinetic_job.py"), self.root)

    def append(self, module, text):
        with open(os.path.join(self.root, "kinetic_runner", module + ".py"), "a", encoding="utf-8") as f:
            f.write(text)

    def assertRefused(self, message):
        with self.assertRaises(assemble.AssemblyError) as caught:
            assemble.assemble(self.root)
        self.assertEqual(str(caught.exception), message)

    def test_the_copy_builds(self):
        self.assertEqual(assemble.assemble(self.root), assemble.assemble())

    def test_an_import_circle_is_refused(self):
        self.append("protocol", "from .main import main\n")
        self.assertRefused("kinetic_runner/protocol.py imports .main, which is not listed before it in __init__.py")

    def test_a_name_two_modules_define_is_refused(self):
        self.append("main", "\n\ndef log(phase, message):\n    pass\n")
        self.assertRefused("log is defined by both kinetic_runner/protocol.py and kinetic_runner/main.py")

    def test_a_module_imported_whole_is_refused(self):
        self.append("main", "from . import protocol\n")
        self.assertRefused("kinetic_runner/main.py: 'from . import protocol': "
                           "import names from a module (from .module import name)")


if __name__ == "__main__":
    unittest.main()
