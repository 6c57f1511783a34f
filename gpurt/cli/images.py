"""``gpurt images``: the platform's container images, as the stack references them."""

from __future__ import annotations

import typer

images_app = typer.Typer(help="The platform's container images: digest pinning and sizes.", no_args_is_help=True)


@images_app.command("pinned")
def pinned(
    stack: str = typer.Option(..., "--stack", "-s", help="Stack (Pulumi.<stack>.yaml) whose objects are checked."),
) -> None:
    """Exit 1 unless every image of the stack's registry, and every third-party image (the DCGM exporter, the Dask
    operator), is referenced by digest (``...@sha256:``).

    The deploy workflow runs it after setting the pushed digests and before ``pulumi up``.
    """
    from components.review.images import references, third_party
    from components.review.plan import PlanError, run_plan

    try:
        plan = run_plan(stack)
    except PlanError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    found = references((r.name, r.props) for r in plan.resources if r.custom)
    loose = [ref for ref in found if not ref.pinned]
    for ref in loose:
        typer.echo(f"{ref.resource} {ref.path}: {ref.image} has no digest", err=True)
    if not found:
        typer.echo(f"error: stack {stack} references no image of its registry", err=True)
        raise typer.Exit(1)
    others = third_party((r.name, r.props) for r in plan.resources if r.custom)
    loose_others = [ref for ref in others if not ref.pinned]
    for ref in loose_others:
        typer.echo(f"{ref.resource} {ref.path}: {ref.image} has no digest", err=True)
    if loose:
        typer.echo(f"{len(loose)} of {len(found)} image references of stack {stack} are not pinned by digest: "
                   "set images.schedulerDigest and images.workerDigest", err=True)
    if loose_others:
        typer.echo(f"{len(loose_others)} third-party image(s) of stack {stack} are not pinned by digest: set "
                   f"images.operatorDigest (`gpurt bootstrap` does; by hand: `pulumi config set --path "
                   f"gpu-runtime:images.operatorDigest \"$(gpurt images digest)\" --stack {stack}`)", err=True)
    if loose or loose_others:
        raise typer.Exit(1)
    typer.echo(f"all {len(found) + len(others)} image references of stack {stack} are pinned by digest")


@images_app.command("digest")
def digest(
    reference: str = typer.Argument(
        "", help="host/name:tag of a public image; default: the Dask operator's at the locked dask-kubernetes "
        "version."),
) -> None:
    """Print the digest the image's registry serves for the tag now (what a stack pins: images.operatorDigest).

    Read once and committed, never at deploy time: a moved tag must not deploy unreviewed bytes. After an
    operator upgrade: ``pulumi config set --path gpu-runtime:images.operatorDigest "$(gpurt images digest)"``.
    """
    from runtime.manifests.helm_values import operator_image_reference
    from validation.adapters.registry import RegistryError, manifest_digest

    try:
        typer.echo(manifest_digest(reference or operator_image_reference()))
    except RegistryError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@images_app.command("sizes")
def sizes(
    top: int = typer.Option(6, "--top", min=0, help="List this many of each image's biggest distributions."),
) -> None:
    """Each image's compressed size, computed from the wheels uv.lock pins for it; exit 1 over a target.

    The base image is not in the lock and not counted. Targets: gpu-scheduler 150 MB, gpu-worker 1.5 GB
    (a GPU node scaling from zero pulls the worker image before its first job).
    """
    from components.review.image_sizes import Lock, LockError, image_sizes

    try:
        found = image_sizes(Lock.read())
    except (OSError, LockError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for image in found:
        verdict = "within" if image.within_target else "OVER"
        typer.echo(f"{image.image}: {image.size / 1e6:.1f} MB in {len(image.packages)} wheels, {verdict} its "
                   f"{image.target / 1e6:.0f} MB target")
        for package in image.largest(top):
            typer.echo(f"  {package.size / 1e6:8.1f} MB  {package.name} {package.version}")
    if not all(image.within_target for image in found):
        raise typer.Exit(1)
