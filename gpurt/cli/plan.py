"""Commands this package adds to ``gpurt``: the offline infrastructure plan and the policy pack bundle."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import typer

if TYPE_CHECKING:  # heavy imports stay inside the command so `gpurt --help` stays fast
    from rich.console import Console

    from components.rendered import Resource
    from components.review.cost import CostEstimate
    from components.review.plan import Plan


policy_app = typer.Typer(help="The policy pack: bundle it for pulumi preview/up --policy-pack or publishing.",
                         no_args_is_help=True)



@policy_app.command("check")
def check(
    plans: list[Path] = typer.Argument(..., help="Plans written by gpurt plan --json (by any checkout).",
                                       exists=True, dir_okay=False),
) -> None:
    """Judge plans with this checkout's policy rules and IAM proof; exit 1 on a violation.

    CI runs the base branch's gpurt on a pull request's plans, so the rules a pull request is judged by are
    the base branch's, whatever the pull request changes. Prints one Markdown section per plan.
    """
    from components.review.plan import PlanError, judge_plan_json

    failed = False
    for path in plans:
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
            verdicts = judge_plan_json(plan)
        except (ValueError, PlanError) as exc:
            typer.echo(f"error: {path}: {exc}", err=True)
            raise typer.Exit(2) from None
        violations = [(v.rule, v.resource, v.message) for verdict in verdicts for v in verdict.violations]
        failed = failed or bool(violations)
        typer.echo(f"### Policy, stack {plan.get('stack', path.stem)}: "
                   f"{'FAIL' if violations else 'pass'} ({len(verdicts)} rules)")
        for rule, resource, message in violations:
            typer.echo(f"- `{rule}` on `{resource}`: {message}")
        typer.echo()
    if failed:
        raise typer.Exit(1)


@policy_app.command("bundle")
def bundle(
    out: Path = typer.Option(..., "--out", "-o", help="Directory to write the pack to (replaced if a bundle).",
                             file_okay=False),
    virtualenv: str = typer.Option(
        "venv", "--virtualenv", help="The pack's Python environment: a path to one with pulumi-policy (e.g. "
        "this checkout's .venv) to run it at once; the default is created by Pulumi from requirements.txt."),
) -> None:
    """Write this checkout's self-contained policy pack (for --policy-pack OUT and pulumi policy publish OUT)."""
    from components.policy.bundle import BundleError, write_bundle

    try:
        path = write_bundle(out, virtualenv=virtualenv)
    except BundleError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(str(path))


def plan(
    # Any stack of the project directory, not a fixed list: --project-dir may hold other stacks than this checkout.
    stack: str = typer.Option(..., "--stack", "-s", help="Stack whose Pulumi.<stack>.yaml (in the project "
                              "directory) is used; this checkout's are staging and production."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole plan as JSON (for machines)."),
    project_dir: Path | None = typer.Option(
        None, "--project-dir", help="Directory holding Pulumi.yaml and __main__.py (default: this checkout).",
        exists=True, file_okay=False,
    ),
    diff: str | None = typer.Option(
        None, "--diff", metavar="REF", help="Compare with the plan of git revision REF (a branch, tag or commit) "
        "and print what changes as Markdown (--json: as JSON): resources, policy verdicts, cost.",
    ),
) -> None:
    """Run the Pulumi program offline under mocks: list every resource, check the policy rules, estimate cost.

    Needs no cloud credentials and no Pulumi CLI. Exits 1 when a policy rule is violated.
    """
    from rich.console import Console

    from components.review.plan import PlanError, run_plan

    console = Console(stderr=as_json or diff is not None)
    try:
        with console.status(f"Running the Pulumi program for stack {stack} under mocks..."):
            result = run_plan(stack, project_dir)
    except PlanError as exc:
        console.print(f"[red]plan failed:[/red] {exc}")
        raise typer.Exit(2) from None
    if diff is not None:
        _print_diff(console, result, diff, project_dir, as_json)
    elif as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, sort_keys=True, default=str))
    else:
        _print_plan(console, result)
    if not result.ok:
        raise typer.Exit(1)


def _print_diff(console: Console, result: Plan, ref: str, project_dir: Path | None, as_json: bool) -> None:
    """Plan ``ref`` too, and print the difference to stdout (Markdown, or JSON)."""
    from components.review.plan import REPO_ROOT
    from components.review.plan_diff import diff_plans, to_markdown
    from components.review.plan_ref import RefPlanError, plan_at_ref

    try:
        with console.status(f"Running the Pulumi program of {ref} for stack {result.stack} under mocks..."):
            base = plan_at_ref(result.stack, ref, project_dir or REPO_ROOT)
    except RefPlanError as exc:
        console.print(f"[red]plan of {ref} failed:[/red] {exc}")
        raise typer.Exit(2) from None
    difference = diff_plans(base, result.to_json(), ref)
    if as_json:
        typer.echo(json.dumps(difference.to_json(), indent=2, sort_keys=True))
    else:
        typer.echo(to_markdown(difference), nl=False)


