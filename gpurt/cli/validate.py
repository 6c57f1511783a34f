"""Commands this package adds to ``gpurt``: validate, rollback, state, leader, drill."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpurt.cli.common import EXIT_FAILED, EXIT_NO_CAPACITY, LocalDirOption, console, err_console
from gpurt.cli.stacks import STACK_HELP, WorkDirOption, handled

JunitOption = Annotated[Path | None, typer.Option("--junit", help="Also write a JUnit XML report to this file.")]


@handled
def validate(
    stack: Annotated[str | None, typer.Option("--stack", "-s", help=STACK_HELP)] = None,
    local: Annotated[bool, typer.Option("--local", help="Validate the local platform (gpurt local up).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    junit: JunitOption = None,
    work_dir: WorkDirOption = Path("."),
    kube_context: Annotated[str | None, typer.Option("--kube-context", help="kubeconfig context.")] = None,
    local_dir: LocalDirOption = None,
) -> None:
    """Run the post-deploy checklist (docs/validation.md): exit 1 if any check finds the platform broken, 4 if it
    works but a quota is below the stack's need (request it: nothing to roll back), 0 if all is well."""
    from gpurt.cli.render import print_validation
    from gpurt.cli.stacks import open_stack
    from validation.build import cloud_target, local_target
    from validation.report import Verdict
    from validation.runner import run_checks
    from validation.targets import cloud_checks, local_checks

    if local == (stack is not None):
        raise typer.BadParameter("give exactly one of --local or --stack NAME")
    if stack is None:
        from runtime.local import LocalPlatform, processes

        name, checks = "local", local_checks(local_target(LocalPlatform(local_dir), processes.is_alive))
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
        print_validation(report, console)
    if report.verdict is Verdict.BROKEN:
        raise typer.Exit(EXIT_FAILED)
    if report.verdict is Verdict.NO_CAPACITY:
        raise typer.Exit(EXIT_NO_CAPACITY)
