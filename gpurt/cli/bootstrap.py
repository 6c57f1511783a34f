"""``gpurt bootstrap``: make an empty project ready for a stack's first deploy, or check that it is."""

from __future__ import annotations

import tempfile
from pathlib import Path

import typer

from gpurt.cli.common import EXIT_FAILED, console, err_console
from gpurt.cli.stacks import StackOption, WorkDirOption, handled


@handled
def bootstrap(
    stack: StackOption,
    github_repository: str = typer.Option(
        "",
        "--github-repository",
        help="OWNER/NAME of the GitHub repository whose workflows deploy and preview "
        "the stack: the only one CI's Workload Identity Federation admits.",
    ),
    pulumi_org: str = typer.Option(
        "",
        "--pulumi-org",
        help="Pulumi Cloud organization that enforces the policy pack on the stack (a policy group).",
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
    from validation.adapters.bootstrap import GcloudSetup, PulumiCliStacks, PulumiCloudPolicies, RegistryDigests
    from validation.bootstrap import Target
    from validation.bootstrap import bootstrap as run_steps
    from validation.bootstrap import check as check_prerequisites

    root = work_dir.resolve()
    if check:
        from components.plan import PlanError, run_plan

        try:
            needs = run_plan(stack, root).quotas  # the quotas the stack reaches, as `gpurt plan` reports them
        except PlanError as exc:
            err_console.print(f"[red]error:[/] cannot render stack {stack} to read the quotas it needs: {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        readiness = check_prerequisites(stack, root, GcloudSetup(), PulumiCliStacks(), needs)
        for problem in readiness.missing:
            err_console.print(f"[red]missing:[/] {problem}")
        for short in readiness.short:
            err_console.print(f"[yellow]no capacity:[/] {short}")
        if readiness.missing:
            err_console.print(f"run `gpurt bootstrap --stack {stack}` as a project owner first "
                              "(docs/infrastructure.md, steps 1 to 3)")
            raise typer.Exit(EXIT_FAILED)
        console.print(f"stack {stack}: every prerequisite of a deploy is there"
                      + (" (the pools cannot reach their maxima until the quotas above are raised)"
                         if readiness.short else ""))
        return
    if not github_repository or not pulumi_org:
        raise typer.BadParameter("both --github-repository and --pulumi-org are needed (or --check)")
    target = Target(stack, root, github_repository, pulumi_org)
    with tempfile.TemporaryDirectory(prefix="gpurt-policy-") as scratch:
        report = run_steps(
            target, GcloudSetup(), PulumiCliStacks(org=pulumi_org), PulumiCloudPolicies(), RegistryDigests(),
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
    console.print("\nVariables for the workflows (docs/infrastructure.md, step 4):")
    console.print(f"  gh variable set GCP_WORKLOAD_IDENTITY_PROVIDER --env {stack} --body '{provider}'")
    console.print(f"  gh variable set GCP_DEPLOY_SERVICE_ACCOUNT --env {stack} --body '{deploy}'")
    console.print(f"  gh variable set GCP_WORKLOAD_IDENTITY_PROVIDER_{stack.upper()} --body '{provider}'")
    console.print(f"  gh variable set GCP_PREVIEW_SERVICE_ACCOUNT_{stack.upper()} --body '{preview}'")
