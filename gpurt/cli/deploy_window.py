"""``gpurt deploy-window``: may this stack be deployed now (its deploy window, no GKE operation running)?"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from gpurt.cli.common import UserError, console, err_console, friendly_errors


@friendly_errors
def deploy_window(
    stack: Annotated[str, typer.Option(help="Stack whose Pulumi.<stack>.yaml names the windows.")],
    override: Annotated[str, typer.Option(help="Why a deploy outside the deploy window must go now (recorded "
                                                "in the output; running cluster operations still refuse).")] = "",
) -> None:
    """Refuse a deploy outside the stack's deploy window (unless overridden with a reason) or while GKE runs an
    operation on the cluster (an upgrade); exit 0 when it may go."""
    from components.config import ConfigError
    from components.review.plan import REPO_ROOT
    from validation.adapters.gke_operations import GcloudClusterOperations
    from validation.deploy_window import check, load_stack

    try:
        config = load_stack(stack, REPO_ROOT)
    except (ConfigError, OSError) as exc:
        raise UserError(str(exc)) from None
    try:
        operations = GcloudClusterOperations().listed(config.project, config.region)
    except (RuntimeError, OSError) as exc:  # gcloud missing, not logged in, no access: its own message
        err_console.print(f"[red]error:[/] cannot list the cluster's operations: {exc}")
        raise typer.Exit(1) from None
    verdict = check(config, datetime.now(UTC), operations, override)
    for reason in verdict.reasons:
        (console if verdict.allowed else err_console).print(reason)
    if not verdict.allowed:
        raise typer.Exit(1)
    console.print(f"[green]{stack} may be deployed now[/]")
