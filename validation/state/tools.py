"""The three state operations. Each one that writes exports a backup first and reports where it went."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from validation.adapters.pulumi_stack import OnOutput, PulumiStack
from validation.state.backups import backup_stack


@dataclass(frozen=True)
class StateChange:
    """What a restore or repair did."""

    backup: Path | None
    source: str
    refresh_result: str | None = None
    cleared: list[str] = field(default_factory=list)


def restore(stack: PulumiStack, deployment: dict[str, Any], source: str, backup_dir: Path,
            refresh: bool = True, on_output: OnOutput | None = None) -> StateChange:
    """Back up the current state, import ``deployment``, then refresh it against the cloud."""
    if "deployment" not in deployment or "version" not in deployment:
        raise ValueError(f"{source} is not an importable deployment ({{version, deployment}})")
    backup = backup_stack(stack, backup_dir)
    stack.import_state(deployment)
    result = stack.refresh(on_output) if refresh else None
    return StateChange(backup=backup, source=source, refresh_result=result)


def pending_operations(deployment: dict[str, Any]) -> list[str]:
    """``type urn`` of each pending operation recorded in an export."""
    pending = (deployment.get("deployment") or {}).get("pending_operations") or []
    return [f"{op.get('type', '?')} {op.get('resource', {}).get('urn', '?')}" for op in pending]


def repair(stack: PulumiStack, backup_dir: Path, refresh: bool = True,
           on_output: OnOutput | None = None) -> StateChange:
    """Clear the pending operations an interrupted update left behind, then refresh.

    Pulumi refuses to update a stack with pending operations; each one is a resource whose create,
    update or delete may or may not have happened. Clearing them and refreshing lets Pulumi look again.
    """
    current = stack.export()
    cleared = pending_operations(current)
    if not cleared:
        return StateChange(backup=None, source="no pending operations: nothing to repair")
    backup = backup_stack(stack, backup_dir)
    repaired = {**current, "deployment": {**current["deployment"], "pending_operations": []}}
    stack.import_state(repaired)
    result = stack.refresh(on_output) if refresh else None
    return StateChange(backup=backup, source="pending operations cleared", refresh_result=result, cleared=cleared)
