"""``gpurt bootstrap``: make an empty project ready for a stack's first deploy, or check that it is."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated

import typer

from gpurt.cli.common import EXIT_FAILED, console, err_console
from gpurt.cli.stacks import WorkDirOption, handled


@handled
def bootstrap(
    stack: Annotated[str, typer.Option(
        "--stack", "-s", help="Stack name (staging, production: its Pulumi.<stack>.yaml); the Pulumi stack is "
        "PULUMI_ORG/gpu-runtime/STACK.")],
    github_repository: str = typer.Option(
        "",
        "--github-repository",
        help="OWNER/NAME of the GitHub repository whose workflows deploy and preview "
        "the stack: the only one CI's Workload Identity Federation admits.",
    ),
    pulumi_org: str = typer.Option(
        "",
        "--pulumi-org",
        help="Pulumi Cloud organization the stack lives in (ORG of ORG/gpu-runtime/STACK), whose policy group "
        "enforces the policy pack on it. --check looks for the stack there only.",
    ),
    check: bool = typer.Option(
        False,
        "--check",
        help="Change nothing: exit 1 naming each prerequisite of a deploy that is missing (tools, APIs, "
        "billing, registry, stack, quotas below what the pools start with), and name each quota below the stack's "
        "need at its maxima (the deploy workflow runs this before pushing images).",
    ),
    work_dir: WorkDirOption = Path("."),
) -> None:
    """Run the bootstrap's steps in order, each changing only what is missing (docs/infrastructure.md).

    Base APIs (gcloud), then the bootstrap program (bootstrap/: APIs, image repository, the nodes', deploy
    and preview accounts, CI's Workload Identity Federation), then the main stack with its control token and the
    Dask operator's image digest, then the server-side policy gate.
    A second run changes nothing. Needs the gcloud and pulumi CLIs, logged in as
    a project owner and a Pulumi organization admin.
    """
    from validation.adapters.bootstrap import (
        GcloudSetup,
        GithubRepositories,
        PulumiCliStacks,
        PulumiCloudPolicies,
        RegistryDigests,
    )
    from validation.bootstrap import Target
    from validation.bootstrap import bootstrap as run_steps
    from validation.bootstrap import check as check_prerequisites

    root = work_dir.resolve()
    if not pulumi_org:
        raise typer.BadParameter("--pulumi-org is needed: the stack is ORG/gpu-runtime/STACK, and a bare name would "
                                 "be resolved in your default Pulumi organization", param_hint="--pulumi-org")
    if check:
        from components.review.plan import PlanError, run_plan

        try:
            needs = run_plan(stack, root).quotas  # the quotas the stack reaches, as `gpurt plan` reports them
        except PlanError as exc:
            err_console.print(f"[red]error:[/] cannot render stack {stack} to read the quotas it needs: {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        readiness = check_prerequisites(stack, root, GcloudSetup(), PulumiCliStacks(pulumi_org), needs)
        for problem in readiness.missing:
            err_console.print(f"[red]missing:[/] {problem}")
        for short in readiness.short:
            err_console.print(f"[yellow]no capacity:[/] {short}")
        if readiness.missing:
            err_console.print(f"run `gpurt bootstrap --stack {stack} --pulumi-org {pulumi_org}` as a project owner "
                              "first (docs/infrastructure.md, steps 1 to 3)")
            raise typer.Exit(EXIT_FAILED)
        console.print(f"stack {pulumi_org}/gpu-runtime/{stack}: every prerequisite of a deploy is there"
                      + (" (the pools cannot reach their maxima until the quotas above are raised)"
                         if readiness.short else ""))
        return
    if not github_repository:
        raise typer.BadParameter("--github-repository is needed (or --check)", param_hint="--github-repository")
    policies = PulumiCloudPolicies()  # first: without a Pulumi Cloud login nothing else should run
    target = Target(stack, root, github_repository, pulumi_org, GithubRepositories().ids(github_repository))
    with tempfile.TemporaryDirectory(prefix="gpurt-policy-") as scratch:
        report = run_steps(
            target, GcloudSetup(), PulumiCliStacks(pulumi_org), policies, RegistryDigests(),
            Path(scratch) / "pack",
        )
    for step in report.steps:
        mark = "[yellow]changed[/]" if step.changed else "[green]ok[/]"
        console.print(f"{mark:>20}  {step.name}: {step.detail}")
    # The deploy job runs in the GitHub environment named after the stack and reads its variables there; the
    # preview job serves both stacks from one environment, so its variables carry the stack's name.
    provider, deploy, preview = (
        report.outputs.get(key, "?")
        for key in ("workload_identity_provider", "deploy_service_account", "preview_service_account")
    )
    console.print("\nVariables for the workflows (docs/infrastructure.md, step 5):")
    console.print(f"  gh variable set GCP_WORKLOAD_IDENTITY_PROVIDER --env {stack} --body '{provider}'")
    console.print(f"  gh variable set GCP_DEPLOY_SERVICE_ACCOUNT --env {stack} --body '{deploy}'")
    console.print(f"  gh variable set GCP_WORKLOAD_IDENTITY_PROVIDER_{stack.upper()} --body '{provider}'")
    console.print(f"  gh variable set GCP_PREVIEW_SERVICE_ACCOUNT_{stack.upper()} --body '{preview}'")
    console.print(f"  gh variable set PULUMI_ORG --body '{pulumi_org}'")
