"""``@kinetic.run``: run a function remotely."""

import base64
import functools
import inspect
import json
import os
import pickle
import sys
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional

from kinetic import _native
from kinetic._errors import RemoteTraceback
from kinetic._values import PICKLE_KEY, encode, python_minor
from kinetic.batch import BatchHandle, _batch_error
from kinetic.data import Data
from kinetic.jobs import JobHandle, _client

_BACKENDS = ("gke", "pathways", "local")


def _cloudpickle(what: str):
    """The cloudpickle module, or a TypeError saying why ``what`` needs it."""
    try:
        import cloudpickle
    except ImportError:
        raise TypeError(
            "@kinetic.run cannot ship %s: it travels by value, pickled with cloudpickle, which is not "
            "installed here; install it (pip install cloudpickle; the kinetic package depends on it), "
            "or define the function in a module of your project, which travels by reference" % what) from None
    return cloudpickle


def _dumps(cloudpickle, obj) -> bytes:
    """``obj`` pickled by cloudpickle, except that a function decorated with
    ``@kinetic.run`` (a wrapper the pickled code refers to) travels as its
    function and is decorated again where it is unpickled
    (``kinetic._rebuild_remote``): in a job, the job's ``kinetic`` makes it
    run there, in-process, so a job never submits a copy of itself."""
    import io
    import types

    from kinetic import _rebuild_remote

    class _Pickler(cloudpickle.Pickler):
        def reducer_override(self, value):
            if isinstance(value, types.FunctionType):
                inner = getattr(value, "__kinetic_function__", None)
                if inner is not None and inner is not value:
                    options = getattr(value, "__kinetic_options__", {})
                    return _rebuild_remote, (inner, options)
            return super().reducer_override(value)

    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def _by_value(payload: bytes, working_dir: str) -> Dict[str, Any]:
    """The reference of a function pickled by value: the first argument of
    the runner's ``call_pickled``."""
    return {"entry": {"module": "__kinetic_runner__", "function": "call_pickled"},
            "working_dir": working_dir,
            "prefix": [{PICKLE_KEY: base64.b64encode(payload).decode("ascii"), "python": python_minor()}]}


