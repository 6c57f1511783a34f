"""``gpurt run``: one job file run in this process, its result printed as the protocol's JobResult.

Numba and the kernels are imported inside the command so ``gpurt --help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from gpurt.common import UserError, err_console, friendly_errors

DEVICE_HELP = "auto (a GPU if one exists), cpu or gpu"



def _load_request(path: Path) -> Any:
    """The job in ``path`` as a protocol ``JobRequest``; ``job_id`` may be left out of the file."""
    from protocol.messages import InvalidRequest, parse_request

    try:
        raw = json.loads(path.read_text())
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is not valid JSON: {exc}") from None
    if isinstance(raw, dict):
        raw.setdefault("job_id", path.stem.replace(" ", "-") or "local-run")
    try:
        return parse_request(json.dumps(raw).encode())
    except InvalidRequest as exc:
        raise UserError(f"invalid job in {path}: {exc}") from None


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
    from protocol.messages import ErrorKind, JobError, JobMetrics, JobResult, JobStatus

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
            result = JobResult(job_id=request.job_id, type=request.type, status=JobStatus.FAILED,
                               error=JobError(kind=kind, message=str(exc)))
            typer.echo(result.model_dump_json(indent=2))
            raise typer.Exit(1) from None
    stored = {}
    if out.artifacts:
        folder = artifacts / request.job_id
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in out.artifacts.items():
            (folder / name).write_bytes(data)
            stored[name] = str(folder / name)
    result = JobResult(
        job_id=request.job_id, type=request.type, status=JobStatus.SUCCEEDED, result=out.summary,
        metrics=JobMetrics(run_s=out.elapsed_s, device=out.device,
                           paths_per_s=out.paths_per_s),
        artifacts=stored,
    )
    typer.echo(result.model_dump_json(indent=2))
