"""Debug jobs from the Python API: ``@kinetic.run(debug=True)`` starts
debugpy in the job, ``JobHandle.debug_attach`` forwards a local port to it
and gives the VS Code launch configuration, and a small Debug Adapter
Protocol client written here attaches through that port, continues from
where the job stopped, and the value comes back. A debug job is kept once
its value came back unless cleanup is asked for.

A debug job needs debugpy in its image: the project's requirements name it
(on the fake cloud the image installs it from the wheelhouse
``scripts/test.sh`` downloads; locally the jobs run on this interpreter,
which has it)."""

import gc
import json
import os
import socket
import threading
import time

import pytest

import kinetic
from kinetic import JobStatus

LIMIT = 120


@pytest.fixture(autouse=True)
def debugpy_in_the_requirements(kinetic_env):
    (kinetic_env / "requirements.txt").write_text("debugpy\n")


class Dap:
    """One DAP connection: Content-Length framed JSON over TCP."""

    def __init__(self, port: int, timeout: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = self.sock.makefile("rb")
        self.seq = 0

    def request(self, command: str, arguments: dict) -> None:
        self.seq += 1
        body = json.dumps({"seq": self.seq, "type": "request", "command": command,
                           "arguments": arguments}).encode()
        self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def next(self):
        """The next message, or None once the connection closed."""
        length = None
        while True:
            line = self.reader.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        assert length is not None, "a DAP message without Content-Length"
        return json.loads(self.reader.read(length))

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def attach_and_continue(port: int, limit: float = LIMIT):
    """Attach as VS Code does (``initialize``, ``attach``, then
    ``configurationDone`` once ``initialized`` came), ``continue`` on the
    first ``stopped`` event, and read on until the debugger goes away.
    Gives the ``stopped`` event's body, None when the job never stopped."""
    deadline = time.monotonic() + limit
    dap = Dap(port, limit)
    try:
        dap.request("initialize", {"clientID": "kinetic-test", "adapterID": "debugpy", "linesStartAt1": True,
                                   "columnsStartAt1": True, "pathFormat": "path"})
        dap.request("attach", {"justMyCode": False})
        stopped = None
        while True:
            message = dap.next()
            if message is None:
                break
            assert time.monotonic() < deadline, "the debug session took longer than %ss" % limit
            kind, event = message.get("type"), message.get("event")
            if kind == "event" and event == "initialized":
                dap.request("configurationDone", {})
            elif kind == "event" and event == "stopped" and stopped is None:
                stopped = message["body"]
                dap.request("continue", {"threadId": stopped.get("threadId")})
            elif kind == "event" and event in ("terminated", "exited"):
                break
            elif kind == "response" and message.get("success") is False:
                pytest.fail("the debugger refused a request: %r" % (message,))
        return stopped
    finally:
        dap.close()


def debug_square(x):
    import work

    return kinetic.run(accelerator="cpu", debug=True)(work.square).run_async(x)


def test_a_debugger_attaches_through_debug_attach_and_the_job_is_kept(kinetic_env, capsys):
    job = debug_square(7)
    assert job.debug is True
    with job.debug_attach(local_port=0, working_dir=".", timeout=LIMIT) as session:
        assert session.forwarding
        out = capsys.readouterr().out
        assert '"request": "attach"' in out and str(session.local_port) in out, out
        config = session.launch_config["configurations"][0]
        assert config["type"] == "debugpy" and config["request"] == "attach", config
        assert config["connect"] == {"host": "localhost", "port": session.local_port}
        assert session.local_port != 0
        mapping = config["pathMappings"][0]
        assert os.path.realpath(mapping["localRoot"]) == os.path.realpath(str(kinetic_env))
        assert mapping["remoteRoot"], mapping

        stopped = attach_and_continue(session.local_port)
        assert stopped is not None, "the job stopped before the call"
        assert job.result(timeout=LIMIT) == 49
    assert not session.forwarding
    # cleanup=None is `not debug`: the job is kept, its logs readable.
    assert job.status() is JobStatus.SUCCEEDED
    assert "debugger attached" in job.logs()
    job.cleanup()


def test_debug_attach_returns_the_port_forward_process_as_the_reference_does():
    # Issue 26.3: code written to the reference — a subprocess.Popen, and
    # kinetic.debug.cleanup_port_forward(proc) when done.
    import subprocess

    job = debug_square(5)
    proc = job.debug_attach(local_port=0, timeout=LIMIT)
    assert isinstance(proc, subprocess.Popen)
    assert proc.poll() is None and proc.returncode is None
    assert proc.pid != os.getpid() and os.path.exists("/proc/%d" % proc.pid)
    port = proc.local_port
    kinetic.debug.cleanup_port_forward(proc)
    assert proc.returncode is not None and not proc.forwarding
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    kinetic.debug.cleanup_port_forward(proc)  # a forward that ended: nothing to do
    with pytest.raises(TypeError, match=r"cleanup_port_forward\(proc=.*expected the subprocess.Popen"):
        kinetic.debug.cleanup_port_forward(port)

    # A forward left running ends by itself when the job ends, exit code 0.
    proc = job.debug_attach(local_port=0, timeout=LIMIT)
    assert attach_and_continue(proc.local_port) is not None
    assert job.result(timeout=LIMIT) == 25
    assert proc.wait(timeout=LIMIT) == 0
    job.cleanup()


def test_cleanup_asked_for_removes_a_debug_job():
    job = debug_square(3)
    with job.debug_attach(local_port=0, timeout=LIMIT) as session:
        assert session.launch_config["configurations"][0]["pathMappings"][0]["localRoot"] == "${workspaceFolder}"
        assert attach_and_continue(session.local_port) is not None
        assert job.result(timeout=LIMIT, cleanup=True) == 9
    assert job.status() is JobStatus.NOT_FOUND


def test_close_stops_forwarding_and_the_port_is_free_again():
    job = debug_square(2)
    try:
        session = job.debug_attach(local_port=0, timeout=LIMIT)
        port = session.local_port
        session.close()
        session.close()
        assert not session.forwarding
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        # A session dropped unclosed forwards on (until the job ends).
        port = job.debug_attach(local_port=0, timeout=LIMIT).local_port
        gc.collect()
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError):
                probe.bind(("127.0.0.1", port))
        # Another forward serves the job as well.
        with job.debug_attach(local_port=0, timeout=LIMIT) as again:
            assert attach_and_continue(again.local_port) is not None
            assert job.result(timeout=LIMIT) == 4
    finally:
        job.cancel()


