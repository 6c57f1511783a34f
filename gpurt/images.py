"""``gpurt images``: the platform's container images, as the stack references them."""

from __future__ import annotations

import typer

from gpurt.plan import StackName

images_app = typer.Typer(help="The platform's container images: digest pinning and sizes.", no_args_is_help=True)


@images_app.command("pinned")
def pinned(
    stack: StackName = typer.Option(..., "--stack", "-s", help="Stack whose rendered objects are checked."),
) -> None:
    """Exit 1 unless every image of the stack's registry is referenced by digest (``...@sha256:``).

    The deploy workflow runs it after setting the pushed digests and before ``pulumi up``.
    """
    from components.images import references
    from components.plan import PlanError, run_plan

    try:
        plan = run_plan(stack.value)
    except PlanError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    found = references((r.name, r.props) for r in plan.resources if r.custom)
    loose = [ref for ref in found if not ref.pinned]
    for ref in loose:
        typer.echo(f"{ref.resource} {ref.path}: {ref.image} has no digest", err=True)
    if not found:
        typer.echo(f"error: stack {stack.value} references no image of its registry", err=True)
        raise typer.Exit(1)
    if loose:
        typer.echo(f"{len(loose)} of {len(found)} image references of stack {stack.value} are not pinned by digest: "
                   "set images.schedulerDigest and images.workerDigest", err=True)
        raise typer.Exit(1)
    typer.echo(f"all {len(found)} image references of stack {stack.value} are pinned by digest")
