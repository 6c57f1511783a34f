"""``gpurt run``: one job file run in this process, its result printed as the protocol's JobResult.

Numba and the kernels are imported inside the command so ``gpurt --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpurt.cli.common import UserError, err_console, friendly_errors

if TYPE_CHECKING:
    from runtime.protocol.messages import JobRequest

DEVICE_HELP = "auto (a GPU if one exists), cpu or gpu"


def _load_request(path: Path) -> JobRequest:
    """The job in ``path`` as a protocol ``JobRequest``; ``job_id`` may be left out of the file (the file's name)."""
    from gpurt.cli.job_files import parse_job, read_job_file

    return parse_job(read_job_file(path), path, defaults={"job_id": path.stem.replace(" ", "-") or "local-run"})


@friendly_errors
def run_command(
    job: Path = typer.Argument(..., help="Job JSON: {\"type\": ..., \"params\": {...}} (job_id optional)."),
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    artifacts: Path = typer.Option(Path(".gpurt/runs"), "--artifacts", help="Folder for the job's artifacts."),
) -> None:
    """Run one job in this process and print its result JSON (the protocol's JobResult)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kernels.device import CHOICES
    from kernels.errors import JobFailure, TransientJobError
    from kernels.jobs import run_job
    from runtime.protocol.messages import ErrorKind, JobStatus
    from runtime.scheduler.outcome import ended_result, succeeded_result

    if device not in CHOICES:
        raise UserError(f"--device must be one of {', '.join(CHOICES)}")
    request = _load_request(job)
    columns = (TextColumn(f"{request.type.value}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("run", total=1.0)
        try:
            out = run_job(request.type, request.params, device=device,
                          progress=lambda done: progress.update(task, completed=done))
        except JobFailure as exc:
            kind = ErrorKind.TRANSIENT if isinstance(exc, TransientJobError) else ErrorKind.PERMANENT
            err_console.print(f"[red]error:[/] the job failed ({kind.value}): {exc}", highlight=False, soft_wrap=True)
            typer.echo(ended_result(request, JobStatus.FAILED, kind, str(exc)).model_dump_json(indent=2))
            raise typer.Exit(1) from None
    stored = {}
    if out.artifacts:
        folder = artifacts / request.job_id
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in out.artifacts.items():
            (folder / name).write_bytes(data)
            stored[name] = str(folder / name)
    typer.echo(succeeded_result(request, out, stored).model_dump_json(indent=2))
