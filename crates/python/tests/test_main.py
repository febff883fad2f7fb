"""The user's first program, as a user writes it: ``import kinetic`` at the
top of a script, a decorated function, a call (no ``__main__`` guard); the
same at the interpreter's prompt and in a notebook. A function of
``__main__`` travels by value (cloudpickle), so the script's top level never
runs in a job: each program gives exactly one job (every job below writes
its id to ``jobs.txt``), and classes and exceptions defined in ``__main__``
come back as themselves.

Each runs on the three backends: ``local``, and ``gke`` and ``pathways`` on
kinetic-fake-gcp, whose pods run in the image the fake Cloud Build made (a
fresh venv: not this interpreter, nor its packages)."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(HERE))), "README.md")


@pytest.fixture(params=["local", "gke", "pathways"])
def backend(request):
    """This module's programs run on every backend (conftest's default is
    local and gke)."""
    return request.param


# Prepended to every program: where its jobs write their ids, each with the
# environment (``sys.prefix``) the job ran in and whether it ran in a pod of
# a LeaderWorkerSet (the pathways backend's).
RECORD = """\
import os as _os
import sys as _sys

def _record():
    with open({path!r}, "a") as _f:
        _lws = "lws" if "LWS_LEADER_ADDRESS" in _os.environ else "-"
        _f.write(" ".join([_os.environ["KINETIC_JOB_ID"], _lws, _os.path.realpath(_sys.prefix)]) + "\\n")

"""


def _program(project, source: str) -> str:
    return RECORD.format(path=str(project / "jobs.txt")) + textwrap.dedent(source)


def _recorded(project) -> list:
    path = project / "jobs.txt"
    return [line.split(" ", 2) for line in path.read_text().splitlines()] if path.exists() else []


def _jobs(project) -> list:
    return [job for job, _, _ in _recorded(project)]


@pytest.fixture(autouse=True)
def jobs_ran_in_their_image(kinetic_env, backend):
    """On the fake cloud, every job this module's programs made ran in its
    image's environment, never this interpreter's (whose packages it would
    see), and on pathways in a LeaderWorkerSet's pod."""
    yield
    if backend != "local":
        here = os.path.realpath(sys.prefix)
        for job, lws, prefix in _recorded(kinetic_env):
            assert prefix != here, "job %s ran on the tests' interpreter %s" % (job, prefix)
            assert (lws == "lws") == (backend == "pathways"), "job %s on %s: %s" % (job, backend, lws)


def run_script(project, source: str, timeout: float = 180) -> str:
    """Runs ``source`` as ``python3 script.py`` in the project; its stdout."""
    script = project / "script.py"
    script.write_text(_program(project, source))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=timeout,
                         cwd=str(project))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def run_prompt(project, source: str, timeout: float = 180) -> str:
    """Feeds ``source`` to ``python3 -i`` on stdin, as typed at the prompt; its stdout."""
    out = subprocess.run([sys.executable, "-i", "-q"], input=_program(project, source) + "\n", capture_output=True,
                         text=True, timeout=timeout, cwd=str(project))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return out.stdout


def test_the_reference_shape_unguarded_gives_one_job_and_its_value(kinetic_env):
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu")
        def train(steps):
            _record()
            return {"loss": 1.0 / steps, "steps": steps}

        print("value", train(4))
    """)
    assert "value {'loss': 0.25, 'steps': 4}" in out
    assert len(_jobs(kinetic_env)) == 1


@pytest.mark.parametrize("guarded", [False, True])
def test_guarded_and_unguarded_scripts_give_the_same_single_job(kinetic_env, guarded):
    call = 'print("value", cube(3))'
    if guarded:
        call = 'if __name__ == "__main__":\n    ' + call
    out = run_script(kinetic_env, textwrap.dedent("""
        import kinetic

        print("top level ran")

        @kinetic.run(accelerator="cpu")
        def cube(x):
            _record()
            return x ** 3

    """) + call + "\n")
    assert "value 27" in out
    assert out.count("top level ran") == 1, out  # never in the job: its output would stream back here
    assert len(_jobs(kinetic_env)) == 1


def test_the_references_data_example(kinetic_env):
    (kinetic_env / "my_dataset").mkdir()
    (kinetic_env / "my_dataset" / "a.txt").write_text("alpha")
    (kinetic_env / "config.json").write_text('{"lr": 0.1}')
    out = run_script(kinetic_env, """
        import json
        import os
        import kinetic
        from kinetic import Data

        @kinetic.run(accelerator="cpu")
        def read(data_dir, config):
            _record()
            with open(config) as f:
                lr = json.load(f)["lr"]
            return sorted(os.listdir(data_dir)), lr

        print("value", read(Data("./my_dataset/"), Data("./config.json")))
    """)
    assert "value (['a.txt'], 0.1)" in out
    assert len(_jobs(kinetic_env)) == 1


def test_the_faqs_run_async_then_result(kinetic_env):
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu")
        def train(epochs):
            _record()
            return epochs * 10

        job = train.run_async(3)
        print("status", job.status().name in ("PENDING", "RUNNING", "SUCCEEDED"))
        # ... walk away, reattach later (from any process):
        print("value", kinetic.attach(job.job_id).result())
    """)
    assert "status True" in out and "value 30" in out, out
    assert len(_jobs(kinetic_env)) == 1


