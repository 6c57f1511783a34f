"""What the commands on a Pulumi stack share: stack options, opening a stack, and one-line errors for them."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from gpurt.cli.common import EXIT_FAILED, err_console, friendly_errors

if TYPE_CHECKING:
    from validation.adapters.pulumi_stack import PulumiStack

StackOption = Annotated[str, typer.Option("--stack", "-s", help="Pulumi stack name (e.g. staging).")]
WorkDirOption = Annotated[Path, typer.Option("--work-dir", help="Folder holding Pulumi.yaml (the git checkout).")]
BackupDirOption = Annotated[Path, typer.Option("--backup-dir", help="Where state backups are written.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

P = ParamSpec("P")
R = TypeVar("R")


def handled(func: Callable[P, R]) -> Callable[P, R]:
    """Errors an operator can act on become one red line and a non-zero exit, never a traceback."""
    inner = friendly_errors(func)

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from components.git_worktree import WorktreeError
        from validation.bootstrap import BootstrapError
        from validation.build import TargetError
        from validation.leader import LeaderError
        from validation.rollback.kubernetes import RolloutError
        from validation.rollback.plan import RollbackError
        from validation.state.checkpoints import CheckpointError

        try:
            return inner(*args, **kwargs)
        except (TargetError, RollbackError, RolloutError, WorktreeError, CheckpointError, LeaderError,
                BootstrapError, ValueError) as exc:
            err_console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        except Exception as exc:
            from pulumi.automation.errors import CommandError

            if isinstance(exc, CommandError):
                err_console.print(f"[red]error:[/] the pulumi CLI failed: {str(exc).strip()[-800:]}")
                raise typer.Exit(EXIT_FAILED) from None
            from kubernetes.client.exceptions import ApiException
            from kubernetes.config import ConfigException

            if isinstance(exc, ApiException | ConfigException):
                reason = getattr(exc, "reason", None) or str(exc)
                err_console.print(f"[red]error:[/] Kubernetes: {reason} (check the kubeconfig context and RBAC)")
                raise typer.Exit(EXIT_FAILED) from None
            if isinstance(exc, FileNotFoundError) and "pulumi" in str(exc):
                err_console.print("[red]error:[/] the pulumi CLI is not on PATH: install it (get.pulumi.com)")
                raise typer.Exit(EXIT_FAILED) from None
            raise

    return wrapper


def open_stack(stack: str, work_dir: Path) -> PulumiStack:
    """The stack ``stack`` of the program in ``work_dir``, through pulumi.automation."""
    from validation.adapters.pulumi_stack import AutomationStack

    if not (work_dir / "Pulumi.yaml").exists():
        raise typer.BadParameter(f"{work_dir} holds no Pulumi.yaml; pass --work-dir", param_hint="--work-dir")
    return AutomationStack.select(stack, work_dir.resolve())
