"""Hugging Face datasets (``hf://`` references)."""

from __future__ import annotations

import os
import sys
import urllib.parse

from .protocol import DATA, RunnerError, log, warn
from .context import is_inside


# hf://REPO_ID[?split=S&config_name=C&revision=R] is loaded on the host with
# datasets.load_dataset (into a cache under the job's temporary directory)
# and saved with save_to_disk into the reference's directory, which the
# function receives (datasets.load_from_disk reads it back).

HF_SCHEME = "hf://"
HF_QUERY_KEYS = ("split", "config_name", "revision")


def parse_hf_uri(uri: str) -> dict:
    """``{"repo_id", "split", "config_name", "revision"}`` of an hf:// URI
    (absent query keys are None); RunnerError naming what is accepted."""
    usage = "expected hf://REPO_ID[?split=…&config_name=…&revision=…]"
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme != "hf" or parts.fragment:
        raise RunnerError("not a Hugging Face dataset URI: %r (%s)" % (uri, usage))
    repo_id = (parts.netloc + parts.path).strip("/")
    if not repo_id:
        raise RunnerError("%s names no dataset (%s)" % (uri, usage))
    try:
        query = urllib.parse.parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise RunnerError("%s: unreadable query %r (%s)" % (uri, parts.query, usage)) from None
    unknown = sorted(set(query) - set(HF_QUERY_KEYS))
    if unknown:
        raise RunnerError("%s: unknown query key%s %s (accepted: %s)" % (
            uri, "" if len(unknown) == 1 else "s", ", ".join(unknown), ", ".join(HF_QUERY_KEYS)))
    out = {"repo_id": repo_id}
    for key in HF_QUERY_KEYS:
        values = query.get(key, [])
        if len(values) > 1 or (values and not values[0]):
            raise RunnerError("%s: %s must be given once, with a value" % (uri, key))
        out[key] = values[0] if values else None
    return out


def import_datasets(uri: str, workspace: str | None):
    """The ``datasets`` package, imported with the workspace's entries off
    sys.path, so a user's own datasets.py cannot stand in for it."""
    module = sys.modules.get("datasets")
    if module is not None and hasattr(module, "load_dataset"):
        return module
    saved = list(sys.path)
    if workspace is not None:
        root = os.path.realpath(workspace)
        sys.path[:] = [p for p in sys.path if not is_inside(root, os.path.realpath(p or os.getcwd()))]
    try:
        import datasets  # noqa: PLC0415 - only jobs with hf:// data need it
    except ImportError as err:
        raise RunnerError(
            "The 'datasets' package is required to load 'hf://' URIs (%s): add 'datasets' to the job's "
            "requirements or image (%s: %s)" % (uri, type(err).__name__, err)) from None
    finally:
        sys.path[:] = saved
    return datasets


def load_hf_dataset(datasets, uri: str, trust_remote_code: bool, target: str, cache_dir: str) -> None:
    """Loads the dataset ``uri`` names and saves it into ``target``."""
    spec = parse_hf_uri(uri)
    kwargs = {"name": spec["config_name"], "split": spec["split"], "revision": spec["revision"],
              "cache_dir": cache_dir}
    if trust_remote_code:
        warn(DATA, "%s: hf_trust_remote_code=True lets the dataset's repository run its own code on this host" % uri)
        import inspect  # noqa: PLC0415 - only trusted hf:// data needs it
        if "trust_remote_code" in inspect.signature(datasets.load_dataset).parameters:
            kwargs["trust_remote_code"] = True
        else:
            log(DATA, "datasets %s runs no dataset scripts: hf_trust_remote_code allows nothing more"
                % getattr(datasets, "__version__", "?"))
    log(DATA, "loading %s (Hugging Face dataset %s%s)" % (
        uri, spec["repo_id"], "".join(", %s=%s" % (k, spec[k]) for k in HF_QUERY_KEYS if spec[k])))
    dataset = datasets.load_dataset(spec["repo_id"], **kwargs)
    os.makedirs(target, exist_ok=True)
    dataset.save_to_disk(target)