def test_a_job_ending_before_its_debugger_listens_is_a_runtime_error(kinetic_env):
    # debugpy made unimportable for this job: the project's own module of
    # that name shadows the installed one.
    (kinetic_env / "debugpy.py").write_text("raise ImportError(\"No module named 'debugpy'\")\n")
    job = debug_square(3)
    with pytest.raises(RuntimeError, match=r"Job %s reached terminal state \(FAILED\) before debugpy server was ready\."
                       % job.job_id):
        job.debug_attach(local_port=0, timeout=LIMIT)
    with pytest.raises(RuntimeError, match="debugger setup"):
        job.result(timeout=LIMIT)


def test_debug_attach_times_out_and_refuses_a_job_run_without_debug():
    job = debug_square(4)
    try:
        with pytest.raises(TimeoutError):
            job.debug_attach(local_port=0, timeout=0)
    finally:
        job.cancel()
    import work

    plain = kinetic.run(accelerator="cpu")(work.square).run_async(5)
    with pytest.raises(ValueError, match="was not submitted with debug"):
        plain.debug_attach(local_port=0)
    for bad in (-1, 70000, "5678", True):
        with pytest.raises(ValueError, match="local_port="):
            plain.debug_attach(local_port=bad)
    assert plain.result() == 25


def test_calling_a_debug_function_without_a_terminal_says_how_to_attach(monkeypatch):
    import work

    monkeypatch.delenv("KINETIC_NO_TTY_DEBUG", raising=False)
    with pytest.raises(RuntimeError, match="stdin is not a terminal") as err:
        kinetic.run(accelerator="cpu", debug=True)(work.square)(6)
    job_id = str(err.value).split()[1]
    kinetic.attach(job_id).cancel()


def test_calling_a_debug_function_forwards_port_5678_and_gives_the_value(monkeypatch, capsys):
    import work

    monkeypatch.setenv("KINETIC_NO_TTY_DEBUG", "1")
    stopped = []

    def debugger():
        deadline = time.monotonic() + LIMIT
        while time.monotonic() < deadline:
            try:
                stopped.append(attach_and_continue(5678))
                return
            except ConnectionRefusedError:
                time.sleep(0.2)

    thread = threading.Thread(target=debugger, daemon=True)
    thread.start()
    assert kinetic.run(accelerator="cpu", debug=True)(work.square)(8) == 64
    thread.join(LIMIT)
    assert stopped and stopped[0] is not None, "the debugger did not attach on localhost:5678"
    out = capsys.readouterr().out
    assert '"port": 5678' in out, out
    # The forward is closed once the value came back: nothing listens there.
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", 5678), timeout=5).close()


def test_debug_with_spot_warns():
    with pytest.warns(UserWarning, match="spot=True"):
        kinetic.run(accelerator="cpu", debug=True, spot=True)


@pytest.mark.parametrize("backend", ["pathways"])
def test_a_debugger_attaches_to_the_leader_of_a_pathways_job(backend):
    # The pathways backend forwards to its LeaderWorkerSet's leader pod on
    # the fake cloud (its multi-host waiting is covered by the CLI's test on
    # a v5litepod-16 slice).
    import work

    job = kinetic.run(accelerator="cpu", backend=backend, debug=True)(work.square).run_async(6)
    with job.debug_attach(local_port=0, timeout=LIMIT) as session:
        assert attach_and_continue(session.local_port) is not None, "the job stopped before the call"
        assert job.result(timeout=LIMIT) == 36
    assert job.status() is JobStatus.SUCCEEDED
    assert "debugger attached" in job.logs()
    job.cleanup()
