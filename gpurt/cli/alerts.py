"""``gpurt alerts list``: what fires in the local platform's Prometheus, and what on-call was notified of."""

from __future__ import annotations

from typing import Annotated, Final

import typer
from rich.table import Table

from gpurt.cli.common import EXIT_FAILED, JsonOption, LocalDirOption, console, err_console, friendly_errors, print_json

alerts_app = typer.Typer(help="Alerts of the local platform's Prometheus and the notifications they sent.",
                         no_args_is_help=True)
SHOWN_NOTIFICATIONS: Final = 20  # the newest ones; --json carries all


@alerts_app.command("list")
@friendly_errors
def list_alerts(
    local_dir: LocalDirOption = None,
    prometheus_url: Annotated[str | None, typer.Option(
        "--prometheus-url", help="Read this Prometheus instead of the local platform's (no notifications then).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Alerts pending or firing in Prometheus, and the notifications the alert receiver recorded."""
    from runtime.access.prometheus_api import PrometheusError
    from runtime.local.platform import LocalPlatform
    from runtime.local.prometheus.overview import collect_overview

    notifications_file = None
    if prometheus_url is None:
        state = LocalPlatform(local_dir).running_state()
        if state.monitoring is None:
            err_console.print("[red]error:[/] the local platform runs without monitoring; start it with "
                              "`gpurt local up --monitoring`")
            raise typer.Exit(EXIT_FAILED)
        prometheus_url, notifications_file = state.monitoring.prometheus_url, state.monitoring.notifications_file
    try:
        overview = collect_overview(prometheus_url, notifications_file)
    except PrometheusError as exc:
        err_console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        print_json(overview)
        return
    alerts = Table(title=f"alerts in Prometheus ({overview.prometheus_url}/alerts)")
    for column in ("alert", "state", "severity", "since", "summary", "runbook"):
        alerts.add_column(column)
    for alert in overview.alerts:
        state = "[red]firing[/]" if alert.state == "firing" else "[yellow]pending[/]"
        since = alert.active_at.strftime("%H:%M:%S") if alert.active_at else "-"
        alerts.add_row(alert.name, state, alert.labels.get("severity", "-"), since,
                       alert.annotations.get("summary", ""), alert.annotations.get("runbook_url", ""))
    console.print(alerts if overview.alerts else "no alert is pending or firing")
    if notifications_file is None:
        return
    received = Table(title=f"notifications received (newest {SHOWN_NOTIFICATIONS})")
    for column in ("received", "receiver", "status", "alerts"):
        received.add_column(column)
    for note in overview.notifications[-SHOWN_NOTIFICATIONS:]:
        received.add_row(note.received_at.strftime("%H:%M:%S"), note.payload.receiver, note.payload.status,
                         ", ".join(f"{a.name} ({a.status})" for a in note.payload.alerts))
    console.print(received if overview.notifications else "no notification received yet")
    for line in overview.unreadable_notifications:
        err_console.print(f"[yellow]unreadable notification record:[/] {line[:200]}")
