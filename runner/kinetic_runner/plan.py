"""The packaging plan: which ``sys.path`` entries and working directory the
workspace gives the job."""

from __future__ import annotations

import json
import os

from .context import is_inside


class PlanActions:
    """What applying a plan does: sys.path entries to put first, and where to chdir."""

    def __init__(self, sys_path: list, cwd: str | None, legacy: bool, warnings: list) -> None:
        self.sys_path = sys_path
        self.cwd = cwd
        self.legacy = legacy
        self.warnings = warnings


def read_plan(spec_plan, workspace: str):
    """The spec's plan when it has one, else ``.kinetic/plan.json`` from the context (or None)."""
    if spec_plan is not None:
        return spec_plan
    try:
        with open(os.path.join(workspace, ".kinetic", "plan.json"), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def plan_actions(plan, workspace: str) -> PlanActions:
    """Kinetic's plan application, as a pure function of the plan and the extracted workspace."""
    root = os.path.normpath(os.path.abspath(workspace))
    if not isinstance(plan, dict) or not plan:
        return PlanActions([root], None, True, [])
    warnings = []
    real_root = os.path.realpath(root)

    def under_root(rel: str):
        path = root if rel in ("", ".") else os.path.normpath(os.path.join(root, rel))
        return path, is_inside(real_root, os.path.realpath(path))

    rels = plan.get("sys_path_rel")
    if not isinstance(rels, list):
        warnings.append("plan sys_path_rel is not a list (%s); using only the workspace root" % type(rels).__name__)
        rels = []
    kept = []
    for rel in rels:
        if isinstance(rel, str):
            kept.append(rel)
        else:
            warnings.append("dropping non-string plan sys_path_rel entry %r" % (rel,))
    if "" not in kept:
        kept.insert(0, "")
    entries = []
    for rel in kept:
        path, inside = under_root(rel)
        if not inside:
            warnings.append("rejecting plan sys_path_rel entry %r: it escapes the workspace" % rel)
        elif os.path.isdir(path) and path not in entries:
            entries.append(path)

    cwd_rel = plan.get("client_cwd_rel")
    cwd = root
    if isinstance(cwd_rel, str) and cwd_rel:
        path, inside = under_root(cwd_rel)
        if not inside:
            warnings.append("plan client_cwd_rel %r escapes the workspace; staying at the workspace root" % cwd_rel)
        elif not os.path.isdir(path):
            warnings.append("plan client_cwd_rel %r is not a directory in the context; staying at the workspace root" % cwd_rel)
        else:
            cwd = path
    elif cwd_rel not in ("", None):
        warnings.append("plan client_cwd_rel is a %s, not a string; staying at the workspace root" % type(cwd_rel).__name__)
    return PlanActions(entries, cwd, False, warnings)
