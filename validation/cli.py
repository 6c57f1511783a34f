"""Commands this package adds to ``gpurt``: validate, rollback, state, leader, drill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from validation.cli_common import WorkDirOption, console, err_console, handled

JunitOption = Annotated[Path | None, typer.Option("--junit", help="Also write a JUnit XML report to this file.")]


@handled
def validate(
    stack: Annotated[str | None, typer.Option("--stack", "-s", help="Validate this deployed Pulumi stack.")] = None,
    local: Annotated[bool, typer.Option("--local", help="Validate the local platform (gpurt local up).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    junit: JunitOption = None,
    work_dir: WorkDirOption = Path("."),
    kube_context: Annotated[str | None, typer.Option("--kube-context", help="kubeconfig context.")] = None,
    local_dir: Annotated[Path | None, typer.Option("--local-dir", help="Local platform state folder.")] = None,
) -> None:
    """Run the post-deploy checklist (docs/validation.md); exit 1 if any check fails."""
    from validation.build import cloud_target, local_target
    from validation.cli_common import open_stack
    from validation.report import render_table
    from validation.runner import run_checks
    from validation.targets import cloud_checks, local_checks

    if local == (stack is not None):
        raise typer.BadParameter("give exactly one of --local or --stack NAME")
    if stack is None:
        name, checks = "local", local_checks(local_target(local_dir))
    else:
        name, checks = f"stack {stack}", cloud_checks(cloud_target(open_stack(stack, work_dir), kube_context))
    # Progress goes to stderr so that --json output on stdout stays parseable.
    with err_console.status("validating…") as status:
        report = run_checks(name, checks, on_result=lambda r: status.update(f"{r.name}: {r.status.value}"))
    if junit is not None:
        report.write_junit(junit)
    if as_json:
        typer.echo(report.to_json())
    else:
        render_table(report, console)
    if not report.ok:
        raise typer.Exit(1)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add this package's commands to the root app and the ``bench`` group."""
    from validation.cli_ops import drill_app, leader_app
    from validation.cli_rollback import rollback, state_app

    app.command("validate")(validate)
    app.command("rollback")(rollback)
    app.add_typer(state_app, name="state")
    app.add_typer(leader_app, name="leader")
    app.add_typer(drill_app, name="drill")
