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

TESTS = Path(__file__).resolve().parent
CONFTEST = TESTS / "conftest.py"
MODULE = """
import os, pytest
pytestmark = [pytest.mark.{mark}]
@pytest.fixture(scope="module")
def made():
    with open(os.environ["MADE_LOG"], "a") as log:
        log.write("{name}\\n")
{tests}
"""


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
HEAVY = {"test_composed_images", "test_big", "test_plan", "test_platform", "test_first", "test_second"}


def _project(root: Path) -> None:
    """A throw-away project at ``root``: a ``tests`` folder with the suite's conftest (and the module of ours it
    imports), and the two markers."""
    (root / "tests").mkdir()
    shutil.copy(CONFTEST, root / "tests" / "conftest.py")
    shutil.copy(TESTS / "ast_parse_race.py", root / "tests" / "ast_parse_race.py")
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


@pytest.fixture(scope="module")
def grouped_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[str]], list[str]]:
    """One throw-away project run on two xdist workers: each worker's tests in the order it ran them (as
    ``module::test``), and the module and package fixtures in the order they were made.

    In it: two modules of integration or slow tests with a module fixture each; a module of forty unit tests;
    a slow module of one test named in LONGEST_GROUPS (the composed images') beside a slow one of eight that is
    collected before it; and a package whose two modules share a package fixture and name one xdist group for it.
    """
    root = tmp_path_factory.mktemp("grouped")
    _project(root)
    for name, mark, count in (("test_platform", "integration", 6), ("test_plan", "slow", 6),
                              ("test_composed_images", "slow", 1), ("test_big", "slow", 8)):
        tests = "".join(f"def test_{i}(made): pass\n" for i in range(count))
        (root / "tests" / f"{name}.py").write_text(MODULE.format(mark=mark, name=name, tests=tests))
    (root / "tests" / "test_unit.py").write_text("".join(f"def test_{i}(): pass\n" for i in range(40)))
    package = root / "tests" / "shared"
    package.mkdir()
    (package / "conftest.py").write_text(PACKAGE_CONFTEST)
    for name in ("test_first", "test_second"):
        tests = "".join(f"def test_{i}(shared): pass\n" for i in range(6))
        (package / f"{name}.py").write_text(SHARING_MODULE.format(tests=tests))
    made = root / "made.log"
    stdout = _run_xdist(root, 2, made)
    ran: dict[str, list[str]] = defaultdict(list)
    for worker, module, test in re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED tests/(?:shared/)?(\w+)\.py::(\w+)", stdout):
        ran[worker].append(f"{module}::{test}")
    assert sum(map(len, ran.values())) == 73, stdout[-3000:]  # every test of the project
    return dict(ran), made.read_text().split()


def _workers_of(ran: dict[str, list[str]], module: str) -> set[str]:
    return {worker for worker, tests in ran.items() if any(t.startswith(f"{module}::") for t in tests)}


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_grouped_module_runs_on_one_worker_with_its_fixture_made_once(grouped_run) -> None:  # type: ignore[no-untyped-def]
    ran, made = grouped_run
    for module in ("test_platform", "test_plan", "test_big"):
        assert len(_workers_of(ran, module)) == 1, ran
    assert sorted(made) == ["shared", "test_big", "test_composed_images", "test_plan", "test_platform"]
    for tests in ran.values():  # the integration and slow modules are handed out before the unit modules
        modules = [test.split("::")[0] for test in tests]
        first_unit = modules.index("test_unit") if "test_unit" in modules else len(modules)
        assert set(modules[:first_unit]) <= HEAVY and set(modules[first_unit:]) <= {"test_unit"}, modules


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_long_group_with_few_tests_is_handed_out_before_larger_ones(grouped_run) -> None:  # type: ignore[no-untyped-def]
    """xdist's own order, by number of tests, started the composed images' three tests after some forty larger
    groups; the suite's conftest hands out LONGEST_GROUPS first, whatever their size: the one test of the
    composed images is the first its worker runs, though every other group is larger."""
    ran, _ = grouped_run
    (worker,) = _workers_of(ran, "test_composed_images")
    assert ran[worker][0] == "test_composed_images::test_0", ran[worker]


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_a_module_of_unit_tests_runs_on_one_worker(grouped_run) -> None:  # type: ignore[no-untyped-def]
    """Unit tests were scheduled one by one, each worker paying what a module's tests warm up (a lazy import,
    parsed CRDs) again; they run module by module now."""
    ran, _ = grouped_run
    (worker,) = _workers_of(ran, "test_unit")
    assert sum(test.startswith("test_unit::") for test in ran[worker]) == 40


@pytest.mark.slow  # two xdist workers in a child pytest: seconds of start-up
@pytest.mark.timeout(120)
def test_modules_naming_one_group_share_their_package_fixture_on_one_worker(grouped_run) -> None:  # type: ignore[no-untyped-def]
    """Each module of integration tests is a group of its own unless it names one: two modules sharing a
    package-scoped fixture (a package's local platform) made it once per worker, twice in all, before they named
    the same group."""
    ran, made = grouped_run
    (worker,) = _workers_of(ran, "test_first")
    assert _workers_of(ran, "test_second") == {worker}  # both modules on one worker
    assert made.count("shared") == 1  # the package fixture made once


@pytest.mark.timeout(120)
def test_a_module_using_a_grouped_package_fixture_outside_its_group_is_refused(tmp_path: Path) -> None:
    """A module that uses a package fixture another module names a group for, without naming it, would make the
    fixture again on its own worker (a second local platform): the collection is refused, naming it."""
    _project(tmp_path)
    package = tmp_path / "tests" / "shared"
    package.mkdir()
    (package / "conftest.py").write_text(PACKAGE_CONFTEST)
    (package / "test_first.py").write_text(SHARING_MODULE.format(tests="def test_0(shared): pass\n"))
    (package / "test_stray.py").write_text("def test_0(shared): pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=100, check=False, env=_env())
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout[-2000:] + done.stderr[-2000:]
    assert "tests/shared/test_stray.py uses tests/shared/conftest.py::shared outside its xdist group" in done.stderr
    assert "test_first.py" not in done.stderr


def test_every_longest_group_is_a_module_of_the_suite() -> None:
    from tests.conftest import LONGEST_GROUPS

    root = TESTS.parent
    assert [group for group in LONGEST_GROUPS if not (root / group).is_file()] == []
