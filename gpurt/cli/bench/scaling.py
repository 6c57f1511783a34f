"""``gpurt bench scaling``: one large european and one VaR job sharded over 1 .. N workers."""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, Annotated, Final

import typer
from rich.table import Table

from gpurt.cli.common import UserError, console, err_console, friendly_errors, print_json

if TYPE_CHECKING:
    from gpurt.bench.runtime.scaling import ScalingRun

SECTION: Final = "scaling"


@friendly_errors
def bench_scaling(
    workers: Annotated[int | None, typer.Option(min=1, max=64, help=(
        "Largest worker count measured (1 .. N). Default: the GPUs, else the CPU cores."))] = None,
    repeats: Annotated[int, typer.Option(min=1, max=20, help="Runs per job and worker count; the fastest counts.")] = 3,
    scale: Annotated[float, typer.Option(min=1e-4, max=1.0, help="Shrink the jobs (1 = 2e9 paths, 1.6e7 scenarios).")
                     ] = 1.0,
    device: Annotated[str, typer.Option(help="cpu, gpu, or auto (gpu where nvidia-smi lists GPUs).")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    write: Annotated[bool, typer.Option("--write", help="Write the figures to BENCHMARKS.md.")] = False,
) -> None:
    """Speed-up and parallel efficiency of a sharded job on 1 .. N workers against 1 worker, in the same run."""
    from gpurt.bench.kernels.runner import today
    from gpurt.bench.kernels.runner import where as measured_on
    from gpurt.bench.markdown import load_note, write_section
    from gpurt.bench.runtime.scaling import measure
    from runtime.scheduler.settings import detect_gpus

    gpus = detect_gpus()
    if device == "auto":
        device = "gpu" if gpus else "cpu"
    if device not in ("cpu", "gpu"):
        raise UserError("--device must be cpu, gpu or auto")
    if device == "gpu" and not gpus:
        raise UserError("--device gpu: nvidia-smi lists no GPU on this machine")
    max_workers = workers or (gpus if device == "gpu" else os.cpu_count() or 1)
    _quiet_dask()
    with err_console.status("starting workers") as status:
        run = measure(max_workers, device, gpus if device == "gpu" else 0, repeats, scale,
                      on_step=lambda step: status.update(step))
    where = measured_on(device)
    if as_json:
        print_json({"device": device, "where": where, "load": load_note(),
                    "rows": [dataclasses.asdict(r) for r in run.rows],
                    "efficiency": {job: {str(r.workers): r.efficiency for r in run.rows if r.job == job}
                                   for job in dict.fromkeys(r.job for r in run.rows)}})
    else:
        console.print(_table(run, where))
        console.print(load_note())
    if write:
        write_section(SECTION, markdown(run, where, today(), load_note()))


def _quiet_dask() -> None:
    """Keep Dask's start/stop chatter (INFO) out of the output; the workers are silenced by their options."""
    for name in [*logging.root.manager.loggerDict, "distributed"]:
        if name.startswith("distributed"):
            logging.getLogger(name).setLevel(logging.ERROR)


def _table(run: ScalingRun, where: str) -> Table:
    table = Table(title=f"sharded jobs on {run.device} ({where})")
    for name in ("job", "workers", "shards", "time", "speed-up", "efficiency", "estimate"):
        table.add_column(name, no_wrap=True)
    for r in run.rows:
        table.add_row(r.job.removesuffix("_option"), str(r.workers), str(r.shards), f"{r.seconds:.3f} s",
                      f"{r.speed_up:.2f}x", f"{r.efficiency:.0%}", f"{r.estimate:.7g}")
    return table


def markdown(run: ScalingRun, where: str, date: str, load: str) -> str:
    """The ``scaling`` section of BENCHMARKS.md."""
    from gpurt.bench.runtime.scaling import EFFICIENCY_GOAL

    unit = "one GPU" if run.device == "gpu" else "one CPU thread"
    lines = [f"## Sharded jobs: scaling over workers ({run.device}: {where}, {date})", "",
             f"`gpurt bench scaling`: one job sharded over N workers ({unit} each), fastest of several runs, "
             f"against the 1-worker run (one task, unsharded) of the same run; {load}. The unsharded VaR run "
             "sorts every loss, a shard only picks out its largest, so VaR's efficiency can pass 100%.", "",
             "| job | workers | shards | time | speed-up | efficiency | estimate |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r.job} | {r.workers} | {r.shards} | {r.seconds:.3f} s | {r.speed_up:.2f}x | {r.efficiency:.0%} "
              f"| {r.estimate:.10g} |" for r in run.rows]
    for job in dict.fromkeys(r.job for r in run.rows):
        at_two = run.efficiency_at(job, 2)
        if at_two is not None:
            verdict = "met" if at_two >= EFFICIENCY_GOAL else "NOT met"
            lines.append(f"\nGoal efficiency >= {EFFICIENCY_GOAL:.0%} at 2 workers, {job}: {at_two:.0%}, {verdict}.")
    return "\n".join(lines)
