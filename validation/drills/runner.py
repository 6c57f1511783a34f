"""Runs drills by name against the local platform and turns each outcome into a ``DrillResult``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from validation.drills import alerts, chaos, dlq, drain_upgrade, evict_pool, leader
from validation.drills.base import DrillContext, DrillFailed, DrillResult

DRILLS: Final[dict[str, Callable[[DrillContext], None]]] = {
    "drain-upgrade": drain_upgrade.run,
    "evict-pool": evict_pool.run,
    "dlq": dlq.run,
    "leader": leader.run,
    "alerts": alerts.run,
    "chaos": chaos.run,
}


def run_drill(name: str, ctx: DrillContext) -> DrillResult:
    """Run one drill; a finding or an error fails it with the evidence gathered so far."""
    ctx.evidence = []
    ctx.details = []
    ctx.figures = {}
    start = time.monotonic()
    try:
        DRILLS[name](ctx)
        failure = None
    except DrillFailed as exc:
        failure = str(exc)
    except Exception as exc:  # a broken API call is a failed drill, reported, not a crashed run
        failure = f"{type(exc).__name__}: {exc}"
    return DrillResult(name=name, passed=failure is None, evidence=list(ctx.evidence), failure=failure,
                       duration_s=time.monotonic() - start, figures=dict(ctx.figures), details=list(ctx.details))
