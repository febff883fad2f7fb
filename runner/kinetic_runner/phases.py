"""The run: the phases of one job, from download to result."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import threading

from .protocol import (
    DATA, DEBUG, DOWNLOAD, ENVIRONMENT, EXECUTE, EXIT_FAILED, EXIT_OK, EXTRACT, INSTALL, LOAD, PROTOCOL,
    RunnerError, SERIALIZE, STARTUP, UPLOAD, VERIFY, flush_streams, log, warn, write_stderr,
)
from .gcs import Storage, result_target
from .redaction import Redactor
from .attempts import ATTEMPT_ENV, host_index_from_env, resolve_attempt
from .environment import topology_env
from .debug import (
    LEADER_SETUP_GRACE_SECONDS, WAIT_LEADER_ENV, debug_listen_address, import_debugpy, wait_for_leader,
    waits_for_leader,
)
from .context import is_inside, extract_context
from .plan import PlanActions, plan_actions, read_plan
from .artifacts import sha256_file
from .job_module import place_job_module
from .data import DataResolver, mount_target
from .values import from_wire, json_keeps
from .spec import Spec
from .results import PhaseFailure, safe_repr, safe_str, failure_document, success_document
from .python_values import RUNNER_MODULE, call_pickled, decode_python_values, pickled_document
from .processes import ensure_cloudpickle, install_command, run_capturing_stderr, wait_forwarding_signals


class Runner:
    def __init__(self, spec_doc: dict, storage: Storage, workdir: str | None, mount_root: str, environ=None) -> None:
        self.spec_doc = spec_doc
        self.redactor = Redactor.from_spec(spec_doc, os.environ if environ is None else environ)
        self.storage = storage
        self.workdir = workdir
        self.mount_root = mount_root
        self.environ = os.environ if environ is None else environ
        self.result_uri = spec_doc["result_uri"]
        self.host_index = 0
        self.attempt = 1
        self.tmp: str | None = None
        self.workspace: str | None = None
        self.spec: Spec | None = None
        self.plan: PlanActions | None = None
        self.job_module_dir: str | None = None
        self.fn = None
        # A preparation's: the spec.json URI and document of the job the
        # worker forks next (read by the worker already).
        self.next_spec: tuple | None = None

    # -- driver

    def run(self, prepared: "Runner | None" = None) -> int:
        """The job, every phase; with ``prepared`` (a runner whose
        ``prepare`` succeeded for a spec of the same ``shared_key``: a pool
        worker's), only the phases of this input, on what it prepared."""
        success = False
        try:
            self._phase(STARTUP, lambda: self.startup(own_dir=prepared is None))
            if prepared is None:
                self._shared_phases()
            else:
                self.adopt(prepared)
            self._phase(ENVIRONMENT, self.setup_environment)
            args, kwargs = self._phase(DATA, self.resolve_data)
            if self.spec.entrypoint["kind"] == "command":
                if self.spec.debug is not None:
                    self._phase(DEBUG, self.refuse_command_debug)
                value = self._phase(EXECUTE, self.run_command)
            else:
                fn = self.fn if prepared is not None else self._phase(LOAD, self.load_entrypoint, user_code=True)
                if self.spec.python_values is not None:
                    args, kwargs = self._phase(DATA, lambda: (decode_python_values(args), decode_python_values(kwargs)),
                                               user_code=True)
                debugger = None
                if self.spec.debug is not None and self.host_index == 0:
                    debugger = self._phase(DEBUG, self.start_debugger)
                elif self.spec.debug is not None:
                    self._phase(DEBUG, self.wait_for_leader)
                value = self.call(fn, args, kwargs, debugger)
            if self.host_index != 0:
                log(EXECUTE, "host %d succeeded (only the leader writes a success result)" % self.host_index)
                return EXIT_OK
            document = self._phase(SERIALIZE, lambda: self.serialize(value))
            success = True
        except PhaseFailure as failure:
            error = self.redactor.error(failure.error)
            log(error["phase"], "failed: %s: %s" % (error["type"], error["message"]))
            if error["traceback"]:
                write_stderr(error["traceback"])
            document = failure_document(error, self.host_index)
        target = result_target(self.spec_doc, self.host_index)
        if target is None:
            log(UPLOAD, "spec.json names no result URI for host %d (see worker_result_uris); nothing written"
                % self.host_index)
            return EXIT_FAILED
        try:
            self.storage.write_bytes(target, document.encode("utf-8"))
        except Exception as err:  # noqa: BLE001 - nothing is left to report to
            log(UPLOAD, "cannot write the result to %s: %s: %s" % (target, type(err).__name__, err))
            if success or not isinstance(err, OSError):
                return EXIT_FAILED
            # A full disk: the failure without its traceback may still fit,
            # and says what failed rather than nothing.
            error = dict(error, traceback="(traceback not kept: %s)" % safe_str(err))
            try:
                self.storage.write_bytes(target, failure_document(error, self.host_index).encode("utf-8"))
            except Exception as again:  # noqa: BLE001
                log(UPLOAD, "cannot write the failure without its traceback either: %s: %s"
                    % (type(again).__name__, again))
                return EXIT_FAILED
            log(UPLOAD, "wrote %s (failure, without its traceback)" % target)
            return EXIT_FAILED
        log(UPLOAD, "wrote %s (%s)" % (target, "success" if success else "failure"))
        return EXIT_OK if success else EXIT_FAILED

    def _shared_phases(self) -> None:
        """The phases that are the same for every input of a batch (see
        ``shared_key``), but for the environment, which depends on the input."""
        self._phase(DOWNLOAD, self.download)
        self._phase(VERIFY, self.verify)
        if self.spec.requirements is not None:
            self._phase(INSTALL, self.install)
        self._phase(EXTRACT, self.extract)

    def prepare(self) -> None:
        """A pool worker's run of the shared phases, once for the inputs
        that follow: startup, download, verify, install, extract, the
        environment (the captured names checked before the import, as a
        run does) and, for a function, its import. Raises the
        ``PhaseFailure`` a run would report; ``self.fn`` is the function."""
        self._phase(STARTUP, self.open_run)
        self._shared_phases()
        self._phase(ENVIRONMENT, self.setup_environment)
        if self.spec.entrypoint["kind"] == "function":
            self.fn = self._phase(LOAD, self.load_entrypoint, user_code=True)

    def adopt(self, prepared: "Runner") -> None:
        """Run on what ``prepared`` (a worker's) downloaded, extracted and
        imported: its workspace, plan and function; its ``sys.path``
        entries are this process's already (a fork of the worker)."""
        self.plan = prepared.plan
        self.workspace = prepared.workspace
        self.job_module_dir = prepared.job_module_dir
        self.fn = prepared.fn
        if not self.plan.legacy:
            os.chdir(self.plan.cwd)
        log(STARTUP, "download, verify, %sextract%s done once by this worker (for job %s) and shared with "
            "the other inputs it runs; isolation \"process\" runs each input alone" % (
                "install, " if self.spec.requirements is not None else "",
                " and load" if self.fn is not None else "", prepared.spec.job_id))

    def _phase(self, phase: str, fn, user_code: bool = False):
        flush_streams()
        try:
            return fn()
        except PhaseFailure:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a result
            raise PhaseFailure.from_exception(phase, exc, user_code) from None
        finally:
            flush_streams()

    def cleanup(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    # -- phases

    def startup(self, own_dir: bool = True) -> None:
        self.open_run(own_dir)
        log(STARTUP, "job %s, host %d, runner protocol %d, Python %s" % (
            self.spec.job_id, self.host_index, PROTOCOL, sys.version.split()[0]))
        self.attempt, how = resolve_attempt(self.spec, self.storage, self.environ, self.host_index)
        log(STARTUP, "attempt %d (%s)" % (self.attempt, how))

    def open_run(self, own_dir: bool = True) -> None:
        """The host, the spec and the run's own directory. Without
        ``own_dir`` (a fork on a worker's preparation, which needs the
        directory only for the data it fetches, if any) the directory under
        ``--workdir`` is named, and made only by what writes there: a
        directory made and removed per input costs more than the call."""
        self.host_index, warnings = host_index_from_env(self.environ)
        for message in warnings:
            warn(STARTUP, message)
        self.spec = Spec(self.spec_doc)
        if self.workdir and not own_dir:
            self.tmp = os.path.join(os.path.abspath(self.workdir), "kinetic-run-%s" % os.urandom(6).hex())
        elif self.workdir:
            self.tmp = make_run_dir(self.workdir)
        else:
            import tempfile
            self.tmp = tempfile.mkdtemp(prefix="kinetic-run-")
        self.workspace = os.path.join(self.tmp, "workspace")

    def download(self) -> None:
        for name, artifact, dest in self._artifacts():
            size = self.storage.download(artifact["uri"], dest)
            log(DOWNLOAD, "%s: %s (%d bytes)" % (name, artifact["uri"], size))

    def _artifacts(self):
        yield "context", self.spec.context, os.path.join(self.tmp, "context.zip")
        if self.spec.requirements is not None:
            yield "requirements", self.spec.requirements, os.path.join(self.tmp, "requirements.txt")

    def verify(self) -> None:
        for name, artifact, path in self._artifacts():
            got = sha256_file(path)
            if got != artifact["sha256"]:
                raise RunnerError(
                    "%s SHA-256 mismatch: expected %s, got %s; refusing to run (the file may have been tampered with)"
                    % (name, artifact["sha256"], got))
        log(VERIFY, "SHA-256 verified")

    def install(self) -> None:
        import shlex
        path = os.path.join(self.tmp, "requirements.txt")
        with open(path, "rb") as f:
            if not f.read().strip():
                log(INSTALL, "requirements file is empty; nothing to install")
                return
        argv = install_command(self.environ, path)
        log(INSTALL, "running %s" % shlex.join(argv))
        code, tail = run_capturing_stderr(argv)
        if code != 0:
            raise RunnerError("%s exited with code %d%s" % (
                shlex.join(argv), code, ("; stderr tail:\n" + tail) if tail else ""))

    def extract(self) -> None:
        workspace = self.workspace
        count = extract_context(os.path.join(self.tmp, "context.zip"), workspace, self.spec.extract_limits)
        log(EXTRACT, "%d entries extracted" % count)
        plan = read_plan(self.spec.plan, workspace)
        self.plan = plan_actions(plan, workspace)
        for message in self.plan.warnings:
            warn(EXTRACT, message)
        sys.path[0:0] = self.plan.sys_path
        self.job_module_dir = place_job_module(self.tmp)
        if self.plan.legacy:
            log(EXTRACT, "no usable plan; workspace root first on sys.path, cwd unchanged")
        else:
            os.chdir(self.plan.cwd)
            log(EXTRACT, "plan applied: %d sys.path entr%s, cwd %s" % (
                len(self.plan.sys_path), "y" if len(self.plan.sys_path) == 1 else "ies",
                os.path.relpath(self.plan.cwd, workspace)))

    def setup_environment(self) -> None:
        spec = self.spec
        missing = [name for name in spec.env_names if name not in self.environ]
        if missing:
            raise RunnerError("missing environment variables listed in spec.env_names: %s" % ", ".join(missing))
        env = self.environ
        env["KINETIC_JOB_ID"] = spec.job_id
        env[ATTEMPT_ENV] = str(self.attempt)
        if spec.output_dir is not None:
            env["KINETIC_OUTPUT_DIR"] = spec.output_dir
        env.update(topology_env(spec, self.host_index, env))
        volumes = {}
        for volume in spec.volumes:
            mount = volume["mount_path"]
            volumes[mount] = mount_target(self.mount_root, mount)
        env["KINETIC_VOLUMES"] = json.dumps(volumes)
        log(ENVIRONMENT, "%d captured variable%s present; KINETIC_* set" % (
            len(spec.env_names), "" if len(spec.env_names) == 1 else "s"))

    def resolve_data(self) -> tuple:
        resolver = DataResolver(self.storage, os.path.join(self.tmp, "data"), self.mount_root,
                                self.workspace)
        for volume in self.spec.volumes:
            resolver.resolve_volume(volume["mount_path"], volume["data"])
        args = resolver.walk(from_wire(self.spec.args))
        kwargs = resolver.walk(from_wire(self.spec.kwargs))
        if self.spec.volumes or resolver.objects:
            log(DATA, "%d volume%s, %d object%s fetched" % (
                len(self.spec.volumes), "" if len(self.spec.volumes) == 1 else "s",
                resolver.objects, "" if resolver.objects == 1 else "s"))
        return args, kwargs

    def load_entrypoint(self):
        entry = self.spec.entrypoint
        function = entry["function"]
        if entry.get("module") == RUNNER_MODULE and function == "call_pickled":
            ensure_cloudpickle(self.environ)
            log(LOAD, "%s.%s (a function pickled by value)" % (RUNNER_MODULE, function))
            return call_pickled
        if entry.get("module") is not None:
            owner = entry["module"]
            module = importlib.import_module(owner)
        else:
            module = self._load_path(entry["path"])
            owner = module.__name__
        target = module
        for part in function.split("."):
            try:
                target = getattr(target, part)
            except AttributeError:
                raise RunnerError("module %r has no attribute %r" % (owner, function)) from None
        # A function decorated with the kinetic module's @kinetic.run is the
        # decorator's wrapper here; the job runs the function it wraps.
        target = getattr(target, "__kinetic_function__", target)
        if not callable(target):
            raise RunnerError("%s.%s is not callable (it is a %s)" % (owner, function, type(target).__name__))
        log(LOAD, "%s.%s" % (owner, function))
        return target

    def _load_path(self, rel: str):
        workspace = self.workspace
        path = os.path.normpath(os.path.join(workspace, rel))
        if not is_inside(os.path.realpath(workspace), os.path.realpath(path)):
            raise RunnerError("entrypoint path %r is outside the workspace" % rel)
        if not os.path.isfile(path):
            raise RunnerError("entrypoint path %r is not a file in the context" % rel)
        name = module_name_for_path(os.path.relpath(path, workspace))
        existing = sys.modules.get(name)
        if existing is not None and getattr(existing, "__file__", None) != path:
            name = "_kinetic_entry_" + name.replace(".", "_")
        loader = importlib.machinery.SourceFileLoader(name, path)
        module_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return module

    def refuse_command_debug(self) -> None:
        raise RunnerError("a command cannot run under the debugger; debug runs a Python function")

    def start_debugger(self):
        """Start debugpy, say where it listens, and wait for a client; gives the module."""
        settings = self.spec.debug
        debugpy = import_debugpy()
        host, port = debug_listen_address(settings, self.environ)
        self.environ["PYTHONBREAKPOINT"] = "debugpy.breakpoint"
        host, port = debugpy.listen((host, port))
        workspace = os.path.realpath(self.workspace)
        marker = json.dumps({"host": host, "port": port, "workspace": workspace})
        self.storage.write_bytes(settings["ready_uri"], marker.encode("utf-8"))
        timeout = settings["wait_timeout_seconds"]
        log(DEBUG, "debugpy listens on %s:%d; waiting up to %ds for a debugger (kinetic jobs debug %s)" % (
            host, port, timeout, self.spec.job_id))
        flush_streams()
        waiter = threading.Thread(target=debugpy.wait_for_client, name="kinetic-debug-wait", daemon=True)
        waiter.start()
        waiter.join(timeout)
        if waiter.is_alive():
            debugpy.wait_for_client.cancel()
            raise RunnerError("no debugger attached within %ds (KINETIC_DEBUG_WAIT_TIMEOUT); attach with "
                              "`kinetic jobs debug %s` while the job waits" % (timeout, self.spec.job_id))
        leader_ready = settings["leader_ready_uri"]
        if leader_ready is not None:
            # Releases the other hosts of a multi-host job (wait_for_leader).
            self.storage.write_bytes(leader_ready, b"", "application/octet-stream")
        log(DEBUG, "debugger attached; stopping before the call")
        return debugpy

    def wait_for_leader(self) -> None:
        """On a host other than the leader: wait, when told to, until the leader's debugger has a client."""
        if not waits_for_leader(self.environ):
            return
        settings = self.spec.debug
        leader_ready = settings["leader_ready_uri"]
        if leader_ready is None:
            raise RunnerError("%s=1 asks this host to wait for the leader's debugger, but spec.debug names "
                              "no leader_ready_uri to wait for" % WAIT_LEADER_ENV)
        bound = settings["wait_timeout_seconds"] + LEADER_SETUP_GRACE_SECONDS
        log(DEBUG, "host %d waits up to %ds for the leader's debugger to have a client (%s)" % (
            self.host_index, bound, leader_ready))
        flush_streams()
        waited = wait_for_leader(self.storage, leader_ready, result_target(self.spec_doc, 0), bound)
        log(DEBUG, "the leader's debugger has a client (after %.1fs); host %d runs the function" % (
            waited, self.host_index))

    def call(self, fn, args: list, kwargs: dict, debugger=None):
        """The user's call; its exceptions are reported with their own names."""
        flush_streams()
        try:
            if debugger is not None:
                # Step into the user's function from here.
                debugger.breakpoint()
            value = fn(*args, **kwargs)
        except SystemExit as exc:
            if exc.code is None or exc.code == 0:
                return None
            raise PhaseFailure.from_exception(EXECUTE, exc, True) from None
        except BaseException as exc:  # noqa: BLE001
            raise PhaseFailure.from_exception(EXECUTE, exc, True) from None
        finally:
            flush_streams()
        return value

    def run_command(self):
        import shlex
        import subprocess
        argv = self.spec.entrypoint["argv"]
        cwd = self.workspace if self.plan.legacy else self.plan.cwd
        env = dict(self.environ)
        env["PYTHONPATH"] = os.pathsep.join([self.job_module_dir] + self.plan.sys_path
                                            + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        log(EXECUTE, "running %s" % shlex.join(argv))
        flush_streams()
        try:
            child = subprocess.Popen(argv, cwd=cwd, env=env)
        except OSError as err:
            raise PhaseFailure(EXECUTE, "CommandFailed", "cannot start %s: %s" % (shlex.join(argv), err), "")
        code = wait_forwarding_signals(child)
        if code == 0:
            return None
        if code < 0:
            try:
                signame = signal.Signals(-code).name
            except ValueError:
                signame = "signal %d" % -code
            message = "%s was killed by %s" % (shlex.join(argv), signame)
        else:
            message = "%s exited with code %d" % (shlex.join(argv), code)
        raise PhaseFailure(EXECUTE, "CommandFailed", message, "")

    def serialize(self, value) -> str:
        if self.spec.python_values is not None and not json_keeps(value):
            # The client reads pickles: a value JSON would change goes back pickled, exactly.
            try:
                return pickled_document(value, self.host_index)
            except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
                import traceback
                raise PhaseFailure(
                    SERIALIZE, "ResultNotJSON",
                    "the return value cannot travel as JSON without changing its types, and cannot be "
                    "pickled (%s: %s): %s" % (type(err).__name__, err, safe_repr(value)),
                    "".join(traceback.format_exception(type(err), err, err.__traceback__))) from None
        try:
            return success_document(value, self.host_index)
        except (TypeError, ValueError, RecursionError) as err:
            advice = ("; return JSON values (dict, list, str, int, float, bool, None), e.g. list(...) "
                      "or str(...), or call the function through the Python API (kinetic.run), which "
                      "carries Python values")
            if self.spec.python_values is not None:
                advice = "; return a value that JSON or pickle can carry"
                # The client reads pickles: a value JSON cannot hold goes back pickled.
                try:
                    return pickled_document(value, self.host_index)
                except Exception as pickle_err:  # noqa: BLE001 - reported below with the JSON error
                    err = TypeError("%s; pickling it failed too: %s: %s" % (err, type(pickle_err).__name__, pickle_err))
            # The encoder's frames say nothing the message does not: no traceback.
            raise PhaseFailure(
                SERIALIZE, "ResultNotJSON",
                "the function returned %s, which cannot be encoded as JSON (%s): %s%s"
                % (_article(type(value).__name__), err, safe_repr(value), advice),
                "") from None


def _article(name: str) -> str:
    """``a set``, ``an int``: the returned type as a sentence names it."""
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def module_name_for_path(rel: str) -> str:
    """``pkg/file.py`` → ``pkg.file``; ``pkg/__init__.py`` → ``pkg``; other characters become ``_``."""
    parts = rel.replace(os.sep, "/").split("/")
    parts[-1] = os.path.splitext(parts[-1])[0]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    cleaned = []
    for part in parts:
        part = re.sub(r"\W", "_", part)
        if not part or part[0].isdigit():
            part = "_" + part
        cleaned.append(part)
    return ".".join(cleaned)


def make_run_dir(base: str) -> str:
    """A new directory ``kinetic-run-…`` only we can enter under ``base``, as
    ``tempfile.mkdtemp`` makes it (without importing tempfile and random)."""
    while True:
        path = os.path.join(base, "kinetic-run-%s" % os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return os.path.abspath(path)
