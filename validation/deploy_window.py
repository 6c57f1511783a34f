"""May this stack be deployed now? Its deploy window, and no cluster operation of GKE's own running.

GKE upgrades the control plane and the node pools on its own inside the stack's maintenance window
(``components.config.MaintenanceWindowConfig``). An upgrade holds the cluster's operations, so Pulumi's own
cluster and node-pool updates fail or wait behind it, and it drains nodes, the Dask scheduler's included, in the
middle of the post-deploy validation. So a stack may declare a ``deployWindow`` (never overlapping the
maintenance window: the config refuses that), and the deploy workflow runs ``gpurt deploy-window`` before
``pulumi up``: outside the deploy window it refuses unless an override gives a reason, and it always refuses
while a cluster operation runs (``gcloud container operations list``: an upgrade GKE started late, or a
manual one), since the deploy would collide with it whatever the hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Protocol

import yaml

from components.config import StackConfig, parse_stack_config
from components.gke import CLUSTER_NAME

# The states of a GKE operation still under way (the Operation resource's `status`; DONE is the only other one).
ACTIVE_STATUSES: Final = frozenset({"PENDING", "RUNNING", "ABORTING"})


@dataclass(frozen=True)
class ClusterOperation:
    """One GKE operation on the cluster or one of its node pools."""

    name: str
    operation_type: str
    """e.g. ``UPGRADE_MASTER``, ``UPGRADE_NODES``, ``SET_MAINTENANCE_POLICY``."""
    status: str
    target: str
    """The resource it acts on (its ``targetLink``)."""
    started: str


class ClusterOperations(Protocol):
    """GKE's operations of one location."""

    def listed(self, project: str, location: str) -> list[ClusterOperation]:
        """Every operation GKE lists in ``location`` (any status)."""


@dataclass(frozen=True)
class Verdict:
    """Whether a deploy may start, and why (or why not)."""

    allowed: bool
    reasons: tuple[str, ...]


def running_on(operations: Sequence[ClusterOperation], cluster: str = CLUSTER_NAME) -> list[ClusterOperation]:
    """The operations still under way on ``cluster`` or its node pools."""
    return [op for op in operations if op.status in ACTIVE_STATUSES
            and (op.target.endswith(f"/clusters/{cluster}") or f"/clusters/{cluster}/" in op.target)]


def check(config: StackConfig, now: datetime, operations: Sequence[ClusterOperation],
          override_reason: str = "") -> Verdict:
    """The deploy's verdict at ``now`` (aware): inside the deploy window (or overridden with a reason) and no
    cluster operation running."""
    reasons: list[str] = []
    allowed = True
    window = config.deploy_window
    if window is None:
        reasons.append("this stack has no deployWindow: it may be deployed at any time")
    elif window.contains(now):
        reasons.append(f"inside the deploy window ({window.describe()})")
    elif override_reason.strip():
        reasons.append(f"outside the deploy window ({window.describe()}), overridden: {override_reason.strip()}")
    else:
        allowed = False
        reasons.append(f"outside the deploy window ({window.describe()}); it is {now:%a %H:%M} UTC. Deploy inside "
                       "it, or give a reason to override (the deploy workflow's `outside_window_reason` input, "
                       "`--override` here)")
    running = running_on(operations)
    if running:
        allowed = False
        listed = "; ".join(f"{op.operation_type} {op.status} since {op.started} ({op.name})" for op in running)
        reasons.append(f"GKE is running an operation on the cluster ({listed}): wait until it is done "
                       "(`gcloud container operations wait`), whatever the window")
    return Verdict(allowed, tuple(reasons))


def load_stack(stack: str, root: Path) -> StackConfig:
    """The validated config of ``Pulumi.<stack>.yaml``; ``ConfigError`` (or OSError) names what is wrong."""
    path = root / f"Pulumi.{stack}.yaml"
    values: dict[str, Any] = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    raw = {key.split(":", 1)[1]: value for key, value in values.items() if key.startswith("gpu-runtime:")}
    return parse_stack_config(raw, values.get("gcp:project"), values.get("gcp:region"), source=path.name)
