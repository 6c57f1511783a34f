"""``python -m runtime.worker.vertex_task``: the entry point of a Vertex AI custom job.

It reads the job's params from ``--params-url`` (``params.json``, which the scheduler writes under the output
folder), runs the job with ``kernels.jobs.run_job`` and writes what the scheduler reads back under the
output URL: ``output.json`` (a ``VertexOutput``) and each artifact on success, ``error.json`` (a
``VertexFailure``) on failure. Those models, the file names and ``task_args`` are the whole wire form between
the custom job and ``runtime.scheduler.backends.vertex``: written on one side, read on the other, declared once.

The params travel by reference, never as an argument: Linux caps one argument at 128 KiB (``MAX_ARG_STRLEN``),
which a valid 256-asset ``portfolio_var`` exceeds, and a process's arguments are readable by anyone on the
machine (``ps``).
"""

from __future__ import annotations

import argparse
import json
import sys
from enum import StrEnum
from typing import Any, Final

import fsspec
from pydantic import BaseModel, ConfigDict, Field

from kernels.errors import PermanentJobError, TransientJobError

# The custom job's container command: the worker image's entry point (this module).
ENTRY_POINT: Final = ("python", "-m", "runtime.worker.vertex_task")
PARAMS_FILE: Final = "params.json"
OUTPUT_FILE: Final = "output.json"
ERROR_FILE: Final = "error.json"
ARTIFACTS_FOLDER: Final = "artifacts"
EXIT_TRANSIENT: Final = 75  # EX_TEMPFAIL: worth another delivery


class FailureKind(StrEnum):
    PERMANENT = "permanent"  # the job cannot succeed as asked: no retry
    TRANSIENT = "transient"  # worth another delivery


class VertexOutput(BaseModel):
    """``output.json``: a finished job's figures, and the names of the artifacts written beside it."""

    model_config = ConfigDict(extra="forbid")

    summary: dict[str, Any]
    device: str
    elapsed_s: float = Field(ge=0)
    kernel_s: float = Field(ge=0)
    load_s: float = Field(ge=0)
    paths: int = Field(ge=0)
    artifacts: list[str] = Field(default_factory=list)


class VertexFailure(BaseModel):
    """``error.json``: why the job failed, and whether another delivery may succeed."""

    model_config = ConfigDict(extra="forbid")

    kind: FailureKind
    message: str

    @classmethod
    def of(cls, exc: Exception) -> VertexFailure:
        """The failure a job's exception stands for: refused params and permanent errors are permanent."""
        permanent = isinstance(exc, PermanentJobError | ValueError)
        return cls(kind=FailureKind.PERMANENT if permanent else FailureKind.TRANSIENT, message=str(exc))

    def error(self) -> PermanentJobError | TransientJobError:
        """The exception the scheduler raises for it, so the job ends as it would have on a Dask worker."""
        return (PermanentJobError if self.kind is FailureKind.PERMANENT else TransientJobError)(self.message)


def task_args(job_type: str, output: str) -> list[str]:
    """The container args of the custom job that runs one job of ``job_type`` with its folder at ``output``
    (an fsspec URL): the params are read from ``output``/``PARAMS_FILE``, the result written beside them."""
    return ["--job-type", job_type, "--params-url", f"{output}/{PARAMS_FILE}", "--output", output]


def main(argv: list[str] | None = None) -> int:
    """Run the job described by the arguments; exit 0, 1 (permanent) or 75 (transient)."""
    from kernels.jobs import run_job
    from kernels.params import JobType, parse_params

    parser = argparse.ArgumentParser(description="Run one GPU Runtime job and write its output.")
    parser.add_argument("--job-type", required=True)
    parser.add_argument("--params-url", required=True, help="fsspec URL of the job's params (a JSON object).")
    parser.add_argument("--output", required=True, help="fsspec URL of the job's output folder.")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    out = args.output.rstrip("/")
    try:
        # the job as the scheduler wrote it beside the output: parsed here, once
        kind = JobType(args.job_type)
        output = run_job(kind, parse_params(kind, json.loads(_read(args.params_url))), device=args.device)
    except Exception as exc:
        failure = VertexFailure.of(exc)
        _write(f"{out}/{ERROR_FILE}", failure.model_dump_json().encode())
        return 1 if failure.kind is FailureKind.PERMANENT else EXIT_TRANSIENT
    for name, data in output.artifacts.items():
        _write(f"{out}/{ARTIFACTS_FOLDER}/{name}", data)
    written = VertexOutput(summary=output.summary, device=output.device, elapsed_s=output.elapsed_s,
                           kernel_s=output.kernel_s, load_s=output.load_s, paths=output.paths,
                           artifacts=sorted(output.artifacts))
    _write(f"{out}/{OUTPUT_FILE}", written.model_dump_json().encode())
    return 0


def _read(url: str) -> bytes:
    with fsspec.open(url, "rb") as handle:
        return handle.read()


def _write(url: str, data: bytes) -> None:
    with fsspec.open(url, "wb") as handle:
        handle.write(data)


if __name__ == "__main__":
    sys.exit(main())
