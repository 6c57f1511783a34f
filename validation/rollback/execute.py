"""Carry out a rollback plan: back up, check the old commit out, set its config, ``pulumi up``, validate.

The ``up`` runs under the policy pack of the operator's checkout, as every deploy does: an old program is
held to today's rules, and the program being deployed cannot bring weaker rules of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from components.review.git_worktree import worktree
from validation.adapters.pulumi_stack import OnOutput, PulumiStack
from validation.rollback.plan import RollbackError, RollbackPlan
from validation.state.backups import backup_stack


@dataclass(frozen=True)
class RollbackOutcome:
    """What the rollback did: where the state backup is, how ``up`` ended, whether validation passed."""

    plan: RollbackPlan
    backup: Path
    up_result: str
    validated: bool


def execute(plan: RollbackPlan, stack: PulumiStack, repo: Path, open_stack: Callable[[Path], PulumiStack],
            backup_dir: Path, validate: Callable[[], bool], *, policy_pack: Path,
            on_output: OnOutput | None = None) -> RollbackOutcome:
    """Deploy ``plan.commit`` with the target update's config under ``policy_pack``, then run ``validate``.

    ``open_stack`` selects the same stack for the program in a directory (the temporary worktree), so the
    checkout the operator works in is never modified.
    """
    backup = backup_stack(stack, backup_dir)
    with worktree(repo, plan.commit) as program:
        old = open_stack(program)
        old.set_config(plan.target)
        try:
            result = old.up(on_output, policy_packs=[policy_pack])
        except Exception as exc:  # whatever failed, the operator needs the backup's path with the reason
            raise RollbackError(f"pulumi up of commit {plan.commit[:12]} failed: {str(exc).strip()[-500:]}; "
                                f"state backup: {backup}") from exc
    if result != "succeeded":
        raise RollbackError(f"pulumi up of commit {plan.commit[:12]} ended {result!r}; state backup: {backup}")
    return RollbackOutcome(plan=plan, backup=backup, up_result=result, validated=validate())