def _print_plan(console: Console, result: Plan) -> None:
    from rich.markup import escape
    from rich.table import Table

    components = {r.urn: r.name for r in result.resources if not r.custom}
    table = Table(title=f"gpu-runtime / {result.stack}: {len(result.resources)} resources", show_lines=False)
    for column in ("component", "type", "name", "key settings"):
        table.add_column(column, overflow="fold")
    ordered = sorted(result.resources, key=lambda r: (components.get(r.parent or "", ""), r.type, r.name))
    for resource in ordered:
        if resource.custom:
            protected = " protect=true" if resource.protect else ""
            table.add_row(components.get(resource.parent or "", "-"), resource.type, resource.name,
                          key_settings(resource) + protected)
    console.print(table)

    policy = Table(title="policy")
    for column in ("rule", "result", "details"):
        policy.add_column(column, overflow="fold")
    for rule in result.policy:
        details = escape("; ".join(f"{v.resource}: {v.message}" for v in rule.violations))
        policy.add_row(rule.rule, "[green]pass[/green]" if rule.passed else "[red]FAIL[/red]", details)
    console.print(policy)
    if result.placeholders:
        console.print(f"[yellow]offline placeholders used for secrets:[/yellow] {', '.join(result.placeholders)}")
    for name, value in sorted(result.outputs.items()):
        shown = value if isinstance(value, str) else json.dumps(value)
        console.print(f"[bold]{name}[/bold] = {escape(shown)}")
    _print_cost(console, result)
    _print_quotas(console, result, result.project)


def _print_quotas(console: Console, result: Plan, project: str) -> None:
    if not result.quotas:
        return
    from rich.table import Table

    table = Table(title="Quotas the stack reaches at its maxima (a new project's GPU quotas, often GPUS_ALL_REGIONS "
                  "too, are 0: request each below its need before the first deploy, e.g. with the command shown)")
    for column in ("service", "quota", "scope", "need", "at least", "pools"):
        table.add_column(column, overflow="fold")
    for need in result.quotas:
        table.add_row(need.service, need.metric, need.scope, f"{need.amount} {need.unit}", str(need.minimum),
                      ", ".join(need.pools))
    console.print(table)
    console.print("Request a quota below its need with (or in the console, IAM & Admin > Quotas):")
    for need in result.quotas:
        console.print(f"  {need.request_command(project)}", soft_wrap=True)


def _usd(low: float, high: float) -> str:
    return f"${low:,.0f}" if round(low) == round(high) else f"${low:,.0f} - ${high:,.0f}"


def _print_cost(console: Console, result: Plan) -> None:
    from rich.table import Table

    from components.review.cost import EXCLUDED

    cost = result.cost
    if cost is None:
        console.print(f"[yellow]no cost estimate:[/yellow] {result.cost_note}")
        return
    low, high = cost.spot_discount
    table = Table(title="estimated monthly cost (USD): minimum nodes always on .. every pool at its maximum")
    for column in ("pool", "machine", "GPUs", "nodes", "on-demand", "spot", "billed as"):
        table.add_column(column, overflow="fold", justify="right" if column in ("on-demand", "spot") else "left")
    for pool in cost.pools:
        if pool.missing:
            table.add_row(pool.pool, pool.machine_type, pool.gpus, "", "[red]unpriced[/red]", "", pool.missing)
            continue
        table.add_row(pool.pool, pool.machine_type, pool.gpus or "-", f"{pool.nodes[0]} - {pool.nodes[1]}",
                      _usd(pool.on_demand.low, pool.on_demand.high), _usd(pool.spot_range.low, pool.spot_range.high),
                      "spot" if pool.spot else "on-demand")
    table.add_row("cluster fee", "", "", "", _usd(cost.cluster_fee, cost.cluster_fee), "", "")
    total, on_demand = cost.total, cost.total_on_demand
    table.add_row("[bold]total[/bold]", "", "", "", _usd(on_demand.low, on_demand.high), "",
                  f"[bold]{_usd(total.low, total.high)}[/bold]")
    console.print(table)
    console.print(
        f"{cost.region} list prices recorded {cost.recorded} ({', '.join(cost.sources)}). Spot is modelled as the "
        f"documented {low:.0%}-{high:.0%} discount on machines and GPUs (disks are not discounted), since spot "
        f"prices change daily. Not included: {EXCLUDED}."
    )
    for why in cost.incomplete:
        console.print(f"[yellow]not in the totals:[/yellow] {why}")
    _print_vertex_cost(console, cost)


