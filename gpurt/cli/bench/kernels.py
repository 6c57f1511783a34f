"""``gpurt bench kernels`` and ``gpurt bench accuracy``: the kernels' speed and the accuracy SLO.

Numba and the kernels are imported inside the commands so ``gpurt --help`` stays fast.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import typer

from gpurt.cli.common import UserError, friendly_errors
from gpurt.cli.run import DEVICE_HELP


@friendly_errors
def bench_kernels(
    device: str = typer.Option("cpu", "--device", help="cpu or gpu"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    write: bool = typer.Option(False, "--write", help=(
        "Record the figures in BENCHMARKS.md; refused when the one-minute load average exceeds 0.5 per core as "
        "the run starts, or other processes use more than 0.15 cores per core during it (figures from a loaded "
        "machine are not comparable).")),
    scale: float = typer.Option(1.0, "--scale", min=1e-6, max=10.0, help="Shrink or grow the problem sizes."),
    stac: bool = typer.Option(True, "--stac/--no-stac", help=(
        "Also time all Greeks of the STAC-A2-shaped case (5-asset Heston basket, early exercise), cold and warm.")),
    warm_start: bool = typer.Option(True, "--warm-start/--no-warm-start", help=(
        "Also time a fresh worker's first job, after the warm-up a worker runs and without it, against warm.")),
    empty_cache: bool = typer.Option(False, "--empty-cache", help=(
        "With the warm start, also time the warm-up of a worker whose numba cache starts empty (every kernel "
        "compiled: a minute of CPU on two cores), against one that finds the cache the worker image fills.")),
    vs_quantlib: bool = typer.Option(False, "--vs-quantlib", help=(
        "Instead, time the American put against QuantLib's MCAmericanEngine: CPU-seconds at equal standard "
        "error (CPU only; QuantLib is a development dependency).")),
) -> None:
    """Paths/s of each kernel against a vectorised baseline (NumPy on CPU, cupy on GPU), same run.

    The load average is read before and after, and the CPU other processes used meanwhile, and printed with
    the figures; ``--write`` is refused when the load is above ``MAX_WRITE_LOAD_PER_CORE`` per core as the
    run starts (checked first, so a loaded machine costs no benchmark time) or other processes took more
    than ``MAX_OTHERS_CPU_PER_CORE`` per core during it. The load after the run is not judged: a benchmark
    that fills every core raises it by itself.
    """
    if vs_quantlib:
        _bench_vs_quantlib(device, scale, as_json, write)
        return
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from gpurt.bench.kernels import runner
    from gpurt.bench.markdown import load_start, write_section
    from kernels.device import CPU, GPU, gpu_available, resolve_device

    if device not in (CPU, GPU):
        raise UserError("--device must be cpu or gpu")
    try:
        resolve_device(device)
    except Exception as exc:
        raise UserError(str(exc)) from None
    start = load_start()
    if write and (refusal := start.refusal()):
        raise UserError(refusal)
    figures = []
    todo = runner.cases(device, scale)
    with Progress(console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("benchmarking", total=len(todo))
        for case in todo:
            progress.update(task, description=f"{case.job_type.value} vs baseline")
            figures.append(runner.measure(case, device))
            progress.advance(task)
    if not as_json:
        table = Table("kernel", "kernel rate", "baseline rate", "speed-up", title=f"kernels on {device}")
        for f in figures:
            table.add_row(f.kernel, f"{f.kernel_rate:.3g} {f.unit}", f"{f.baseline_rate:.3g} {f.unit}",
                          f"{f.ratio:.1f}x")
        Console().print(table)
    stac_figures = _bench_stac(device, scale, as_json) if stac else None
    warm_figures = _bench_warm_start(device, as_json, empty_cache) if warm_start else None
    window = start.window()
    if as_json:
        payload: dict[str, Any] = {"device": device, "figures": runner.figures_json(figures),
                                   "load_average": window.as_json()}
        if stac_figures is not None:
            payload["stac"] = {**stac_figures.__dict__, "ratio": stac_figures.ratio}
        if warm_figures is not None:
            payload["warm_start"] = warm_figures.as_json()
        typer.echo(json.dumps(payload, indent=2))
    else:
        typer.echo(window.note())
    if write:
        if refusal := window.refusal():
            raise UserError(refusal)
        write_section(f"kernels-{device}", runner.kernels_markdown(figures, device, gpu_available(), window.note()))
        if stac_figures is not None:
            _write_stac(stac_figures, device, window.note())
        if warm_figures is not None:
            _write_warm_start(warm_figures)


def _bench_vs_quantlib(device: str, scale: float, as_json: bool, write: bool) -> None:
    """The American put against QuantLib's MCAmericanEngine, CPU-seconds at equal standard error."""
    from rich.console import Console
    from rich.table import Table

    from gpurt.bench.kernels import quantlib, runner
    from gpurt.bench.markdown import load_start, write_section

    if device != "cpu":
        raise UserError("--vs-quantlib compares CPU-seconds: use --device cpu")
    start = load_start()
    if write and (refusal := start.refusal()):
        raise UserError(refusal)
    try:
        with Console(stderr=True).status("timing the American put: QuantLib's settings, then the kernel's"):
            comparison = quantlib.compare(scale)
    except RuntimeError as exc:
        raise UserError(str(exc)) from None
    window = start.window()
    target = comparison.quantlib.std_error
    if as_json:
        runs = [{**run.__dict__, "cpu_s_at_equal_se": run.cpu_at(target)}
                for run in comparison.runs]
        typer.echo(json.dumps({"runs": runs, "equal_std_error": target, "ratio": comparison.ratio,
                               "load_average": window.as_json()}, indent=2))
    else:
        table = Table("engine", "paths", "estimate", "std error", "CPU s", "wall s", "CPU s at equal SE",
                      title="American put: kernel against QuantLib")
        for run in comparison.runs:
            table.add_row(run.engine, f"{run.paths:,}", f"{run.estimate:.4f}", f"{run.std_error:.4f}",
                          f"{run.cpu_s:.2f}", f"{run.wall_s:.2f}", f"{run.cpu_at(target):.2f}")
        Console().print(table)
        typer.echo(f"CPU-seconds at equal standard error ({target:.4f}): QuantLib / kernel = "
                   f"{comparison.ratio:.1f}x; {window.note()}")
    if write:
        if refusal := window.refusal():
            raise UserError(refusal)
        write_section("kernels-vs-quantlib-cpu",
                      quantlib.markdown(comparison, runner.machine(), runner.today(), window.note()))


