"""``gpurt pools …`` and ``gpurt maintenance …``: the on-call controls of docs/runbooks/."""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.table import Table

from gpurt.cli.common import (
    EXIT_TIMEOUT,
    ApiUrlOption,
    JsonOption,
    api_client,
    console,
    err_console,
    friendly_errors,
    print_answer,
    print_json,
)

pools_app = typer.Typer(help="Worker pools: list, scale, evict.", no_args_is_help=True)
maintenance_app = typer.Typer(help="Maintenance mode: drain intake, resume it.", no_args_is_help=True)
DRAIN_POLL_S = 1.0  # how often `drain --wait` looks at the in-flight count

YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


@pools_app.command("list")
@friendly_errors
def list_pools(api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """List pools with their current and desired worker counts."""
    with api_client(api_url) as api:
        pools = api.pools()
    if as_json:
        print_json(pools)
        return
    table = Table(title="pools")
    for column in ("pool", "workers", "desired", "GPUs/worker", "status"):
        table.add_column(column)
    for pool in pools:
        table.add_row(pool.id, str(pool.workers), "-" if pool.desired is None else str(pool.desired),
                      str(pool.gpus_per_worker), pool.status or "-")
    console.print(table)


@pools_app.command("scale")
@friendly_errors
def scale(pool_id: str, workers: Annotated[int, typer.Argument(min=0, help="Desired workers.")],
          api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Set a pool's desired worker count."""
    with api_client(api_url) as api:
        answer = api.scale_pool(pool_id, workers)
    print_answer(answer, as_json, f"pool {pool_id} scaled to {workers} worker(s)")


@pools_app.command("stop")
@friendly_errors
def stop(pool_id: str, yes: YesOption = False, api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Evict a pool: its workers are retired, their jobs are retried elsewhere."""
    if not yes:
        typer.confirm(f"Evict every worker of pool {pool_id}?", abort=True)
    with api_client(api_url) as api:
        answer = api.stop_pool(pool_id)
    print_answer(answer, as_json, f"pool {pool_id} stopped")


@pools_app.command("stop-all")
@friendly_errors
def stop_all(yes: YesOption = False, api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Stop every pool (last step of a drain before an upgrade)."""
    if not yes:
        typer.confirm("Stop ALL worker pools?", abort=True)
    with api_client(api_url) as api:
        answer = api.stop_all_pools()
    print_answer(answer, as_json, "all pools stopped")


@maintenance_app.command("drain")
@friendly_errors
def drain(
    wait: Annotated[bool, typer.Option("--wait", help="Wait until no job is in flight.")] = False,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds --wait waits.")] = 600.0,
    api_url: ApiUrlOption = None,
) -> None:
    """Stop taking new jobs on every replica (nothing is nacked); in-flight jobs finish. The mode holds across
    restarts until `gpurt maintenance normal`."""
    with api_client(api_url) as api:
        api.set_maintenance("drain")
        console.print("intake stopped (drain) on every replica")
        if not wait:
            return
        deadline = time.monotonic() + timeout
        with console.status("waiting for in-flight jobs…") as spinner:
            while waiting := not_drained(api.status()):
                if time.monotonic() >= deadline:
                    err_console.print(f"[yellow]not drained after {timeout:.0f} s: {waiting}[/]")
                    raise typer.Exit(EXIT_TIMEOUT)
                spinner.update(f"waiting for {waiting}…")
                time.sleep(DRAIN_POLL_S)
    console.print("[green]drained: every replica in drain mode, no job in flight[/]")


def not_drained(status: dict) -> str:
    """What a drain still waits for, from a ``GET /status`` body (empty once done): every replica's own report
    (``replicas``: the mode it follows and its jobs in flight), or, from a scheduler without them, its own jobs."""
    from runtime.local.platform import in_flight

    replicas = status.get("replicas")
    if not replicas:
        running = in_flight(status)
        return f"{running} in-flight job(s)" if running else ""
    pending = [f"{name} ({report['mode']}, {report['in_flight']} in flight)"
               for name, report in sorted(replicas.items())
               if report.get("mode") != "drain" or report.get("in_flight")]
    return ", ".join(pending)


@maintenance_app.command("normal")
@friendly_errors
def normal(api_url: ApiUrlOption = None) -> None:
    """Resume intake after a drain."""
    with api_client(api_url) as api:
        api.set_maintenance("normal")
    console.print("intake resumed (normal)")


@maintenance_app.command("status")
@friendly_errors
def maintenance_status(api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Show the maintenance mode, the number of in-flight jobs and whether the result store works."""
    from runtime.local.platform import in_flight

    with api_client(api_url) as api:
        status = api.status()
    mode = maintenance_mode(status)
    store = status.get("result_store_available")  # absent from a scheduler older than store outages
    replicas = status.get("replicas") or {}  # every live replica's own report (absent from older schedulers)
    if as_json:
        print_json({"mode": mode, "in_flight": in_flight(status), "result_store_available": store,
                    "replicas": replicas})
    else:
        line = f"mode: [bold]{mode}[/], in flight: {in_flight(status)}"
        if store is False:
            line += ", [bold red]result store unavailable: intake stopped until it is back[/]"
        console.print(line)
        for name, report in sorted(replicas.items()):
            console.print(f"  replica {name}: {report['mode']}, {report['in_flight']} in flight")


def maintenance_mode(status: dict) -> str:
    """``drain`` or ``normal`` from a ``GET /status`` body."""
    value = status.get("maintenance", status.get("mode", "normal"))
    if isinstance(value, dict):
        value = value.get("mode", "normal")
    if isinstance(value, bool):
        return "drain" if value else "normal"
    return str(value)
