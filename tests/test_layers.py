"""The packages keep their layers: the users' package on top, the kernels at the bottom, no CLI code below the CLI.

``make lint`` runs the import-linter contracts of ``pyproject.toml`` on the tree as it is; these tests run
the same contracts and show that they bite: an upward import planted in a copy of the tree breaks them.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
PACKAGES = tuple(CONFIG["root_packages"])
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    # --no-cache: each copy of the tree is a different graph; a wide terminal, so no line of the report wraps
    return subprocess.run([str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"), "--no-cache"],
                          cwd=tree, capture_output=True, text=True, timeout=240,
                          env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "COLUMNS": "400"}, check=False)


def _copy_tree(where: Path) -> Path:
    """The project's packages and pyproject.toml, copied to ``where``, where a test may break them."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, where / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """A copy of the tree for one test to break."""
    return _copy_tree(tmp_path)


def test_the_tree_keeps_its_layers() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(CONFIG['contracts'])} kept, 0 broken" in done.stdout


UPWARD_IMPORTS = [
    # the local platform reaching up into the CLI (the circle the demo once closed)
    ("runtime/local/__init__.py", "from gpurt.cli import app as _app", "runtime is not allowed to import gpurt"),
    # the kernels reaching up into the scheduler
    ("kernels/jobs.py", "import runtime.scheduler as _scheduler", "kernels is not allowed to import runtime"),
    # the Python API reaching up into the CLI
    ("gpurt/client/session.py", "import gpurt.cli.common as _common",
     "gpurt.client is not allowed to import gpurt.cli"),
    # the Python API's plots reaching up into the demo's report that draws them
    ("gpurt/client/plots.py", "import gpurt.demo.report.plots as _report",
     "gpurt.client is not allowed to import gpurt.demo"),
    # the local platform reaching up into the demo it once held
    ("runtime/local/platform.py", "import gpurt.demo.run as _demo", "runtime is not allowed to import gpurt"),
    # the access layer reaching up into the local platform for its state file (the tie this layout removed)
    ("runtime/access/target.py", "import runtime.local.processes as _processes",
     "runtime.access is not allowed to import runtime.local"),
    # the scheduler image's code reaching into the Pulumi program beside it
    ("runtime/scheduler/settings.py", "import components.review.plan as _plan",
     "runtime is not allowed to import components"),
    # the Pulumi program reaching into an image's code
    ("components/dask.py", "import runtime.scheduler.settings as _settings",
     "components is not allowed to import runtime.scheduler"),
    # the worker image's code reaching up into the scheduler (the image would not have it)
    ("runtime/worker/warm.py", "import runtime.scheduler.settings as _settings",
     "runtime.worker is not allowed to import runtime.scheduler"),
    # validation reaching up into the users' package
    ("validation/report.py", "import gpurt.client.session as _session", "validation is not allowed to import gpurt"),
    # the local platform's monitoring reaching up into the platform that starts it (the other old tie)
    ("runtime/local/prometheus/stack.py", "import runtime.local.platform as _platform",
     "runtime.local.prometheus is not allowed to import runtime.local.platform"),
    # a module that declares resources reaching up into the tooling that reads the rendered stack
    ("components/gke.py", "import components.review.cost as _cost",
     "components.gke is not allowed to import components.review"),
    # the policy rules (bundled into the policy pack on their own) reaching up into the offline plan
    ("components/policy/rules.py", "from components.review import plan as _plan",
     "components.policy is not allowed to import components.review"),
    # the kernels' parameters depending on the kernels they describe
    ("kernels/params.py", "import kernels.jobs as _jobs", "kernels.params is not allowed to import kernels.jobs"),
    # inside the kernels: the basket paths reaching up into the Greeks computed on them (the circle the
    # basket_option job once closed with a lazy import)
    ("kernels/basket.py", "from kernels import fd_greeks as _fd_greeks",
     "kernels.basket is not allowed to import kernels.fd_greeks"),
    # a numeric every kernel shares reaching up into one job type
    ("kernels/launch.py", "import kernels.european as _european",
     "kernels.launch is not allowed to import kernels.european"),
    # the Pub/Sub adapters and the store's filesystem opener, which others share, reaching back up into the
    # gpu-scheduler they moved out of, or into each other
    ("runtime/pubsub/publisher.py", "import runtime.scheduler.settings as _settings",
     "runtime.pubsub is not allowed to import runtime.scheduler"),
    ("runtime/storage/filesystems.py", "import runtime.pubsub.clients as _clients",
     "runtime.storage is not allowed to import runtime.pubsub"),
]


@pytest.mark.parametrize(("package", "line", "broken"), UPWARD_IMPORTS)
def test_an_upward_import_breaks_the_layers(planted: Planted, package: str, line: str, broken: str) -> None:
    planted.assert_breaks(package, line, broken)


def test_outside_code_reaches_neither_the_scheduler_nor_the_local_platform_with_no_exception() -> None:
    # What several parts share (the lease record, its stores and the elector, connection caps, the Dask child's
    # module, the Vertex AI REST adapter, the Prometheus reader and the alert receiver's log, the alert time scale)
    # sits below the scheduler and the local platform, so the contract names no edge it lets through
    # (docs/architecture.md, "Layers").
    sources = ["gpurt.client", "runtime.access", "validation"]
    contract = next(c for c in CONFIG["contracts"] if c.get("source_modules") == sources)
    assert contract["forbidden_modules"] == ["runtime.scheduler", "runtime.local"]
    assert "ignore_imports" not in contract