def test_the_dependencies_pages_first_run(kinetic_env):
    # A requirements.txt next to the script; the function imports the
    # package inside (one the test's interpreter has: no index is reached).
    (kinetic_env / "requirements.txt").write_text("cloudpickle\n")
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu")
        def train():
            import cloudpickle  # installed automatically on the remote
            _record()
            return cloudpickle.__name__

        print("value", train())
    """)
    assert "value cloudpickle" in out
    assert len(_jobs(kinetic_env)) == 1


def test_classes_and_exceptions_of_main_come_back_as_themselves(kinetic_env):
    out = run_script(kinetic_env, """
        import dataclasses
        import kinetic

        class MyError(Exception):
            pass

        @dataclasses.dataclass
        class Point:
            x: int
            y: int

        @kinetic.run(accelerator="cpu")
        def move(p, dx):
            _record()
            if dx < 0:
                raise MyError("cannot move back by %d" % -dx)
            return Point(p.x + dx, p.y)

        moved = move(Point(1, 2), 3)
        print("moved", moved, type(moved) is Point)
        try:
            move(Point(1, 2), -1)
        except MyError as err:
            print("caught", type(err) is MyError, err)
    """)
    assert "moved Point(x=4, y=2) True" in out
    assert "caught True cannot move back by 1" in out
    assert len(_jobs(kinetic_env)) == 2


def test_a_decorated_function_called_in_a_job_runs_there(kinetic_env):
    out = run_script(kinetic_env, """
        import kinetic

        @kinetic.run(accelerator="cpu")
        def inner(x):
            return x + 1

        @kinetic.run(accelerator="cpu")
        def outer(x):
            _record()
            try:
                inner.run_async(x)
            except kinetic.ClientOnlyError as err:
                refused = "cannot be called inside a Kinetic job" in str(err)
            return inner(x) * 10, refused

        print("value", outer(1))
    """)
    assert "value (20, True)" in out
    assert len(_jobs(kinetic_env)) == 1


def test_a_function_typed_at_the_prompt(kinetic_env):
    out = run_prompt(kinetic_env, """
        import kinetic
        class MyError(Exception):
            pass

        @kinetic.run(accelerator="cpu")
        def add(a, b):
            _record()
            if a < 0:
                raise MyError("negative")
            return a + b

        print("value", add(2, 40))
        try:
            add(-1, 0)
        except MyError as err:
            print("caught", type(err).__name__, err)

    """)
    assert "value 42" in out and "caught MyError negative" in out, out
    assert len(_jobs(kinetic_env)) == 2


def test_a_function_in_a_notebook_cell(kinetic_env):
    nbformat = pytest.importorskip("nbformat", reason="scripts/test.sh installs nbformat, nbclient, ipykernel")
    nbclient = pytest.importorskip("nbclient")
    cells = [
        _program(kinetic_env, "import kinetic\n"),
        textwrap.dedent("""
            class MyError(Exception):
                pass

            @kinetic.run(accelerator="cpu")
            def scale(x, k=2):
                _record()
                if x is None:
                    raise MyError("nothing to scale")
                return [v * k for v in x]
        """),
        'print("value", scale([1, 2, 3], k=3))',
        textwrap.dedent("""
            try:
                scale(None)
            except MyError as err:
                print("caught", type(err).__name__, err)
        """),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(kinetic_env)}}).execute()
    text = "".join(o.get("text", "") for cell in nb.cells for o in cell.get("outputs", []))
    assert "value [3, 6, 9]" in text and "caught MyError nothing to scale" in text, text
    assert len(_jobs(kinetic_env)) == 2


def _readme_quick_start() -> str:
    with open(README) as f:
        text = f.read()
    start = text.index("From Python")
    return re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)


def test_the_readmes_quick_start_runs_as_a_script_and_at_the_prompt(kinetic_env):
    source = _readme_quick_start()
    assert "__main__" not in source
    script = kinetic_env / "quick_start.py"
    script.write_text(source)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         cwd=str(kinetic_env))
    assert out.returncode == 0, out.stdout + out.stderr
    # At the prompt each expression's value is echoed.
    out = subprocess.run([sys.executable, "-i", "-q"], input=source + "\n", capture_output=True, text=True,
                         timeout=300, cwd=str(kinetic_env))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    assert out.stdout.count("49") >= 2, out.stdout


def test_without_cloudpickle_a_main_function_is_a_clear_error(monkeypatch):
    import kinetic

    def typed_at_the_prompt(x):
        return x

    typed_at_the_prompt.__module__ = "__main__"
    typed_at_the_prompt.__qualname__ = "typed_at_the_prompt"
    monkeypatch.setitem(sys.modules, "cloudpickle", None)  # as if not installed
    with pytest.raises(TypeError, match=r"typed_at_the_prompt \(defined in __main__.*pip install cloudpickle"):
        kinetic.run(accelerator="cpu")(typed_at_the_prompt)
