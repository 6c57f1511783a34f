"""Shared test set-up: no test reaches a real cloud, and CUDA runs only where a GPU exists."""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Iterator
from typing import Final

import pytest

from runtime.protocol.contract import SchedulerEnv
from tests.ast_parse_race import PARSES_RACE, guard_ast_parse

if PARSES_RACE:  # before any test starts a thread (see tests/ast_parse_race.py)
    guard_ast_parse()

# Keep Google client libraries from looking for credentials or metadata servers.
os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "gpurt-test")
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
# The platforms the tests start (their scheduler processes inherit this environment) run no warm-up: a
# worker's warm-up compiles or loads every kernel, some 8 CPU-seconds per worker with numba's cache filled
# and over a minute without it, and the suite starts dozens of workers, nearly all for noop jobs. A kernel
# job on such a platform compiles its own kernel inside the job instead. The warm-up itself is tested on
# a real LocalCluster with the preload (tests/runtime/worker/test_warm.py).
os.environ.setdefault(SchedulerEnv.WARM_WORKERS, "false")
# A record that a handler cannot write (a background thread of a finished test logging into pytest's closed
# capture stream) is dropped, not printed with its traceback on stderr: that printing is noise in the report.
logging.raiseExceptions = False

# The garbage collector, tuned for a test worker's heap: after the collection and a few rendered stacks it holds a
# million objects, and Python's default thresholds (700, 10, 10) walk all of them in every full collection. Measured
# on the unit tests of components/, validation/ and runtime/manifests/ in one process (1,221 tests, 2026-11-29):
# 12.2 s of 104 CPU-s in the collector (23 full collections, 0.4 s each, and 6,600 young ones), 3.7 s with these
# (5 full). Cyclic garbage waits longer to be freed, which a test that needs it gone sooner asks for (gc.collect()).
gc.set_threshold(50_000, 20, 10)

# The usual umask: what the code writes is private only if it makes it so, not because the test runner's umask
# (077 on some machines) happens to.
OPEN_UMASK = 0o022


@pytest.fixture
def open_umask() -> Iterator[None]:
    """Run the test under umask 022, as most users' shells are, and restore the runner's afterwards."""
    previous = os.umask(OPEN_UMASK)
    try:
        yield
    finally:
        os.umask(previous)


