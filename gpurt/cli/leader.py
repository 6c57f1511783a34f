"""``gpurt leader status|release``: who leads, and the recovery of a stuck leader lease."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpurt.cli.common import LocalDirOption, console
from gpurt.cli.stacks import YesOption, handled

if TYPE_CHECKING:
    from runtime.leases.records import LeaseStore

leader_app = typer.Typer(help="Leader election: who leads, and forced release of a stuck lease.",
                         no_args_is_help=True)
KubeContextOption = Annotated[str | None, typer.Option("--kube-context", help="kubeconfig context.")]
ApiUrlOption = Annotated[str | None, typer.Option("--api-url", help="Scheduler API URL (default: "
                         "$GPURT_API_URL or the local platform).")]
LocalLeaseOption = Annotated[bool, typer.Option("--local", help="Use the lease file of the local platform's "
                             "replicas (gpurt local up --replicas 2+).")]


def _lease_store(kube_context: str | None, local: bool = False, local_dir: Path | None = None) -> LeaseStore:
    if local:
        return _local_lease_store(local_dir)
    from kubernetes import client

    from runtime.leases.kubernetes import KubernetesLeaseStore
    from runtime.protocol import contract
    from validation.adapters.kube import api_client

    return KubernetesLeaseStore(client.CoordinationV1Api(api_client(kube_context)), contract.RUNTIME_NAMESPACE)


def _local_lease_store(local_dir: Path | None) -> LeaseStore:
    from runtime.leases.file import FileLeaseStore
    from runtime.local.platform import LocalPlatform
    from validation.leader import LeaderError

    platform = LocalPlatform(local_dir)
    state = platform.state
    if state is None:
        raise LeaderError(f"the local platform is not running (state: {platform.directory})")
    if state.lease_file is None:
        raise LeaderError("the local platform runs one scheduler, which leads without a lease; "
                          "start it with `gpurt local up --replicas 2` to elect on a lease file")
    return FileLeaseStore(state.lease_file)


@leader_app.command("status")
@handled
def status(
    kubernetes: Annotated[bool, typer.Option("--kubernetes", help="Read the Lease object itself.")] = False,
    kube_context: KubeContextOption = None,
    api_url: ApiUrlOption = None,
    local: LocalLeaseOption = False,
    local_dir: LocalDirOption = None,
) -> None:
    """Who holds the leader lease: from the scheduler API, or the lease itself (--kubernetes, --local)."""
    if kubernetes and local:
        raise typer.BadParameter("give at most one of --kubernetes and --local")
    if not (kubernetes or local):
        from gpurt.cli.common import api_client as scheduler_api

        with scheduler_api(api_url) as api:
            console.print_json(data=api.leader())
        return
    from validation.leader import view

    lease = view(_lease_store(kube_context, local, local_dir).get())
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
    local: LocalLeaseOption = False,
    local_dir: LocalDirOption = None,
) -> None:
    """Release a stuck leader lease so a standby replica takes over (confirm the holder is dead first)."""
    from validation.leader import force_release, view

    if not force:
        raise typer.BadParameter("refusing without --force: first confirm the holder has fully stopped "
                                 "(docs/runbooks/leader-stuck-lock.md)", param_hint="--force")
    store = _lease_store(kube_context, local, local_dir)
    lease = view(store.get())
    if lease is not None and not lease.expired(datetime.now(UTC)):
        console.print(f"[yellow]warning[/]: the lease of {lease.holder} is still being renewed "
                      f"(expires {lease.expires_at}); releasing a live leader causes a brief double leadership")
    if not yes:
        typer.confirm("Release the leader lease?", abort=True)
    released = force_release(store, expected_holder=holder or (lease.holder if lease else None))
    console.print(f"lease released (version {released.version}); a standby takes it within its retry period")
