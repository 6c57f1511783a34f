"""The infrastructure tests' shared set-up."""

from __future__ import annotations

import os

import pytest

from tests.components import infra


@pytest.fixture(scope="session", autouse=True)
def _plans_shared_by_the_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Under pytest-xdist, a folder of this run above the workers' own, where ``infra.stack_plan`` leaves each
    plan for the other workers (pytest removes it with the run's other old temporary folders)."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        infra.SHARED_PLANS[0] = tmp_path_factory.getbasetemp().parent / "plans"