REACHING_IN = [
    # the Python API reading artifacts through the scheduler's store instead of runtime.storage
    ("gpurt/client/results.py", "import runtime.scheduler.store as _store",
     "gpurt.client is not allowed to import runtime.scheduler"),
    # the access layer publishing through the scheduler's code instead of runtime.pubsub
    ("runtime/access/transport.py", "import runtime.scheduler.service as _service",
     "runtime.access is not allowed to import runtime.scheduler"),
    # a post-deploy check reading pools through the scheduler instead of the annotations in runtime.manifests
    ("validation/checks/dask.py", "import runtime.scheduler.pools.kubernetes as _pools",
     "validation is not allowed to import runtime.scheduler"),
    # the drills taking the local platform itself instead of validation.platform's interface
    ("validation/drills/base.py", "import runtime.local.platform as _platform",
     "validation is not allowed to import runtime.local"),
    # the drills take the API's connection caps and the Dask child's module from the contract, not the scheduler
    ("validation/drills/flood.py", "import runtime.scheduler.http_limits as _limits",
     "validation is not allowed to import runtime.scheduler"),
    ("validation/drills/loopback.py", "import runtime.scheduler.dask_process as _child",
     "validation is not allowed to import runtime.scheduler"),
    # `gpurt leader`'s reader takes the lease record from runtime.leases, not from the gpu-scheduler
    ("validation/leader.py", "import runtime.scheduler.singletons as _singletons",
     "validation is not allowed to import runtime.scheduler"),
    # the leader drill runs the elector from runtime.leases: the scheduler's own election loop is out of its reach
    ("validation/drills/leader.py", "import runtime.scheduler.singletons as _singletons",
     "validation is not allowed to import runtime.scheduler"),
    # the Vertex AI check shares the REST adapter in runtime.vertex, not the gpu-scheduler's backend
    ("validation/adapters/vertex.py", "import runtime.scheduler.backends.vertex as _backend",
     "validation is not allowed to import runtime.scheduler"),
    # the alert drill reads Prometheus and the receiver's log through runtime.access and rescales the rules with
    # runtime.manifests: the local monitoring stack's own modules are out of its reach, not only the platform
    ("validation/drills/alerts.py", "import runtime.local.prometheus.config as _config",
     "validation is not allowed to import runtime.local"),
    ("validation/drills/alerts.py", "import runtime.local.prometheus.stack as _stack",
     "validation is not allowed to import runtime.local"),
    ("validation/drills/alerts.py", "import runtime.local.platform as _platform",
     "validation is not allowed to import runtime.local"),
]


@pytest.mark.parametrize(("package", "line", "broken"), REACHING_IN)
def test_outside_code_reaching_into_the_scheduler_or_the_local_platform_breaks_a_contract(
        planted: Planted, package: str, line: str, broken: str) -> None:
    planted.assert_breaks(package, line, broken)


# CLI code below the CLI: the report of a validation run drawn with Rich (import-linter names the package only)
CLI_BELOW_THE_CLI = ("validation/report.py", "from rich.table import Table as _Table", "validation is not allowed "
                     "to import rich")


def test_cli_code_below_the_cli_breaks_a_contract(planted: Planted) -> None:
    planted.assert_breaks(*CLI_BELOW_THE_CLI, imported="rich")


@dataclass
class Planted:
    """A copy of the tree with every import of the cases above planted in it, and import-linter's report on it.

    One run reports each broken contract under its own heading (``X is not allowed to import Y:``) with every
    illegal import as ``importer -> imported (l.N)``, so each planted line is found at its own line number:
    what a run with that line alone would have reported (and thirty runs of the linter cost some 15 CPU-s).
    """

    tree: Path
    report: str = ""
    lines: dict[tuple[str, str], int] = field(default_factory=dict)  # (file, planted line) -> its line number

    def plant(self, package: str, line: str) -> None:
        with (self.tree / package).open("a") as module:
            module.write(f"\n\ndef _planted_{len(self.lines)}() -> None:\n    {line}  # noqa\n")  # lazy ones count
        self.lines[package, line] = len((self.tree / package).read_text().splitlines())

    def assert_breaks(self, package: str, line: str, broken: str, imported: str | None = None) -> None:
        importer = package.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        parts = line.split()
        imported = imported or (parts[1] if parts[0] == "import" else f"{parts[1]}.{parts[3]}")
        illegal = f"{importer} -> {imported} (l.{self.lines[package, line]})"
        section = self.report.split(f"\n{broken}:\n", 1)
        assert len(section) == 2, f"no contract reports {broken!r}:\n{self.report[-3000:]}"
        assert illegal in section[1].split(" is not allowed to import ", 1)[0], (illegal, section[1][:2000])


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    tree = Planted(_copy_tree(tmp_path_factory.mktemp("planted")))
    for package, line, _ in [*UPWARD_IMPORTS, *REACHING_IN, CLI_BELOW_THE_CLI]:
        tree.plant(package, line)
    done = _lint_imports(tree.tree)
    assert done.returncode != 0, done.stdout[-3000:]
    tree.report = done.stdout
    return tree


def test_a_module_the_components_layers_do_not_place_breaks_them(tree_copy: Path) -> None:
    # exhaustive: a new module beside the resource-declaring ones must be placed above or below the tooling
    (tree_copy / "components/stray.py").write_text('"""A module nobody placed."""\n')
    done = _lint_imports(tree_copy)
    assert done.returncode != 0
    assert "components.stray" in done.stdout


@pytest.mark.parametrize("program", ["__main__.py", "bootstrap/__main__.py"])
def test_the_pulumi_programs_do_not_import_the_review_tooling(program: str) -> None:
    # the programs sit outside the linted packages; what they import is read from their source
    tree = ast.parse((ROOT / program).read_text())
    imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported & {"components.bootstrap", "components.iam"}, imported  # the parse found the programs' imports
    assert not {name for name in imported if name.startswith("components.review")}