def _bound_method_reference(fn: Callable) -> Dict[str, Any]:
    """A method bound to an object ships with its object, by value: pickled
    (with cloudpickle when installed, else pickle) as the first argument of
    the runner's ``call_pickled``, as it is when the job is submitted. The
    job imports the object's class from the directory that holds its module.
    An object that cannot be pickled is an error: calling the class's
    function without it would shift the arguments into ``self``."""
    owner = fn.__self__
    what = "the bound method %s.%s" % (type(owner).__qualname__, getattr(fn, "__name__", "?"))
    try:
        import cloudpickle
        dumps = functools.partial(_dumps, cloudpickle)
    except ImportError:
        if getattr(type(owner), "__module__", None) == "__main__":
            raise TypeError("@kinetic.run cannot ship %s: a method ships with its object, by value, and the job "
                            "cannot import a class defined in the __main__ script without cloudpickle; install "
                            "cloudpickle (on this machine and in the job's image) or define the class in a module"
                            % what) from None
        dumps = functools.partial(pickle.dumps, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        payload = dumps(fn)
    except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
        raise TypeError("@kinetic.run cannot ship %s: a method ships with its object, by value, and the object "
                        "cannot be pickled (%s: %s); pass a module-level function and the object's data as "
                        "arguments instead" % (what, type(err).__name__, err)) from None
    working_dir = os.getcwd()
    module = sys.modules.get(getattr(type(owner), "__module__", None) or "")
    file = getattr(module, "__file__", None)
    if file and module.__name__ != "__main__":
        working_dir = os.path.dirname(os.path.abspath(file))
        for _ in range(module.__name__.count(".") + (1 if os.path.basename(file) == "__init__.py" else 0)):
            working_dir = os.path.dirname(working_dir)
    return _by_value(payload, working_dir)


def _installation_dirs() -> List[str]:
    """The interpreter's own directories: the standard library and every
    site-packages directory."""
    import site
    import sysconfig
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(path)
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", None)
    if user is not None:
        dirs.add(user())
    dirs.update(p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages"))
    return [os.path.realpath(d) for d in dirs if d]


def _installed(file: str) -> bool:
    """True when ``file`` is part of the interpreter's installation: the
    standard library or an installed package."""
    path = os.path.realpath(file)
    return any(path.startswith(d.rstrip(os.sep) + os.sep) for d in _installation_dirs())


def _function_reference(fn: Callable, check_only: bool = False) -> Dict[str, Any]:
    """Where the runner finds ``fn``.

    A function of one of the user's modules travels by reference: its
    module, imported in the job from the directory that holds it, and its
    name. A function of ``__main__`` (a script, the interpreter's prompt, a
    notebook), a lambda or a closure travels by value, pickled with
    cloudpickle (``prefix`` then holds it, the first argument of the
    runner's ``call_pickled``), with the classes and values of ``__main__``
    it uses: the script's top level never runs in the job, and an exception
    class defined there comes back as itself. A method bound to an object
    travels with its object (``_bound_method_reference``; pickled at
    decoration too, so an object that cannot travel is an error at once).
    A function of the standard library or of an installed package travels
    by name only: the job's interpreter imports it (an installed package
    must be in the job's image too), and nothing of the installation is
    packed. ``check_only`` (at decoration) checks that any other ``fn`` can travel,
    without pickling it yet: a script's function may use names the script
    defines after it."""
    if inspect.ismethod(fn) and not inspect.isclass(fn.__self__):
        return _bound_method_reference(fn)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    module_name = getattr(fn, "__module__", None)
    if not name or "<lambda>" in name or "<locals>" in name:
        what = "%s (it is a lambda or is defined inside another function)" % (name or repr(fn))
    elif module_name == "__main__":
        what = "%s (defined in __main__: a script, the interpreter's prompt or a notebook)" % name
    else:
        what = None
    if what is not None:
        if check_only:
            _cloudpickle(what)
            return {}
        return _by_value(_pickle_function(fn, what), os.getcwd())
    module = sys.modules.get(module_name) if module_name else None
    file = getattr(module, "__file__", None)
    if module_name and module_name != "__main__" and (
            (not file and module_name in sys.builtin_module_names) or (file and _installed(file))):
        # The standard library's and installed packages' functions: the
        # job's interpreter imports them itself. Packing the directory that
        # holds them would ship the interpreter (tens of thousands of files,
        # past the file-count limit); the project shipped is the current
        # directory's, as for a script.
        return {"entry": {"module": module_name, "function": name}, "working_dir": os.getcwd(), "prefix": []}
    if not file:
        raise TypeError("@kinetic.run cannot ship %s: its module %r has no file to ship"
                        % (name, module_name))
    file = os.path.abspath(file)
    root = os.path.dirname(file)
    depth = module_name.count(".") + (1 if os.path.basename(file) == "__init__.py" else 0)
    for _ in range(depth):
        root = os.path.dirname(root)
    return {"entry": {"module": module_name, "function": name}, "working_dir": root, "prefix": []}


def _pickle_function(fn: Callable, what: str) -> bytes:
    cloudpickle = _cloudpickle(what)
    try:
        return _dumps(cloudpickle, fn)
    except Exception as err:  # noqa: BLE001 - any pickling failure is the user's to fix
        raise TypeError("@kinetic.run cannot ship %s: it travels by value and cannot be pickled (%s: %s)"
                        % (what, type(err).__name__, err)) from None


class _Options:
    def __init__(self, accelerator, container_image, base_image_repo, zone, project, capture_env_vars,
                 cluster, backend, namespace, volumes, spot, output_dir, debug, retries=None, restarts=None):
        for name, value in (("retries", retries), ("restarts", restarts)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError("@kinetic.run(%s=%r): expected a whole number of times to run the job again "
                                 "(0 or more), or None for the default" % (name, value))
        self.retries, self.restarts = retries, restarts
        if not isinstance(debug, bool):
            raise ValueError("@kinetic.run(debug=%r): expected True or False" % (debug,))
        if debug and spot:
            warnings.warn("@kinetic.run(debug=True, spot=True): a Spot node can be preempted while "
                          "the job waits for a debugger or is being debugged", stacklevel=3)
        self.debug = debug
        if not isinstance(accelerator, str) or not accelerator:
            raise ValueError("@kinetic.run(accelerator=%r): expected an accelerator name such as "
                             "'cpu', 'gpu-l4' or 'tpu-v5e-1'" % (accelerator,))
        if backend is not None and backend not in _BACKENDS:
            raise ValueError("@kinetic.run(backend=%r): expected one of %s, or None to choose from the accelerator"
                             % (backend, ", ".join(repr(b) for b in _BACKENDS)))
        if capture_env_vars is not None and (isinstance(capture_env_vars, str)
                                             or not all(isinstance(v, str) for v in capture_env_vars)):
            raise ValueError("@kinetic.run(capture_env_vars=%r): expected a list of names or patterns ending in '*'"
                             % (capture_env_vars,))
        if volumes is not None:
            if not isinstance(volumes, dict):
                raise ValueError("@kinetic.run(volumes=%r): expected a dict of absolute mount path to kinetic.Data"
                                 % (volumes,))
            for mount, data in volumes.items():
                if not isinstance(mount, str) or not isinstance(data, Data):
                    raise ValueError("@kinetic.run(volumes): %r: %r is not a mount path and kinetic.Data" % (mount, data))
        self.accelerator = accelerator + (":spot" if spot and not accelerator.endswith(":spot") else "")
        self.container_image = container_image
        self.base_image_repo = base_image_repo
        self.zone, self.project, self.cluster, self.namespace = zone, project, cluster, namespace
        self.capture_env_vars = list(capture_env_vars or [])
        self.backend = backend
        self.volumes = dict(volumes or {})
        self.output_dir = output_dir

    def client(self):
        return _client(project=self.project, zone=self.zone, cluster=self.cluster, namespace=self.namespace,
                       base_image_repo=self.base_image_repo, backend=self.backend, accelerator=self.accelerator)

    def spec(self, fn, args, kwargs) -> str:
        doc = _function_reference(fn)
        prefix = doc.pop("prefix")
        doc.update({
            "args": prefix + [encode(a, "argument %d" % i) for i, a in enumerate(args)],
            "kwargs": [[k, encode(v, "keyword argument %r" % k)] for k, v in kwargs.items()],
            "accelerator": self.accelerator,
            "backend": self.backend,
            "env": self.capture_env_vars,
            "volumes": [[m, {"__kinetic_data__": d._spec()}] for m, d in self.volumes.items()],
            "output_dir": self.output_dir,
            "container_image": self.container_image,
            "python_values": python_minor(),
            "retries": self.retries,
            "restarts": self.restarts,
            "debug": self.debug,
        })
        return json.dumps(doc)


def _debug_call(handle: JobHandle) -> Any:
    """The synchronous call of a debug job: attach, then wait for the value
    with the forward open; the forward is closed however the wait ends."""
    if not sys.stdin.isatty() and os.environ.get("KINETIC_NO_TTY_DEBUG") != "1":
        raise RuntimeError(
            "Job %s runs with debug=True and waits for a debugger, but stdin is not a terminal: "
            "attach from elsewhere with kinetic.attach(%r).debug_attach() (or kinetic jobs debug %s), "
            "or set KINETIC_NO_TTY_DEBUG=1 to attach here anyway" % (handle.job_id, handle.job_id, handle.job_id))
    with handle.debug_attach(working_dir=os.getcwd()):
        return handle.result(stream_logs=False, cleanup=False)


def run(accelerator: str = "tpu-v5e-1", container_image: Optional[str] = None,
        base_image_repo: Optional[str] = None, zone: Optional[str] = None, project: Optional[str] = None,
        capture_env_vars: Optional[List[str]] = None, cluster: Optional[str] = None,
        backend: Optional[str] = None, namespace: Optional[str] = None,
        volumes: Optional[Dict[str, Data]] = None, spot: bool = False, output_dir: Optional[str] = None,
        debug: bool = False, retries: Optional[int] = None,
        restarts: Optional[int] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Execute function on remote TPU/GPU (or on this machine with ``backend="local"``).

    Args:
        accelerator: TPU/GPU type (e.g., 'tpu-v3-8', 'tpu-v5litepod-4', 'gpu-l4', 'gpu-a100', 'cpu').
        container_image: None or "bundled" (default) builds an image with all
            dependencies baked in via Cloud Build; "prebuilt" uses a prebuilt
            base image and installs the requirements when the job starts; any
            other string is a custom container image URI.
        base_image_repo: Repository of the prebuilt base images. Defaults to
            KINETIC_BASE_IMAGE_REPO, then "kinetic". Only used with "prebuilt".
        zone: GCP zone. Falls back to KINETIC_ZONE, then the active profile's
            zone (from ~/.kinetic/profiles.json), then 'us-central1-a'.
        project: GCP project. Falls back to KINETIC_PROJECT, then the active
            profile's project, then GOOGLE_CLOUD_PROJECT.
        capture_env_vars: Environment variable names or patterns (ending in
            ``*``) to propagate to the remote environment. A name must be
            set here (as the command line's ``--env NAME``): unset, the
            call fails before anything is uploaded; a pattern sends the
            names set.
        cluster: GKE cluster name. Falls back to KINETIC_CLUSTER, then the
            active profile's cluster, then the built-in default.
        backend: 'gke', 'pathways' or 'local'; None chooses from KINETIC_BACKEND
            and the accelerator.
        namespace: Kubernetes namespace. Falls back to KINETIC_NAMESPACE, then
            the active profile's namespace, then 'default'.
        volumes: Dict mapping absolute mount paths to Data objects, e.g.
            ``{"/data": Data("./dataset/")}``; the data is placed there before
            the function runs.
        spot: If True, use preemptible/spot VMs for the job.
        output_dir: Where job outputs go (a non-empty string), exported to
            the job as KINETIC_OUTPUT_DIR. Defaults to the jobs bucket's
            outputs/{job_id}.
        debug: debugpy remote debugging. The job starts debugpy and waits
            for a debugger before calling the function; attach with
            ``JobHandle.debug_attach()`` (or ``kinetic jobs debug JOB_ID``).
            A debug job is kept once its value came back. Called
            synchronously, the wrapper needs a terminal on stdin (or
            ``KINETIC_NO_TTY_DEBUG=1``), forwards localhost:5678 to the
            debugger, prints the VS Code launch configuration and waits for
            the result. With ``spot=True`` a warning is given.
        retries: Application retry budget: how many times the job runs again
            after it fails (an exception, a non-zero exit). Default 0.
        restarts: Infrastructure restart budget: how many times the job runs
            again after its node is preempted or its pod evicted. Default 3
            for ``spot=True`` jobs, else 0. Not supported on pathways yet.

    Returns:
        A decorator that returns a wrapper function. When called, the wrapper
        executes the function remotely and blocks until completion, returning
        its value or raising its exception (its type where it can be rebuilt,
        the remote traceback as ``__cause__``). The wrapper also has:

        * ``run_async(*args, **kwargs)``: submits the job and returns a
          :class:`JobHandle` immediately.
        * ``run_async_map(inputs, **kwargs)``: fans out over a collection of
          inputs, returning a :class:`BatchHandle`.

    A function of one of your modules ships by reference (its module and
    qualified name); one defined in ``__main__`` (a script, the interpreter's
    prompt, a notebook), a lambda or a closure ships by value, pickled with
    cloudpickle, so the script's top level never runs in the job.
    Arguments and results that are JSON travel as JSON; other values travel
    pickled when the client and the job run the same Python minor version.
    """
    options = _Options(accelerator, container_image, base_image_repo, zone, project, capture_env_vars,
                       cluster, backend, namespace, volumes, spot, output_dir, debug, retries, restarts)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        _function_reference(fn, check_only=True)  # what cannot travel is an error at once

        def run_async(*args, **kwargs) -> JobHandle:
            spec = options.spec(fn, args, kwargs)
            return JobHandle._from_native(options.client().submit(spec))

        def run_async_map(inputs: Iterable[Any], input_mode: str = "auto", max_concurrent: Optional[int] = None,
                          retries: int = 0, fail_fast: bool = False, cancel_running_on_fail: bool = False,
                          name: Optional[str] = None, tags: Optional[Dict[str, str]] = None,
                          isolation: str = "workers") -> BatchHandle:
            """Fan out over ``inputs``: each becomes one job (``input_mode``:
            'auto', 'single', 'args' or 'kwargs' says how an input becomes the
            call's arguments), at most ``max_concurrent`` at a time, each
            retried ``retries`` times; ``fail_fast`` stops submitting after a
            failure (``cancel_running_on_fail`` also cancels running jobs).
            ``isolation``: 'workers' (default: on the local backend the jobs
            run on a pool of worker processes, each of which imports the
            function once and calls it for input after input; on gke each
            pod runs a block of inputs so) or 'process' (a fresh interpreter
            per input)."""
            encoded = [encode(x, "input %d" % i) for i, x in enumerate(inputs)]
            if cancel_running_on_fail and not fail_fast:
                raise ValueError("run_async_map: cancel_running_on_fail=True needs fail_fast=True")
            map_options = {"input_mode": input_mode, "max_concurrent": max_concurrent, "retries": retries,
                           "fail_fast": bool(fail_fast), "cancel_running_on_fail": bool(cancel_running_on_fail),
                           "name": name, "tags": dict(tags or {}), "isolation": isolation}
            spec = options.spec(fn, (), {})
            try:
                native = options.client().map(spec, json.dumps(encoded), json.dumps(map_options))
            except _native.BatchFailed as err:
                raise _batch_error(err) from None
            return BatchHandle._from_native(native, submitting=True)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            handle = run_async(*args, **kwargs)
            try:
                if not options.debug:
                    return handle.result(stream_logs=True)
                return _debug_call(handle)
            except Exception as err:
                if isinstance(err.__cause__, RemoteTraceback):
                    # The job's error: its frames are in the remote traceback;
                    # of this library's frames only this call is kept.
                    raise err.with_traceback(None) from err.__cause__
                raise

        # The runner calls this instead of the wrapper, so a job does not submit itself.
        wrapper.__kinetic_function__ = fn
        # What a job's `kinetic` decorates the function with again when it travels by value.
        wrapper.__kinetic_options__ = {"accelerator": accelerator, "backend": backend}
        wrapper.run_async = run_async
        wrapper.run_async_map = run_async_map
        try:
            wrapper.__signature__ = inspect.signature(fn)
        except ValueError:  # a builtin without one, such as math.hypot
            pass
        return wrapper

    return decorator
