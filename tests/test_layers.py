"""The packages keep their layers: the CLI on top, the job protocol at the bottom, no CLI code below the CLI.

``make lint`` runs the import-linter contracts of ``pyproject.toml`` on the tree as it is; these tests run
the same contracts and show that they bite: an upward import planted in a copy of the tree breaks them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gpurt", "validation", "client", "runtime", "components", "kernels", "protocol")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: each copy of the tree is a different graph
    return subprocess.run([str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"}, check=False)


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The project's packages and pyproject.toml, copied where a test may break them."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_its_layers() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(("package", "line", "broken"), [
    # the runtime reaching up into the CLI (the circle the demo once closed)
    ("runtime/local/__init__.py", "from gpurt import app as _app", "runtime is not allowed to import gpurt"),
    # the kernels reaching up into the runtime for the protocol
    ("kernels/jobs.py", "import runtime.scheduler as _scheduler", "kernels is not allowed to import runtime"),
    # the client library reaching up into the CLI
    ("client/session.py", "import gpurt.common as _common", "client is not allowed to import gpurt"),
    # the runtime reaching up into the client library built on it
    ("runtime/client/pubsub.py", "import client.session as _session", "runtime is not allowed to import client"),
    # the protocol depending on the kernels it is meant to sit under
    ("protocol/messages.py", "import kernels.jobs as _jobs", "protocol is not allowed to import kernels"),
    # inside the kernels: the basket paths reaching up into the Greeks computed on them (the circle the
    # basket_option job once closed with a lazy import)
    ("kernels/basket.py", "from kernels import fd_greeks as _fd_greeks",
     "kernels.basket is not allowed to import kernels.fd_greeks"),
    # a numeric every kernel shares reaching up into one job type
    ("kernels/launch.py", "import kernels.european as _european",
     "kernels.launch is not allowed to import kernels.european"),
])
def test_an_upward_import_breaks_the_layers(tree_copy: Path, package: str, line: str, broken: str) -> None:
    with (tree_copy / package).open("a") as module:
        module.write(f"\n\ndef _planted() -> None:\n    {line}  # noqa\n")  # lazy imports count too
    done = _lint_imports(tree_copy)
    assert done.returncode != 0
    assert broken in done.stdout


def test_cli_code_below_the_cli_breaks_a_contract(tree_copy: Path) -> None:
    with (tree_copy / "validation/report.py").open("a") as module:
        module.write("\nfrom rich.table import Table as _Table  # noqa\n")
    done = _lint_imports(tree_copy)
    assert done.returncode != 0
    assert "validation is not allowed to import rich" in done.stdout
