"""``kinetic.Data``: data a remote function reads, resolved to a plain path on the pod."""

import os
import warnings

from kinetic import _native


class Data:
    """A reference to data that should be available on the remote pod.

    Wraps a local file/directory path or a GCS URI. When passed as a function
    argument (at any depth in lists and dicts) or used in the ``volumes``
    decorator parameter, Data is resolved to a plain filesystem path on the
    remote side. The user's function code never needs to know about Data — it
    just receives paths.

    Local data is content-hashed and uploaded once to the data cache; a
    ``gs://`` URI is passed through: with a trailing slash it is a directory
    (every object under the prefix), without one a single object (a
    ``UserWarning`` when its last segment has no ``.``, in case a directory
    was meant; an object that does not exist fails the job, naming it); an
    ``hf://REPO_ID[?split=…&config_name=…&revision=…]`` Hugging Face dataset
    is loaded on the pod with the ``datasets`` package (which the job's
    requirements or image must provide) and the function receives the
    directory it was saved to (``datasets.load_from_disk`` reads it).

    Args:
        path: Local file/directory path (absolute or relative) or GCS URI
            (``gs://bucket/prefix``). Checked at once, as the command line
            checks it: a local path must exist, an ``hf://`` URI must name
            a dataset and only ``split``, ``config_name`` and ``revision``,
            and other schemes are refused (``ValueError``).
        fuse: If True, mount the data via GCS FUSE instead of downloading it.
            Not supported by this engine yet: submitting it raises
            ``ValueError`` naming the parameter.
        hf_trust_remote_code: For ``hf://`` datasets: let the dataset's
            repository run its own loading code (the ``datasets`` package's
            ``trust_remote_code``). Set on other data, submitting raises
            ``ValueError``.

    Examples::

        Data("./my_dataset/")                      # local directory
        Data("./config.json")                      # local file
        Data("gs://my-bucket/datasets/imagenet/")  # GCS directory
        Data("gs://my-bucket/datasets/weights.h5") # GCS single object
        Data("hf://imdb?split=train")              # Hugging Face dataset, loaded on the host
    """

    __slots__ = ("_raw", "_path", "_fuse", "_hf_trust_remote_code")

    def __init__(self, path: str, fuse: bool = False, hf_trust_remote_code: bool = False):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError("kinetic.Data(path): expected a str path or gs:// URI, got %s" % type(path).__name__)
        raw = os.fspath(path)
        if not raw:
            raise ValueError("kinetic.Data(path): the path is empty")
        if raw.startswith("hf://") and fuse:
            raise ValueError("fuse=True is not supported for Hugging Face datasets (hf:// URIs)")
        # The engine's own check, as the command line's: a local path that
        # exists, gs://bucket/path, or a well-formed hf:// dataset.
        hint = _native.check_data(raw)
        if hint:
            # Kinetic's warning: without a trailing slash a gs:// URI is one
            # object, which a last segment without a '.' may not be meant as.
            warnings.warn("kinetic.Data: " + hint, UserWarning, stacklevel=2)
        self._raw = raw
        if "://" in raw:
            self._path = raw
        else:
            self._path = os.path.abspath(os.path.expanduser(raw))
        self._fuse = bool(fuse)
        self._hf_trust_remote_code = bool(hf_trust_remote_code)

    @property
    def path(self) -> str:
        """The absolute local path, or the URI as given."""
        return self._path

    @property
    def fuse(self) -> bool:
        """Whether the data is to be mounted through GCS FUSE."""
        return self._fuse

    @property
    def hf_trust_remote_code(self) -> bool:
        """Whether a Hugging Face dataset may run its own code."""
        return self._hf_trust_remote_code

    @property
    def is_gcs(self) -> bool:
        """Whether the data is a ``gs://`` URI."""
        return self._path.startswith("gs://")

    @property
    def is_hf(self) -> bool:
        """Whether the data is a Hugging Face dataset (``hf://``)."""
        return self._path.startswith("hf://")

    @property
    def is_dir(self) -> bool:
        """Whether the data is a directory (for gs:// URIs: a trailing slash;
        a Hugging Face dataset always is one)."""
        if self._path.startswith("hf://"):
            return True
        if "://" in self._path:
            return self._path.endswith("/")
        return os.path.isdir(self._path)

    def content_hash(self) -> str:
        """SHA-256 hash of all file contents in deterministic order.

        The data cache's key, computed by the engine: each file is hashed
        (relative path and contents), the per-file digests combined in sorted
        walk order, with a ``dir:``/``file:`` prefix. Symlinked directories
        are not followed; symlinked files are hashed by their contents.
        """
        if "://" in self._path:
            raise ValueError("Data(%r).content_hash(): only local data has a content hash" % self._raw)
        return _native.content_hash(self._path)

    def _spec(self) -> dict:
        return {"path": self._path, "fuse": self._fuse, "hf_trust_remote_code": self._hf_trust_remote_code}

    def __reduce__(self):
        raise TypeError(
            "kinetic.Data(%r) sits inside a value that is pickled (a tuple, set or object); "
            "Data is resolved to a path only in positional arguments, keyword arguments, "
            "lists, dicts with string keys and volumes" % self._raw)

    def __repr__(self) -> str:
        extra = "".join(", %s=True" % k for k in ("fuse", "hf_trust_remote_code") if getattr(self, k))
        return "Data(%r%s)" % (self._raw, extra)

    def __eq__(self, other):
        if not isinstance(other, Data):
            return NotImplemented
        return self._spec() == other._spec()

    def __hash__(self):
        return hash((self._path, self._fuse, self._hf_trust_remote_code))
