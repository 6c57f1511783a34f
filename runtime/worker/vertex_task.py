"""``python -m runtime.worker.vertex_task``: the entry point of a Vertex AI custom job.

It runs one job with ``kernels.jobs.run_job`` and writes what the scheduler reads back under the
output URL: ``output.json`` and each artifact on success, ``error.json`` (kind, message) on failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Final

import fsspec

OUTPUT_FILE: Final = "output.json"
ERROR_FILE: Final = "error.json"
EXIT_TRANSIENT: Final = 75  # EX_TEMPFAIL: worth another delivery


def main(argv: list[str] | None = None) -> int:
    """Run the job described by the arguments; exit 0, 1 (permanent) or 75 (transient)."""
    from kernels.errors import PermanentJobError
    from kernels.jobs import run_job
    from kernels.params import JobType, parse_params

    parser = argparse.ArgumentParser(description="Run one GPU Runtime job and write its output.")
    parser.add_argument("--job-type", required=True)
    parser.add_argument("--params", required=True, help="JSON object of the job's params.")
    parser.add_argument("--output", required=True, help="fsspec URL of the job's output folder.")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args(argv)
    out = args.output.rstrip("/")
    try:
        # the job as the scheduler wrote it into the custom job's arguments: parsed here, once
        kind = JobType(args.job_type)
        output = run_job(kind, parse_params(kind, json.loads(args.params)), device=args.device)
    except (PermanentJobError, ValueError) as exc:
        _write(f"{out}/{ERROR_FILE}", json.dumps({"kind": "permanent", "message": str(exc)}).encode())
        return 1
    except Exception as exc:
        _write(f"{out}/{ERROR_FILE}", json.dumps({"kind": "transient", "message": str(exc)}).encode())
        return EXIT_TRANSIENT
    for name, data in output.artifacts.items():
        _write(f"{out}/artifacts/{name}", data)
    summary = {"summary": output.summary, "device": output.device, "elapsed_s": output.elapsed_s,
               "kernel_s": output.kernel_s, "load_s": output.load_s,
               "paths": output.paths, "artifacts": sorted(output.artifacts)}
    _write(f"{out}/{OUTPUT_FILE}", json.dumps(summary).encode())
    return 0


def _write(url: str, data: bytes) -> None:
    with fsspec.open(url, "wb") as handle:
        handle.write(data)


if __name__ == "__main__":
    sys.exit(main())
