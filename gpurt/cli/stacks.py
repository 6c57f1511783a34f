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

STACK_HELP = ("Pulumi stack, fully qualified: ORG/gpu-runtime/STACK (ORG/STACK is read in this project). A bare name "
              "is refused: Pulumi would resolve it in your default organization, not the stack's.")
StackOption = Annotated[str, typer.Option("--stack", "-s", help=STACK_HELP)]
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
        from components.review.git_worktree import WorktreeError
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
            from rich.markup import escape

            # Escaped: a message naming `gpuPools[t4-spot]` would otherwise lose the brackets to rich's markup.
            err_console.print(f"[red]error:[/] {escape(str(exc))}")
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


def qualified_stack(stack: str, project: str = "gpu-runtime") -> str:
    """``stack`` as ``ORG/PROJECT/STACK``; a bare name is refused.

    Pulumi Cloud resolves a name without an owner against the caller's default organization (``pulumi org
    get-default``, else the user; pkg/backend/httpstate/backend.go ``ParseStackReference``), so a bare
    ``staging`` may name another stack than the one the deploys and the policy group know, or none.
    """
    parts = stack.split("/")
    if len(parts) == 2 and all(parts):
        return f"{parts[0]}/{project}/{parts[1]}"
    if len(parts) == 3 and all(parts):
        return stack
    raise typer.BadParameter(f"{stack!r}: give the fully qualified stack, ORG/{project}/STACK (a bare name would be "
                             "resolved in your default Pulumi organization, not the stack's)", param_hint="--stack")


def open_stack(stack: str, work_dir: Path) -> PulumiStack:
    """The stack ``stack`` (``ORG/gpu-runtime/STACK``) of the program in ``work_dir``, through pulumi.automation."""
    from validation.adapters.pulumi_stack import AutomationStack

    qualified = qualified_stack(stack)
    if not (work_dir / "Pulumi.yaml").exists():
        raise typer.BadParameter(f"{work_dir} holds no Pulumi.yaml; pass --work-dir", param_hint="--work-dir")
    return AutomationStack.select(qualified, work_dir.resolve())
