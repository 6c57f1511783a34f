"""``gpurt dlq list|inspect|replay``: work a dead-letter storm (docs/runbooks/dlq-storm.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from gpurt.cli.common import (
    EXIT_FAILED,
    ApiUrlOption,
    JsonOption,
    UserError,
    console,
    friendly_errors,
    print_json,
    pubsub_clients,
)

if TYPE_CHECKING:
    from runtime.access.transport import PubSubClients
    from validation.dlq import DeadLetterQueue

dlq_app = typer.Typer(help="Dead-letter queue: list, inspect, replay (nothing is lost by looking).",
                      no_args_is_help=True)


def _queue(api_url: str | None) -> tuple[DeadLetterQueue, PubSubClients]:
    from validation.dlq import DeadLetterQueue

    clients = pubsub_clients(api_url, operator=True)
    return DeadLetterQueue(clients), clients


@dlq_app.command("list")
@friendly_errors
def list_letters(
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="Show at most this many.")] = 50,
    api_url: ApiUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """List dead-lettered requests without consuming them."""
    queue, clients = _queue(api_url)
    try:
        letters = queue.list(limit)
    finally:
        clients.close()
    if as_json:
        print_json(letters)
        return
    if not letters:
        console.print("the dead-letter queue is empty")
        return
    table = Table(title=f"dead letters ({len(letters)} shown)")
    for column in ("message id", "job", "type", "published", "body"):
        table.add_column(column, overflow="fold")
    for letter in letters:
        published = letter.publish_time.isoformat(timespec="seconds") if letter.publish_time else "-"
        table.add_row(letter.message_id, letter.job_id or "-", letter.type or "-", published, letter.preview())
    console.print(table)


@dlq_app.command("inspect")
@friendly_errors
def inspect(key: Annotated[str, typer.Argument(help="Message id or job id.")], api_url: ApiUrlOption = None) -> None:
    """Show one dead letter in full: attributes and body."""
    queue, clients = _queue(api_url)
    try:
        letter = queue.inspect(key)
    finally:
        clients.close()
    if letter is None:
        raise UserError(f"no dead letter with message id or job id {key!r}")
    print_json(letter)


@dlq_app.command("replay")
@friendly_errors
def replay(
    sample: Annotated[int | None, typer.Option(min=1, help="Replay only this many (a trial after a fix).")] = None,
    replay_all: Annotated[bool, typer.Option("--all", help="Replay every dead letter.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    api_url: ApiUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Republish dead letters to gpu-job-request (attribute replayed_from); ack each only after its publish."""
    if (sample is None) == (not replay_all):
        raise UserError("choose --sample N or --all")
    what = "ALL dead letters" if replay_all else f"{sample} dead letter(s)"
    if not yes:
        typer.confirm(f"Republish {what} to the request topic?", abort=True)
    queue, clients = _queue(api_url)
    try:
        with console.status(f"replaying {what}…"):
            report = queue.replay(sample)
            from validation.dlq.tools import MAX_SCAN

            remaining = len(queue.list(MAX_SCAN))
    finally:
        clients.close()
    if as_json:
        print_json({"replayed": report.replayed, "failed": report.failed, "remaining": remaining})
    else:
        console.print(f"replayed {len(report.replayed)}, failed {len(report.failed)}, "
                      f"still on the DLQ {remaining}")
        for message_id, error in report.failed.items():
            console.print(f"[red]{message_id}[/]: {error} (kept on the DLQ)")
    if report.failed:
        raise typer.Exit(EXIT_FAILED)
