"""``gpurt submit`` and ``gpurt jobs get|list|collect|cancel``: submit risk jobs and follow them, one by one or
by session."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from gpurt.cli.common import (
    EXIT_FAILED,
    EXIT_TIMEOUT,
    ApiUrlOption,
    JsonOption,
    UserError,
    api_client,
    console,
    err_console,
    friendly_errors,
    print_answer,
    print_json,
    python_client,
)
from runtime.protocol.queues import DEFAULT_QUEUE

if TYPE_CHECKING:  # the job models and the API client are imported where used, so `gpurt --help` stays fast
    from gpurt.client import Client, JobFuture
    from runtime.protocol.messages import JobRequest, JobResult

jobs_app = typer.Typer(help="Look up or cancel a job by its id, or list and collect a session's jobs.",
                       no_args_is_help=True)
SessionOption = Annotated[str, typer.Option("--session", "-s", help="The session id the jobs were submitted with "
                                            "(gpurt submit --session, the Python client's session_id).")]
DEFAULT_WAIT_S: Final = 300.0
STATE_POLL_S: Final = 2.0  # how often --wait asks the API where a job stands (for the progress line)


def build_request(job_file: Path | None, job_type: str | None, params: list[str], job_id: str | None,
                  timeout_s: float | None = None, session_id: str | None = None, cache: bool = True) -> JobRequest:
    """A validated request from a JSON file, or from ``--type`` and ``--param k=v`` pairs; ``cache`` False opts
    out of the result cache (a file's own ``"cache": false`` stands either way).

    Files and flags alike go through the scheduler's own parser, as ``gpurt run``'s files do
    (``gpurt.cli.job_files``): the same bad file gives the same error from both commands.
    """
    from gpurt.cli.job_files import parse_job, read_job_file

    if job_file is not None and job_type is not None:
        raise UserError("give a JOB.json file or --type, not both")
    if job_file is None and job_type is None:
        raise UserError("give a JOB.json file or --type (see `gpurt submit --help`)")
    overrides = _parse_params(params)

    def amend(body: dict[str, Any]) -> None:
        if overrides:
            given = body.get("params")
            # Merged into the file's own params; params that are not an object are left for the parser to refuse.
            body["params"] = {**(given or {}), **overrides} if isinstance(given, dict | None) else given
        if job_id or "job_id" not in body:
            body["job_id"] = job_id or f"{body.get('type', 'job')}-{uuid.uuid4().hex[:10]}"
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        if session_id is not None:
            body["session_id"] = session_id
        if not cache:
            body["cache"] = False

    if job_file is not None:
        return parse_job(read_job_file(job_file), job_file, amend=amend)
    return parse_job(json.dumps({"type": job_type, "params": {}}).encode(), amend=amend)


def _parse_params(pairs: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--param takes key=value, got {pair!r}")
        try:
            params[key] = json.loads(raw)  # numbers, booleans, lists (exposures=[1e6,2e6])
        except json.JSONDecodeError:
            params[key] = raw  # a bare word such as kind=put
    return params


@friendly_errors
def submit(
    job_file: Annotated[Path | None, typer.Argument(help="A job request as JSON (see examples/).")] = None,
    job_type: Annotated[str | None, typer.Option("--type", "-t", help="Job type, instead of a file.")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="Parameter key=value (repeat).")] = None,
    job_id: Annotated[str | None, typer.Option("--job-id", help="Idempotency key (default: generated).")] = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Session id, to list and collect the "
                                                "session's jobs later (gpurt jobs list --session).")] = None,
    queue: Annotated[str, typer.Option("--queue", "-q", help="The request queue to publish to: your desk's (stack "
                                       "config queues), or urgent (docs/python-api.md, \"Queues\").")] = DEFAULT_QUEUE,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the result, with progress.")] = False,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds --wait waits for the result.")] = DEFAULT_WAIT_S,
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="--no-cache runs the job even when the platform "
                                        "has the same computation's result cached (docs/scheduler.md, \"Result "
                                        "cache\").")] = True,
    api_url: ApiUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Publish a job to its queue (gpu-job-request by default), through the Python API's Client. With --wait,
    exit 1 unless the job succeeds, 3 on timeout."""
    from gpurt.cli.render import result_detail
    from runtime.protocol.messages import JobStatus

    request = build_request(job_file, job_type, param or [], job_id, session_id=session, cache=cache)
    with python_client(api_url, queue) as client:
        future = client.submit(request)
        if not wait:
            if as_json:
                print_json({"job_id": request.job_id, "message_id": future.message_id})
            else:
                console.print(f"published [bold]{request.job_id}[/] (message {future.message_id})")
            return
        result = _wait_for(client, future, timeout)
    if result is None:
        err_console.print(f"[yellow]no result for {request.job_id} after {timeout:.0f} s; "
                          f"it may still finish: gpurt jobs get {request.job_id}[/]")
        raise typer.Exit(EXIT_TIMEOUT)
    if as_json:
        print_json(result)
    else:
        console.print(result_detail(result))
    if result.status is not JobStatus.SUCCEEDED:
        raise typer.Exit(EXIT_FAILED)


def _wait_for(client: Client, future: JobFuture, timeout_s: float) -> JobResult | None:
    """The result ``future`` gets (the one answering the very body published), or None after ``timeout_s``;
    a spinner says where the platform says the job stands."""
    from gpurt.client import ClientError, wait
    from runtime.access.transport import WAIT_TICK_S

    started = time.monotonic()
    last_poll = 0.0
    state = "queued"
    with console.status(f"waiting for {future.job_id}…") as spinner:
        while not future.done() and (remaining := started + timeout_s - time.monotonic()) > 0:
            wait([future], timeout=min(WAIT_TICK_S, remaining))
            now = time.monotonic()
            if now - last_poll >= STATE_POLL_S:
                last_poll = now
                # Best effort: the progress line may miss a beat; the result itself comes by Pub/Sub.
                with contextlib.suppress(ClientError):
                    state = client.state(future.job_id) or state
            spinner.update(f"waiting for {future.job_id}: {state}, {now - started:.0f} s")
    return future.outcome().raw if future.done() else None


@jobs_app.command("get")
@friendly_errors
def get(job_id: str, api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Show a job's state and, once finished, its result."""
    from gpurt.cli.render import result_detail

    with api_client(api_url) as api:
        job = api.get_job(job_id)
    if as_json:
        print_json(job)
    elif job.result is not None:
        console.print(result_detail(job.result))
    else:
        suffix = f", attempt {job.attempt}" if job.attempt else ""
        cancel = " (cancel requested)" if job.cancel_requested else ""
        console.print(f"job {job_id}: {job.state or 'unknown'}{suffix}{cancel}")


@jobs_app.command("list")
@friendly_errors
def list_session(session: SessionOption, api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """List every job started for a session: running, finished (with its outcome) or unfinished."""
    from gpurt.cli.render import session_table

    with api_client(api_url) as api:
        jobs = api.session_jobs(session)
    if as_json:
        print_json(jobs)
        return
    if not jobs:
        console.print(f"no jobs for session {session}")
        return
    console.print(session_table(session, jobs))


@jobs_app.command("collect")
@friendly_errors
def collect(
    session: SessionOption,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the results there (JSON), not to stdout.",
                                             dir_okay=False)] = None,
    api_url: ApiUrlOption = None,
) -> None:
    """The results of a session's finished jobs, as one JSON list; exit 3 while some have none yet."""
    with api_client(api_url) as api:
        jobs = api.session_jobs(session)
    results = [job.result for job in jobs if job.result is not None]
    if out is None:
        print_json(results)
    else:
        try:
            out.write_text(json.dumps([r.model_dump(mode="json") for r in results], indent=2) + "\n",
                           encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc.strerror}") from None
        err_console.print(f"{len(results)} results of session {session} written to {out}")
    pending = [job.job_id for job in jobs if job.result is None]
    if pending:
        err_console.print(f"[yellow]{len(pending)} of {len(jobs)} jobs have no result yet: "
                          f"{', '.join(pending[:5])}{' …' if len(pending) > 5 else ''}[/]")
        raise typer.Exit(EXIT_TIMEOUT)


@jobs_app.command("cancel")
@friendly_errors
def cancel(job_id: str, api_url: ApiUrlOption = None, as_json: JsonOption = False) -> None:
    """Ask a running job to stop; its result becomes `cancelled`."""
    with api_client(api_url) as api:
        answer = api.cancel_job(job_id)
    print_answer(answer, as_json, f"cancellation requested for {job_id}")
