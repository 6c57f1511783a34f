"""``gpurt leader status|release`` and ``gpurt drill …``: the operator drills and the stuck-lock recovery."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from validation.cli_common import YesOption, console, handled

if TYPE_CHECKING:
    from runtime.scheduler.leader import KubernetesLeaseStore

leader_app = typer.Typer(help="Leader election: who leads, and forced release of a stuck lease.",
                         no_args_is_help=True)
KubeContextOption = Annotated[str | None, typer.Option("--kube-context", help="kubeconfig context.")]
ApiUrlOption = Annotated[str | None, typer.Option("--api-url", help="Scheduler API URL (default: "
                         "$GPURT_API_URL or the local platform).")]


def _lease_store(kube_context: str | None) -> KubernetesLeaseStore:
    from kubernetes import client

    from components import contract
    from runtime.scheduler.leader import KubernetesLeaseStore
    from validation.clients.kube import api_client

    return KubernetesLeaseStore(client.CoordinationV1Api(api_client(kube_context)), contract.RUNTIME_NAMESPACE)


@leader_app.command("status")
@handled
def status(
    kubernetes: Annotated[bool, typer.Option("--kubernetes", help="Read the Lease object itself.")] = False,
    kube_context: KubeContextOption = None,
    api_url: ApiUrlOption = None,
) -> None:
    """Who holds the leader lease: from the scheduler API, or (--kubernetes) the Lease object."""
    if not kubernetes:
        from runtime.cli.common import api_client as scheduler_api

        with scheduler_api(api_url) as api:
            console.print_json(data=api.leader())
        return
    from validation.leader import view

    lease = view(_lease_store(kube_context).get())
    if lease is None:
        console.print("no leader lease exists yet")
        return
    now = datetime.now(UTC)
    state = "[red]expired[/]" if lease.expired(now) else "[green]live[/]"
    console.print(f"holder: {lease.holder or '-'}  renewed: {lease.renewed_at}  expires: {lease.expires_at} "
                  f"({state})  transitions: {lease.transitions}")


@leader_app.command("release")
@handled
def release(
    force: Annotated[bool, typer.Option("--force", help="Required: this takes leadership away.")] = False,
    holder: Annotated[str | None, typer.Option("--holder", help="Only release if this replica holds it.")] = None,
    yes: YesOption = False,
    kube_context: KubeContextOption = None,
) -> None:
    """Release a stuck leader lease so a standby replica takes over (confirm the holder is dead first)."""
    from validation.leader import force_release, view

    if not force:
        raise typer.BadParameter("refusing without --force: first confirm the holder has fully stopped "
                                 "(docs/runbooks/leader-stuck-lock.md)", param_hint="--force")
    store = _lease_store(kube_context)
    lease = view(store.get())
    if lease is not None and not lease.expired(datetime.now(UTC)):
        console.print(f"[yellow]warning[/]: the lease of {lease.holder} is still being renewed "
                      f"(expires {lease.expires_at}); releasing a live leader causes a brief double leadership")
    if not yes:
        typer.confirm("Release the leader lease?", abort=True)
    released = force_release(store, expected_holder=holder or (lease.holder if lease else None))
    console.print(f"lease released (version {released.version}); a standby takes it within its retry period")
