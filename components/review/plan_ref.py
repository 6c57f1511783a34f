"""The offline plan of a git revision: check it out into a temporary worktree and plan it in a child process.

A child process, because the revision's program imports its own ``components`` package, which this
process has already imported from the working tree. The child runs with the worktree first on its path,
so the revision's program and its plan code are the revision's own; a revision without ``components``
(a project that only uses this one's) falls back to the installed package, and a revision from before the
review tools moved to ``components/review/`` is planned by its ``components/plan.py``. The dependencies are
this checkout's environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from components.review.git_worktree import WorktreeError, worktree

# A plan takes seconds; imports on a loaded CI runner can take a minute. Beyond this the revision is stuck.
PLAN_TIMEOUT_S: Final = 600.0
GIT_TIMEOUT_S: Final = 60.0
# The child's program: plan the stack, write its JSON to a file (stdout may carry the program's own prints).
_CHILD: Final = """
import importlib, json, sys
from pathlib import Path
try:
    import components
    # a revision from before components/review/ keeps its planner in components/plan.py (and an editable install
    # would serve this checkout's components.review to it, so look at the files, not at what imports)
    old = (Path(components.__path__[0]) / "plan.py").is_file()
    run_plan = importlib.import_module("components.plan" if old else "components.review.plan").run_plan
    plan = run_plan(sys.argv[1], Path(sys.argv[2]))
except Exception as exc:  # the parent reports it; a traceback would bury the reason
    print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    sys.exit(2)
Path(sys.argv[3]).write_text(json.dumps(plan.to_json(), default=str))
"""


class RefPlanError(RuntimeError):
    """The revision could not be checked out or planned; the message says why."""


def _toplevel(project_dir: Path) -> Path:
    proc = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, timeout=GIT_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RefPlanError(f"{project_dir} is not in a git repository: {proc.stderr.strip()}")
    return Path(proc.stdout.strip())


def plan_at_ref(stack: str, ref: str, project_dir: Path) -> dict[str, Any]:
    """The JSON plan of ``stack`` for the program in ``project_dir`` as it is at git revision ``ref``."""
    top = _toplevel(project_dir)
    relative = project_dir.resolve().relative_to(top.resolve())
    try:
        with worktree(top, ref) as tree, tempfile.TemporaryDirectory(prefix="gpurt-plan-") as tmp:
            out = Path(tmp) / "plan.json"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree),
                                                                              os.environ.get("PYTHONPATH")]))}
            try:
                proc = subprocess.run(
                    [sys.executable, "-c", _CHILD, stack, str(tree / relative), str(out)],
                    cwd=tree, env=env, capture_output=True, text=True, timeout=PLAN_TIMEOUT_S, check=False,
                )
            except subprocess.TimeoutExpired:
                raise RefPlanError(f"the plan of {ref} took longer than {PLAN_TIMEOUT_S:.0f} s") from None
            if proc.returncode != 0 or not out.is_file():
                reason = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                raise RefPlanError(f"the plan of {stack} at {ref} failed: {reason}")
            return json.loads(out.read_text())
    except WorktreeError as exc:
        raise RefPlanError(str(exc)) from None