def _bench_stac(device: str, scale: float, as_json: bool) -> Any:
    """Time the STAC-A2-shaped case; print its table unless ``as_json``."""
    from rich.console import Console
    from rich.table import Table

    from gpurt.bench.kernels import stac

    with Console(stderr=True).status("timing all Greeks of the STAC-A2-shaped case, cold then warm"):
        figures = stac.measure(device, scale)
    if not as_json:
        table = Table("", "cold", "warm", title=f"STAC-A2-shaped: all Greeks on {device} ({figures.paths:,} paths)")
        table.add_row("kernels", f"{figures.kernel_cold_s:.2f} s", f"{figures.kernel_warm_s:.2f} s")
        table.add_row(f"{stac.baseline_name(device)} baseline", f"{figures.baseline_cold_s:.2f} s",
                      f"{figures.baseline_warm_s:.2f} s")
        Console().print(table)
        typer.echo(f"warm speed-up {figures.ratio:.1f}x; anchor {stac.ANCHOR}")
    return figures


def _bench_warm_start(device: str, as_json: bool, empty_cache: bool) -> Any:
    """Time a fresh worker's first job, warmed and cold (and warmed from an empty numba cache with
    ``empty_cache``); print its table unless ``as_json``."""
    from rich.console import Console
    from rich.table import Table

    from gpurt.bench.kernels import warm_start

    what = "warmed, cold, then warmed from an empty numba cache" if empty_cache else "warmed then cold"
    with Console(stderr=True).status(f"timing a fresh worker's first job, {what}"):
        try:
            figures = warm_start.measure(device, empty_cache)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            raise UserError(f"could not time a fresh worker's first job: {exc}") from None
    if not as_json:
        table = Table("", "warm-up", "first job", "against warm", title=f"a fresh worker's first job on {device}")
        for row in figures.rows():
            table.add_row(*row)
        Console().print(table)
    return figures


def _write_warm_start(figures: Any) -> None:
    from gpurt.bench.kernels import runner, warm_start
    from gpurt.bench.markdown import write_section

    write_section(f"kernels-warm-start-{figures.device}",
                  warm_start.markdown(figures, runner.where(figures.device), runner.today()))


def _write_stac(figures: Any, device: str, load: str) -> None:
    from gpurt.bench.kernels import runner, stac
    from gpurt.bench.markdown import write_section

    write_section(f"kernels-stac-{device}", stac.markdown(figures, runner.where(device), runner.today(), load))


@friendly_errors
def bench_accuracy(
    device: str = typer.Option("auto", "--device", help=DEVICE_HELP),
    write: bool = typer.Option(False, "--write", help="Record the result in BENCHMARKS.md."),
) -> None:
    """The accuracy SLO: relative error < 1e-3 at 99% confidence on the at-the-money reference call."""
    from rich.console import Console

    from gpurt.bench.kernels import runner
    from gpurt.bench.markdown import write_section
    from kernels.device import CHOICES

    if device not in CHOICES:
        raise UserError(f"--device must be one of {', '.join(CHOICES)}")
    with Console(stderr=True).status(f"pricing the reference call with {runner.ACCURACY_PATHS:.2g} paths"):
        result = runner.accuracy(device)
    verdict = "PASS" if result.passed else "FAIL"
    typer.echo(f"estimate {result.estimate:.6f}  Black-Scholes {result.black_scholes:.6f}  "
               f"relative error {result.relative_error:.2e}  99% CI half-width/price "
               f"{result.ci99_half_width_relative:.2e}  tolerance {result.tolerance:.0e}  {verdict}")
    with Console(stderr=True).status("pricing the reference Heston call at several step counts"):
        bias = runner.heston_bias(device)
    for row in bias:
        typer.echo(f"heston {row.steps:>4} steps  estimate {row.estimate:.5f} ± {row.std_error:.1e}  "
                   f"semi-analytic {row.semi_analytic:.5f}  bias {row.bias:+.5f}")
    if write:
        write_section("accuracy", runner.accuracy_markdown(result))
        write_section("accuracy-heston", runner.heston_bias_markdown(bias, result.device))
    if not result.passed:
        raise typer.Exit(1)