def _print_vertex_cost(console: Console, cost: CostEstimate) -> None:
    vertex = cost.vertex
    if vertex is None:
        console.print("Vertex AI overflow: off (no custom jobs, nothing billed there).")
        return
    machine = f"{vertex.machine_type} with {vertex.accelerator_count}x {vertex.accelerator}"
    if vertex.missing:
        console.print(f"[yellow]Vertex AI overflow ({machine}) unpriced:[/yellow] {vertex.missing}")
        return
    basis = (f"estimate: {', '.join(vertex.estimated)} priced as Compute Engine x Vertex AI's markup"
             if vertex.estimated else "Vertex AI list price")
    console.print(f"Vertex AI overflow: ${vertex.hourly:,.2f} per job-hour on {machine} ({basis}); paid only "
                  "while a spilled job runs, so not in the monthly totals (docs/scheduler.md#overflow-to-vertex-ai).")


# The settings worth a reviewer's eye, per resource type (engine property paths, dotted).
KEY_SETTINGS: Final[dict[str, tuple[str, ...]]] = {
    "gcp:pubsub/topic:Topic": ("name",),
    "gcp:pubsub/subscription:Subscription": (
        "topic", "ackDeadlineSeconds", "messageRetentionDuration", "deadLetterPolicy.maxDeliveryAttempts",
        "retryPolicy.minimumBackoff", "retryPolicy.maximumBackoff",
    ),
    "gcp:pubsub/topicIAMMember:TopicIAMMember": ("topic", "role", "member"),
    "gcp:pubsub/subscriptionIAMMember:SubscriptionIAMMember": ("subscription", "role", "member"),
    "gcp:serviceaccount/account:Account": ("accountId",),
    "gcp:projects/iAMMember:IAMMember": ("role", "member"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "role", "member"),
    "gcp:serviceaccount/iAMMember:IAMMember": ("role", "member"),
    "gcp:projects/service:Service": ("service",),
    "gcp:artifactregistry/repository:Repository": ("repositoryId", "format", "location"),
    "gcp:storage/bucket:Bucket": ("name", "uniformBucketLevelAccess", "publicAccessPrevention", "versioning.enabled"),
    "gcp:compute/subnetwork:Subnetwork": ("ipCidrRange", "privateIpGoogleAccess"),
    "gcp:compute/routerNat:RouterNat": ("natIpAllocateOption",),
    "gcp:container/cluster:Cluster": (
        "name", "location", "privateClusterConfig.enablePrivateNodes", "workloadIdentityConfig.workloadPool",
        "enableShieldedNodes", "releaseChannel.channel", "deletionProtection",
    ),
    "gcp:container/nodePool:NodePool": (
        "name", "nodeConfig.machineType", "nodeConfig.guestAccelerators", "nodeConfig.spot",
        "autoscaling.minNodeCount", "autoscaling.maxNodeCount", "nodeConfig.taints",
    ),
}


def _brief_item(item: Mapping[str, Any]) -> str:
    if {"key", "effect"} <= item.keys():  # a taint
        return f"{item['key']}={item.get('value', '')}:{item['effect']}"
    if {"type", "count"} <= item.keys():  # a guest accelerator
        return f"{item['count']}x {item['type']}"
    return ",".join(f"{k}={v}" for k, v in sorted(item.items()) if not isinstance(v, Mapping | list))


def _brief(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        return "[" + ", ".join(_brief_item(item) for item in value) + "]"
    return json.dumps(value) if isinstance(value, list | dict | bool) else str(value)


def key_settings(resource: Resource) -> str:
    """A one-line summary of a resource's most telling inputs (secrets stay masked)."""
    from components.rendered import lookup

    paths = KEY_SETTINGS.get(resource.type)
    if paths is None:
        # Kubernetes objects and anything unlisted: namespace/name and a few top-level scalars.
        meta = resource.shown.get("metadata") if isinstance(resource.shown.get("metadata"), Mapping) else None
        if meta:
            return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")
        paths = tuple(k for k, v in resource.shown.items() if not isinstance(v, Mapping | list))[:4]
    parts = []
    for path in paths:
        value = lookup(resource.shown, *path.split("."))
        if value is not None and value != []:
            parts.append(f"{path.rsplit('.', 1)[-1]}={_brief(value)}")
    return " ".join(parts)
