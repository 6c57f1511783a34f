"""``gpurt local up|status|down``: the local platform's lifecycle."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from gpurt.cli.common import JsonOption, UserError, console, friendly_errors, print_json
from runtime.local.broker.brokers import Broker

if TYPE_CHECKING:
    from runtime.access.local_monitoring import MonitoringInfo
    from runtime.local.status import MonitoringStatus, PlatformStatus
    from runtime.protocol.queues import QueueSpec

local_app = typer.Typer(help="Run the whole platform on this machine: emulator, scheduler, Dask.",
                        no_args_is_help=True)


class Stack(StrEnum):
    """Whose request queues ``gpurt local up`` runs."""

    STAGING = "staging"
    PRODUCTION = "production"
    NONE = "none"  # the built-in default and urgent queues only


def stack_queues(stack: Stack, root: Path | None = None) -> tuple[QueueSpec, ...]:
    """The request queues ``Pulumi.<stack>.yaml`` (in ``root``, default the repository's) declares, with the built-in
    ones; read and checked as ``pulumi up`` would (``components.config.parse_stack_config``), only its queues kept."""
    import yaml

    from components.config import PROJECT_NAMESPACE, ConfigError, parse_stack_config
    from components.review.plan import REPO_ROOT
    from runtime.protocol.queues import BUILT_IN_QUEUES

    if stack is Stack.NONE:
        return BUILT_IN_QUEUES
    path = (root or REPO_ROOT) / f"Pulumi.{stack}.yaml"
    try:
        values: dict[str, Any] = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("config") or {}
    except (OSError, yaml.YAMLError, AttributeError) as exc:
        raise UserError(f"--stack {stack}: cannot read {path}: {exc}") from None
    prefix = f"{PROJECT_NAMESPACE}:"
    # Secrets stay encrypted in the file: none of them concerns the queues.
    raw = {key.removeprefix(prefix): value for key, value in values.items()
           if key.startswith(prefix) and not (isinstance(value, dict) and "secure" in value)}
    try:
        config = parse_stack_config(raw, values.get("gcp:project"), values.get("gcp:region"), source=path.name)
    except ConfigError as exc:
        raise UserError(f"--stack {stack}: {exc}") from None
    return config.queue_specs()


@local_app.command("up")
@friendly_errors
def up(
    workers: Annotated[int | None, typer.Option(
        min=1, help="Dask workers of the 'local' pool (default: one per GPU, else 2).")] = None,
    gpus: Annotated[int | None, typer.Option(
        min=0, help="GPUs the local workers share (default: what nvidia-smi lists; 0 forces CPU).")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Scheduler API port (0 = any free port).")] = 8080,
    emulator_port: Annotated[int, typer.Option(min=0, max=65535, help="Pub/Sub emulator port (0 = free).")] = 8085,
    time_scale: Annotated[float, typer.Option(
        "--emulator-time-scale", min=0.001, help="Emulator-only: scale ack deadlines and backoffs (drills).")] = 1.0,
    replicas: Annotated[int, typer.Option(
        min=1, max=4, help="Scheduler replicas; 2+ elect a leader on a shared lease file (ports after --port "
        "are free ones).")] = 1,
    broker: Annotated[Broker, typer.Option(
        help="Pub/Sub emulator: the project's own (builtin: time scaling, backlog metrics) or Google's "
        "(official: needs gcloud's pubsub-emulator component and Java). See docs/emulator.md.")] = Broker.BUILTIN,
    monitoring: Annotated[bool, typer.Option(
        "--monitoring", help="Also run Prometheus (the project's alert rules) and Alertmanager, routing to a "
        "recording receiver (`gpurt alerts list`).")] = False,
    alert_time_scale: Annotated[float, typer.Option(
        "--alert-time-scale", min=0.001, max=1.0, help="With --monitoring: multiply the rules' for: windows and "
        "range vectors (1 = the cloud's timing; 0.02 turns 10 minutes into 12 s).")] = 1.0,
    overflow_after: Annotated[float | None, typer.Option(
        "--overflow-after", min=0.1, help="Seconds a job may wait for a local worker before it runs as a Vertex AI "
        "custom job on the platform's local stand-in of the custom-jobs API (default: no overflow).")] = None,
    stack: Annotated[Stack, typer.Option(
        help="Run the request queues this stack's Pulumi.<stack>.yaml declares (each desk's topic, weight and "
        "cap, and the urgent queue); none: the built-in default and urgent queues only. See docs/scheduler.md, "
        "\"Queues\".")] = Stack.STAGING,
    as_json: JsonOption = False,
) -> None:
    """Start the emulator and the scheduler in the background and wait until they are ready."""
    from runtime.local import LocalConfig, LocalPlatform

    platform = LocalPlatform(config=LocalConfig(workers=workers, gpus=gpus, port=port, emulator_port=emulator_port,
                                                   emulator_time_scale=time_scale, replicas=replicas,
                                                   broker=broker,
                                                   monitoring=monitoring, alert_time_scale=alert_time_scale,
                                                   spill_after_s=overflow_after, queues=stack_queues(stack)))
    with console.status("starting the local platform…") as spinner:
        outcome = platform.up(on_step=lambda step: spinner.update(step + "…"))
    state = outcome.state
    if as_json:
        print_json({"already_running": outcome.already_running, "api_url": state.api_url,
                    "emulator_host": state.emulator_host, "emulator_rest_url": state.emulator_rest_url,
                    "project": state.project,
                    "result_store": state.result_store, "state_dir": str(platform.directory),
                    "monitoring": state.monitoring, "queues": [queue.name for queue in state.queues]})
        return
    console.print("[green]already running[/]" if outcome.already_running else "[green]local platform is up[/]")
    table = Table(show_header=False, box=None)
    table.add_row("scheduler API", state.api_url)
    table.add_row(f"Pub/Sub emulator ({broker})", f"PUBSUB_EMULATOR_HOST={state.emulator_host}")
    if state.emulator_rest_url:
        table.add_row("Pub/Sub REST", f"{state.emulator_rest_url}  (api root for REST clients)")
    table.add_row("project", state.project)
    table.add_row("result store", state.result_store)
    table.add_row("Dask workers", "scheduler default" if state.workers is None else str(state.workers))
    table.add_row("request queues", ", ".join(_queue_label(queue) for queue in state.queues))
    if len(state.schedulers()) > 1:
        table.add_row("replicas", ", ".join(f"{p.name} {p.api_url}" for p in state.schedulers()))
        table.add_row("leader lease", str(state.lease_file))
    if state.monitoring is not None:
        _monitoring_rows(table, state.monitoring)
    table.add_row("logs", str(platform.directory / "logs"))
    table.add_row("control token", f"in {platform.directory / 'state.json'} (mode 0600)")
    console.print(table)
    console.print("next: [bold]gpurt submit --type noop --wait[/]   stop: [bold]gpurt local down[/]")


def _queue_label(queue: QueueSpec) -> str:
    if queue.urgent:
        return f"{queue.name} (first)"
    cap = "" if queue.max_slots is None else f", cap {queue.max_slots}"
    return f"{queue.name} (weight {queue.weight}{cap})"


def _monitoring_rows(table: Table, info: MonitoringInfo | MonitoringStatus) -> None:
    table.add_row("Prometheus UI", f"{info.prometheus_url}/alerts  (targets: {info.prometheus_url}/targets)")
    table.add_row("Alertmanager", info.alertmanager_url)
    scale = info.alert_time_scale
    table.add_row("alert time scale", f"{scale:g}" + ("  (the cloud's timing)" if scale == 1 else
                                                       f"  (a 10 min for: waits {600 * scale:g} s)"))


@local_app.command("status")
@friendly_errors
def status(as_json: JsonOption = False) -> None:
    """Show processes, health, pools and Pub/Sub backlog. Exit code 1 when not running or unhealthy."""
    from runtime.local import LocalPlatform

    report = LocalPlatform().status()
    if as_json:
        print_json(report)
    elif not report.running and not report.processes:
        console.print(f"the local platform is not running (state dir {report.directory})")
    else:
        _print_status(report)
    if not (report.running and report.healthy):
        raise typer.Exit(1)


def _print_status(report: PlatformStatus) -> None:
    procs = Table(title="processes")
    for column in ("name", "pid", "state", "log"):
        procs.add_column(column)
    for proc in report.processes:
        procs.add_row(proc.name, str(proc.pid), "[green]running[/]" if proc.alive else "[red]exited[/]",
                      str(proc.log_path))
    console.print(procs)
    health = "[green]healthy[/]" if report.healthy else "[red]unreachable[/]"
    ready = "[green]ready[/]" if report.ready else "[yellow]not ready[/]"
    console.print(f"scheduler {report.api_url}: {health}, {ready}")
    scheduler = report.scheduler
    if scheduler:
        in_flight = scheduler.get("in_flight", [])
        leader = scheduler.get("leader") or {}
        console.print(f"  mode: {scheduler.get('mode', '?')}, in flight: "
                      f"{len(in_flight) if isinstance(in_flight, list) else in_flight}, "
                      f"waiting for a slot: {scheduler.get('waiting', '?')}, "
                      f"consuming: {scheduler.get('consuming', '?')}, leader: {leader.get('holder', '?')}")
    queues = scheduler.get("queues") if scheduler else None
    if queues:
        _print_queues(queues)
    if report.pools:
        pools = Table(title="pools")
        for column in ("pool", "workers", "desired", "GPUs/worker", "status"):
            pools.add_column(column)
        for pool in report.pools:
            pools.add_row(pool.id, str(pool.workers), str(pool.desired if pool.desired is not None else "-"),
                          str(pool.gpus_per_worker), pool.status or "-")
        console.print(pools)
    if report.subscriptions:
        subs = Table(title="Pub/Sub (emulator)")
        for column in ("subscription", "backlog", "outstanding", "dead-lettered"):
            subs.add_column(column)
        for name, value in sorted(report.subscriptions.items()):
            subs.add_row(name, *(str(value.get(key, "-")) for key in ("undelivered", "outstanding", "dead_lettered")))
        console.print(subs)
    if report.monitoring is not None:
        mon = report.monitoring
        table = Table(title="monitoring", show_header=False)
        _monitoring_rows(table, mon)
        table.add_row("scrape targets up", f"{mon.targets_up}/{mon.targets}")
        table.add_row("alerts firing", ", ".join(mon.firing) or "none")
        if mon.pending:
            table.add_row("alerts pending", ", ".join(mon.pending))
        console.print(table)
    for problem in report.problems:
        console.print(f"[red]problem:[/] {problem}")


def _print_queues(queues: list[dict[str, Any]]) -> None:
    """The scheduler's request queues as ``GET /status`` reports them (docs/scheduler.md, "Queues")."""
    from runtime.protocol.queues import URGENT_QUEUE

    table = Table(title="request queues (this replica; wait and share over the last 5 minutes)")
    # A queue's name in full, however narrow the terminal: the other columns are short numbers.
    table.add_column("queue", no_wrap=True, min_width=max(len(str(queue.get("name"))) for queue in queues))
    for column in ("weight", "cap", "waiting", "slots held", "started", "wait p95 (s)", "share"):
        table.add_column(column)
    for queue in queues:
        wait = queue.get("wait_p95_s")
        weight = "first" if queue.get("name") == URGENT_QUEUE else str(queue.get("weight"))
        table.add_row(str(queue.get("name")), weight,
                      str(queue.get("max_slots") or "-"), str(queue.get("waiting", "-")), str(queue.get("slots", "-")),
                      str(queue.get("started", 0)), "-" if wait is None else f"{wait:g}",
                      f"{100 * float(queue.get('share') or 0):.0f} %")
    console.print(table)


@local_app.command("down")
@friendly_errors
def down(
    drain_timeout: Annotated[float, typer.Option(min=0, help="Seconds to let in-flight jobs finish.")] = 120.0,
) -> None:
    """Drain the scheduler, let in-flight jobs finish, stop every process and remove the state."""
    from runtime.local import LocalPlatform

    with console.status("draining and stopping the local platform…"):
        outcome = LocalPlatform().down(drain_timeout_s=drain_timeout)
    if not outcome.was_running:
        console.print("the local platform was not running")
        return
    if not outcome.drained:
        console.print("[yellow]in-flight jobs did not finish before the drain deadline; "
                      "Pub/Sub will redeliver them next time[/]")
    if outcome.killed:
        console.print(f"[yellow]had to SIGKILL: {', '.join(outcome.killed)}[/]")
    console.print("[green]local platform stopped[/]")


@local_app.command("restart-scheduler")
@friendly_errors
def restart_scheduler(
    drain_timeout: Annotated[float, typer.Option(min=0, help="Seconds each replica may take to finish its jobs.")
                             ] = 120.0,
    as_json: JsonOption = False,
) -> None:
    """Rolling restart of the scheduler replica(s): drain, let in-flight jobs finish, stop, start, wait ready."""
    from runtime.local import LocalPlatform

    with console.status("restarting the scheduler…") as spinner:
        restarted = LocalPlatform().restart_scheduler(on_step=lambda step: spinner.update(step + "…"),
                                                      drain_timeout_s=drain_timeout)
    if as_json:
        print_json([{"name": r.name, "old_pid": r.old_pid, "new_pid": r.new_pid, "drained": r.drained}
                    for r in restarted])
        return
    for r in restarted:
        note = "" if r.drained else " [yellow](not drained: its unfinished jobs are redelivered)[/]"
        console.print(f"[green]{r.name}[/] restarted: pid {r.old_pid} → {r.new_pid}{note}")


@local_app.command("restart-broker")
@friendly_errors
def restart_broker(
    drain_timeout: Annotated[float, typer.Option(
        min=0, help="Seconds the replicas may take to finish their jobs before the broker stops.")] = 120.0,
    accept_loss: Annotated[bool, typer.Option(
        "--accept-loss", help="Restart the official emulator too, which loses every message it holds.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Restart only the Pub/Sub emulator, losing nothing: drain intake, restart the broker, resume intake."""
    from runtime.local import LocalPlatform

    platform = LocalPlatform()
    platform.recorded_state()  # never started: says so, and how to start it (a dead broker is what this mends)
    if not platform.broker_is_durable() and not accept_loss:
        raise UserError("this platform runs the official emulator, which keeps messages in memory only: a restart "
                        "loses every request and result it holds (docs/local-platform.md). Add --accept-loss to "
                        "restart it anyway")
    with console.status("restarting the broker…") as spinner:
        restarted = platform.restart_broker(on_step=lambda step: spinner.update(step + "…"),
                                            drain_timeout_s=drain_timeout)
    if as_json:
        print_json({"old_pid": restarted.old_pid, "new_pid": restarted.new_pid, "durable": restarted.durable})
        return
    kept = ("every message it held is back" if restarted.durable
            else "[yellow]the official emulator lost every message it held[/]")
    console.print(f"[green]broker restarted[/]: pid {restarted.old_pid} → {restarted.new_pid}; {kept}; intake resumed")
