"""``make test``'s xdist grouping (tests/conftest.py) takes effect: a module runs on one worker, its module
fixture made once, and the modules of integration or slow tests are handed out first.

A throw-away project with the suite's own conftest, run in a child pytest on two xdist workers."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
MODULE = """
import os, pytest
pytestmark = [pytest.mark.{mark}]
@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE_LOG"], "a") as log:
        log.write("{name}\\n")
{tests}
"""


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_grouped_module_runs_on_one_worker_with_its_fixture_made_once(tmp_path: Path) -> None:
    _project(tmp_path)
    for name, mark in (("test_platform", "integration"), ("test_plan", "slow")):
        tests = "".join(f"def test_{i}(made): pass\n" for i in range(6))
        (tmp_path / "tests" / f"{name}.py").write_text(MODULE.format(mark=mark, name=name, tests=tests))
    (tmp_path / "tests" / "test_unit.py").write_text("".join(f"def test_{i}(): pass\n" for i in range(6)))
    made = tmp_path / "made.log"
    stdout = _run_xdist(tmp_path, 2, made)
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED (tests/(\w+)\.py::\S+)", stdout)
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, _, module in ran:
        workers[module].add(worker)
    assert len(ran) == 18
    assert len(workers["test_platform"]) == 1 and len(workers["test_plan"]) == 1, dict(workers)
    assert sorted(made.read_text().split()) == ["test_plan", "test_platform"]  # each module's fixture once
    order = [module for _, _, module in ran]
    assert set(order[:2]) <= {"test_platform", "test_plan"}  # the grouped modules are handed out first


def _project(root: Path) -> None:
    """A throw-away project at ``root``: a ``tests`` folder with the suite's conftest, and the two markers."""
    (root / "tests").mkdir()
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    integration: x\n    slow: x\n")


def _run_xdist(root: Path, workers: int, made: Path | None = None) -> str:
    """Run the project at ``root`` on ``workers`` xdist workers under ``--dist loadgroup``, each test's worker
    shown (``-v``); its output. ``made`` is where the projects' fixtures log that they were made."""
    env = {**_env(), **({"MADE_LOG": str(made)} if made is not None else {})}
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", str(workers), "--dist", "loadgroup", "-v", "-p",
                           "no:cacheprovider", "-p", "no:randomly", "tests"], cwd=root, capture_output=True,
                          text=True, timeout=110, check=False, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_long_group_with_few_tests_is_handed_out_before_larger_ones(tmp_path: Path) -> None:
    """xdist's own order, by number of tests, started the composed images' three tests after some forty larger
    groups; the suite's conftest hands out LONGEST_GROUPS first, whatever their size."""
    _project(tmp_path)
    for name, count in (("test_composed_images", 1), ("test_many", 8)):
        tests = "".join(f"def test_{i}(made): pass\n" for i in range(count))
        (tmp_path / "tests" / f"{name}.py").write_text(MODULE.format(mark="slow", name=name, tests=tests))
    made = tmp_path / "made.log"
    _run_xdist(tmp_path, 1, made)
    assert made.read_text().split() == ["test_composed_images", "test_many"]


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_module_of_unit_tests_runs_on_one_worker(tmp_path: Path) -> None:
    """Unit tests were scheduled one by one, each worker paying what a module's tests warm up (a lazy import,
    parsed CRDs) again; they run module by module now."""
    _project(tmp_path)
    (tmp_path / "tests" / "test_unit.py").write_text("".join(f"def test_{i}(): pass\n" for i in range(40)))
    stdout = _run_xdist(tmp_path, 2)
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED tests/test_unit\.py::\S+", stdout)
    assert len(ran) == 40 and len(set(ran)) == 1, sorted(set(ran))


PACKAGE_CONFTEST = """
import os, pytest
@pytest.fixture(scope="package")
def shared():
    with open(os.environ["MADE_LOG"], "a") as log:
        log.write("shared\\n")
"""
SHARING_MODULE = """
import pytest
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("tests/shared/conftest.py::shared")]
{tests}
"""


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_modules_naming_one_group_share_their_package_fixture_on_one_worker(tmp_path: Path) -> None:
    """Each module of integration tests is a group of its own unless it names one: two modules sharing a
    package-scoped fixture (a package's local platform) made it once per worker, twice in all, before they named
    the same group."""
    _project(tmp_path)
    package = tmp_path / "tests" / "shared"
    package.mkdir()
    (package / "conftest.py").write_text(PACKAGE_CONFTEST)
    for name in ("test_first", "test_second"):
        tests = "".join(f"def test_{i}(shared): pass\n" for i in range(6))
        (package / f"{name}.py").write_text(SHARING_MODULE.format(tests=tests))
    (tmp_path / "tests" / "test_unit.py").write_text("".join(f"def test_{i}(): pass\n" for i in range(6)))
    made = tmp_path / "made.log"
    stdout = _run_xdist(tmp_path, 2, made)
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED tests/shared/test_\w+\.py::\S+", stdout)
    assert len(ran) == 12 and len(set(ran)) == 1, ran  # both modules, one worker
    assert made.read_text().split() == ["shared"]  # the package fixture made once


def test_every_longest_group_is_a_module_of_the_suite() -> None:
    from tests.conftest import LONGEST_GROUPS

    root = CONFTEST.parent.parent
    assert [group for group in LONGEST_GROUPS if not (root / group).is_file()] == []