# The grouped modules that take longest (their tests' seconds together, measured in a full run on the 2-core
# machine, 2026-11-28), longest first. Handed out first, they run while the short groups and the unit tests fill
# the other workers, instead of one of them starting last and running on alone (it did: xdist's own order, by
# number of tests, started the composed images' three tests after some forty larger groups). Only the order
# depends on this list: a module missing from it runs all the same, after those listed.
LONGEST_GROUPS: Final = (
    "tests/runtime/local/test_replicas.py",
    "tests/test_composed_images.py",
    "tests/validation/test_drill_chaos.py",
    "tests/kernels/test_cudasim.py",
    "tests/runtime/scheduler/test_queues_end_to_end.py",
    "tests/validation/test_drills.py",
    "tests/runtime/scheduler/test_restart.py",
    "tests/gpurt/bench/kernels/test_warm_start.py",
    "tests/gpurt/test_demo.py",
    "tests/components/test_plan_diff.py",
    "tests/runtime/scheduler/test_overflow.py",
    "tests/components/test_sdk_inputs.py",
)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``--dist loadgroup``, xdist hands out the groups in collection order (``pytest_collection_modifyitems``
    puts the longest first), not re-sorted by their number of tests."""
    if getattr(config.option, "dist", None) == "loadgroup":
        config.option.loadscopereorder = False


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` starts three workers more than this process may use cores: much of the suite waits on real
    time (drills, leases, alert windows, jobs that sleep, platforms starting) rather than on a core, and the
    extra workers on two cores fill those waits. Measured on the 2-core machine, quiet, every test passing each
    way: 521 s with three workers against 630 to 644 s with two (2026-11-26); 637 s with four against 677 s
    with three (2026-11-27); then, with the suite grown and each worker's collector tuned, 501 s with five
    against 526 s with four and 521 s with six, the three one after another (and 460 s against 514 s in another
    pair), 2026-11-29. A sixth worker's collection and memory cost more than the waits it fills."""
    return len(os.sched_getaffinity(0)) + 3


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which names a group it sees (see below)
def pytest_collection_modifyitems(config, items) -> None:  # type: ignore[no-untyped-def]
    """Under pytest-xdist (``make test`` runs ``-n auto --dist loadgroup``), each test module is one xdist
    group: its tests run on one worker, one after another, so a module fixture (a local platform, a plan, the
    CUDA simulator's run) is made once, not once per worker that happens to get one of its tests, and so is
    what a module's tests warm up as they go (a lazy import such as Vertex AI's SDK, the Dask operator's CRDs
    parsed, a stack rendered). Measured on the quiet 2-core machine, the unit tests alone on four workers
    (2026-11-29): 170 s and 314 CPU-seconds with each unit test scheduled alone, 134 to 143 s and 252 to 269
    CPU-seconds with their modules grouped. Two modules may run at once, one per worker, which every
    platform here allows (free ports, its own temporary directory).

    Modules that share a package-scoped fixture (a package's one local platform) name one group of their own
    with xdist's marker, ``pytest.mark.xdist_group(name)``: a package fixture is made once per worker that runs
    a test of the package, so the modules must run on the same worker for it to be made once.

    pytest-xdist 3.8 groups by a suffix it writes into the test's id, which pytest 9.2's structured ids
    no longer take (https://github.com/pytest-dev/pytest-xdist/issues/1386): without the suffix written
    here, every test is scheduled alone and a module's fixtures are made on both workers."""
    loadgroup = bool(getattr(config.option, "loadgroup", False))  # set on xdist's workers under --dist loadgroup
    groups = {id(item): _group_of(item) for item in items}
    _check_package_fixture_groups(items, groups)
    for item in items:
        group = groups[id(item)]
        item.add_marker(pytest.mark.xdist_group(group))
        if loadgroup and not item.nodeid.endswith(f"@{group}"):  # a fixed xdist has written it already
            _name_group(item, group)
    if loadgroup:
        # The scheduler hands out groups in collection order: the long groups first, longest first
        # (LONGEST_GROUPS), then the other groups of integration or slow tests, then the unit modules, so that
        # the many short groups left at the end fill the workers up to the same finish instead of one long
        # module starting last while the others idle.
        rank = {group: index for index, group in enumerate(LONGEST_GROUPS)}
        heavy = {groups[id(item)] for item in items
                 if item.get_closest_marker("integration") or item.get_closest_marker("slow")}
        items.sort(key=lambda item: (rank.get(groups[id(item)], len(rank)), groups[id(item)] not in heavy))


def _check_package_fixture_groups(items: list[pytest.Item], groups: dict[int, str]) -> None:
    """Refuse the run when a test uses a package-scoped fixture that has a group of its own (some module names
    ``<package>/conftest.py::<fixture>`` with xdist's marker) from outside that group: under xdist, its
    worker would make the fixture a second time (a second local platform) and keep it to the end of the
    package. Twice a module was missed so (the scheduler's Dask-settings test, the CLI's broker restart)."""
    declared = set(groups.values())
    strays: set[str] = set()
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        for name, definitions in (info.name2fixturedefs.items() if info is not None else ()):
            fixture = definitions[-1]
            group = f"{fixture.baseid}/conftest.py::{name}"
            if fixture.scope == "package" and group in declared and groups[id(item)] != group:
                strays.add(f"{item.nodeid.split('::', 1)[0]} uses {group} outside its xdist group")
    if strays:
        raise pytest.UsageError("\n".join(sorted(strays)) + "\n(name the group in the module's pytestmark, "
                                "as the package's __init__.py defines it)")


def _group_of(item: pytest.Item) -> str:
    """The xdist group ``item`` runs in: the one its module names with xdist's marker, else its module."""
    named = item.get_closest_marker("xdist_group")
    if named is not None:
        return str(named.kwargs.get("name", named.args[0] if named.args else "default"))
    return item.nodeid.split("::", 1)[0]


def _name_group(item: pytest.Item, group: str) -> None:
    """Give ``item`` the id ``<id>@<group>`` that xdist's loadgroup scheduler reads its group from."""
    from _pytest.nodeid import NodeId  # pytest >= 9.2 keeps the id structured; str() of it is the id

    item._id = NodeId.parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]
