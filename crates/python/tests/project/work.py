"""Functions the tests run remotely, as a user's project would hold them."""

import dataclasses
import json
import os
import time


class TrainingError(Exception):
    """A user's own exception type."""


@dataclasses.dataclass
class Point:
    x: float
    y: float


def square(x):
    return x * x


def parent_pid(x):
    """The input and the process that started this input's process (its
    worker on a pool, its own supervisor otherwise)."""
    return [x, os.getppid()]


def add(a, b=0):
    return a + b


def fails(message):
    raise ValueError(message)


def fails_custom(message):
    raise TrainingError(message)


def midpoint(p, q):
    return Point((p.x + q.x) / 2, (p.y + q.y) / 2)


def as_tuple(items):
    return tuple(items), {1, 2}


def read_text(path):
    with open(path) as f:
        return f.read()


def list_dir(path):
    return sorted(os.listdir(path))


def read_nested(config):
    return {name: open(p).read() for name, p in config["files"].items()} | {"n": len(config["dirs"])}


def read_volume(name):
    # Where "/data" is on this host: the local backend places mounts in the
    # job's own directory and says where in KINETIC_VOLUMES.
    mount = json.loads(os.environ["KINETIC_VOLUMES"])["/data"]
    with open(os.path.join(mount, name)) as f:
        return f.read()


def env_values(names):
    return {n: os.environ.get(n) for n in names}


def slow_square(x, seconds=1.0):
    time.sleep(seconds)
    return x * x


def square_unless_three(x):
    if x == 3:
        raise ValueError("three is not allowed")
    return x * x


def hf_rows(path):
    import datasets

    d = datasets.load_from_disk(path)
    return {"n": len(d), "text": list(d["text"])}


def read_mounted(folder, config):
    """What a job sees of FUSE data: the files, and whether writing works."""
    with open(os.path.join(folder, "a.txt")) as f:
        a = f.read()
    with open(config) as f:
        c = f.read()
    try:
        with open(os.path.join(folder, "new.txt"), "w") as f:
            f.write("x")
        write = "written"
    except OSError as e:
        write = e.strerror or repr(e)
    volume = json.loads(os.environ["KINETIC_VOLUMES"])["/data"]
    return {"a": a, "config": c, "write": write, "volume": sorted(os.listdir(volume))}


def flaky(marker):
    """Fails on its first attempt (no marker yet), succeeds on the next."""
    import os

    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        raise RuntimeError("first attempt fails")
    return "second attempt"


def attempt_after_failing(marker):
    """Fails on its first attempt (no marker yet), then says which attempt it is."""
    import os

    if not os.path.exists(marker):
        open(marker, "w").write("tried")
        raise RuntimeError("first attempt fails")
    return ["second attempt", os.environ["KINETIC_ATTEMPT"]]


# Values JSON would change, returned as they are (issue 25).
RETURNED = {
    "keys": {1: "a", True: "b", None: "c", 2.5: "d"},
    "tuple": (1, [2, (3,)]),
    "lone": "a\ud800",
    "pickle_marker": {"__kinetic_pickle__": "not base64!", "python": "3.11"},
    "str_tag": {"__kinetic_str__": [55296]},
    "plain": {"a": [1, 2.5, None, True, "x"]},
}


def returned(kind):
    return RETURNED[kind]


def kinds(*args):
    return [type(a).__name__ for a in args]


class Scaler:
    """An object whose bound method is shipped (issue 25)."""

    def __init__(self, factor):
        self.factor = factor

    def times(self, x=1):
        return self.factor * x


class Unpicklable(Scaler):
    def __reduce__(self):
        raise TypeError("a Unpicklable holds a live connection")


def slow_split(name):
    # A secret written in two pieces, a pause longer than the runner's hold window between them.
    value = os.environ[name]
    print("slow:" + value[:6], end="", flush=True)
    time.sleep(0.5)
    print(value[6:], flush=True)
    return "ok"


def ignores_term(seconds=600):
    # Ignores SIGTERM, so its stop takes the whole grace period (the local
    # backend's 3 s; the fake kubelet's 2 s) before the SIGKILL.
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ignoring SIGTERM in pid %d" % os.getpid(), flush=True)
    time.sleep(seconds)
