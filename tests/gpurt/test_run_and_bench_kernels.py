"""``gpurt run`` and the kernel benchmarks through the real CLI app (typer's CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from gpurt.bench.kernels import runner as kernel_bench
from gpurt.cli.app import app

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_run_prints_a_succeeded_result_for_an_example(tmp_path: Path) -> None:
    job = tmp_path / "call.json"
    example = json.loads((REPO / "examples" / "european_option.json").read_text())
    job.write_text(json.dumps({**example, "params": {**example["params"], "paths": 200_000}}))
    result = _invoke("run", str(job), "--device", "cpu")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["status"] == "succeeded" and body["job_id"] == example["job_id"]
    assert body["metrics"]["device"] == "cpu"
    assert abs(body["result"]["estimate"] - body["result"]["closed_form"]) < 4 * body["result"]["std_error"]


def test_run_writes_artifacts_and_names_them(tmp_path: Path) -> None:
    job = tmp_path / "var.json"
    job.write_text(json.dumps({"type": "portfolio_var", "params": {"exposures": [1e6], "volatilities": [0.2],
                                                                   "paths": 20_000}}))
    result = _invoke("run", str(job), "--device", "cpu", "--artifacts", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["job_id"] == "var"  # taken from the file name when the file has none
    quantiles = np.load(body["artifacts"]["loss_quantiles.npy"])
    assert quantiles[990] == pytest.approx(body["result"]["var"], rel=1e-2)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("{not json", "not valid JSON"),
        ('{"type": "teleport"}', "invalid job"),
        # held to the scheduler's parser: the standard library would silently keep the last `type`
        ('{"type": "noop", "type": "european_option"}', "repeats key(s) 'type'"),
        ('{"type": "european_option", "params": {"paths": -5}}', "paths: Input should be greater"),
    ],
)
def test_run_refuses_bad_files_without_a_traceback(tmp_path: Path, content: str | None, message: str) -> None:
    job = tmp_path / "job.json"
    if content is not None:
        job.write_text(content)
    result = _invoke("run", str(job))
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_run_refuses_an_unknown_device(tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text('{"type": "noop"}')
    result = _invoke("run", str(job), "--device", "tpu")
    assert result.exit_code == 2 and "--device" in result.output


def test_run_reports_a_kernel_error_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's own exception is a permanent failure: a one-line error and the failed result, no traceback."""
    from kernels import european

    def broken(*_: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(european, "run", broken)
    job = tmp_path / "call.json"
    job.write_text(json.dumps({"job_id": "c1", "type": "european_option", "params": {"paths": 1_000}}))
    result = _invoke("run", str(job), "--device", "cpu")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert [line for line in result.stderr.splitlines() if line.strip()] == [
        "error: the job failed (permanent): european_option cannot be computed for these params: "
        "ZeroDivisionError: float division by zero"]
    body = json.loads(result.stdout)
    assert body["status"] == "failed" and body["error"]["kind"] == "permanent"


def test_run_refuses_a_value_no_kernel_can_price(tmp_path: Path) -> None:
    job = tmp_path / "call.json"
    job.write_text(json.dumps({"type": "european_option", "params": {"volatility": 1e-200}}))
    result = _invoke("run", str(job), "--device", "cpu")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "volatility" in result.output and "must be at least 0.001" in result.output


@pytest.mark.parametrize("kind", ["transient", "permanent"])
def test_run_reports_a_failed_job_as_json(tmp_path: Path, kind: str) -> None:
    job = tmp_path / "drill.json"
    job.write_text(json.dumps({"job_id": "d1", "type": "noop", "params": {"fail": kind}}))
    result = _invoke("run", str(job))
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["status"] == "failed" and body["error"]["kind"] == kind and "simulated" in body["error"]["message"]


@pytest.mark.slow  # times every kernel and its baseline
def test_bench_kernels_json_has_a_figure_per_kernel_with_its_ratio(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_bench, "REPEATS", 1)
    result = _invoke("bench", "kernels", "--device", "cpu", "--json", "--scale", "0.001", "--no-stac",
                     "--no-warm-start")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["figures"]
    assert [f["kernel"] for f in figures] == ["european_option", "asian_option", "random_walk", "portfolio_var"]
    for f in figures:
        assert f["kernel_rate"] > 0 and f["baseline_rate"] > 0
        assert f["ratio"] == pytest.approx(f["kernel_rate"] / f["baseline_rate"])


def test_bench_markdown_says_when_no_gpu_was_available() -> None:
    figure = kernel_bench.Figure("european_option", "paths/s", 10, 2e8, 4e7)
    text = kernel_bench.kernels_markdown([figure], "cpu", gpu_present=False,
                                         load="load average 0.1 before and 0.2 after")
    assert "| european_option |" in text and "5.0x" in text
    assert "No GPU was available" in text
    assert "load average 0.1 before and 0.2 after" in text


def _fake_bench(monkeypatch: pytest.MonkeyPatch, loads: list[float], measured: list[str],
                written: list[str], others_cores: float = 0.0) -> None:
    """Two cores whose one-minute load reads ``loads`` in turn, on which other processes use ``others_cores``
    cores over a 10 s run; measuring and writing only recorded."""
    from gpurt.bench import markdown as benchmarks_md

    readings = iter(loads)
    clocks = iter([benchmarks_md.CpuClock(at=0.0, machine_busy_s=100.0, own_s=1.0),
                   benchmarks_md.CpuClock(at=10.0, machine_busy_s=100.0 + 19.0 + 10 * others_cores, own_s=20.0)])
    monkeypatch.setattr(benchmarks_md, "one_minute_load", lambda: next(readings))
    monkeypatch.setattr(benchmarks_md, "cpu_clock", lambda: next(clocks))
    monkeypatch.setattr(benchmarks_md, "cores", lambda: 2)
    monkeypatch.setattr(benchmarks_md, "write_section", lambda name, _: written.append(name))
    from types import SimpleNamespace

    from kernels.params import JobType

    monkeypatch.setattr(kernel_bench, "cases", lambda *_: [SimpleNamespace(job_type=JobType.EUROPEAN_OPTION)])

    def measure(case: SimpleNamespace, device: str) -> kernel_bench.Figure:
        measured.append(case.job_type.value)
        return kernel_bench.Figure("european_option", "paths/s", 10, 2e8, 4e7)

    monkeypatch.setattr(kernel_bench, "measure", measure)


def test_bench_write_is_refused_at_once_on_a_loaded_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[str] = []
    written: list[str] = []
    _fake_bench(monkeypatch, [2.8], measured, written)
    result = _invoke("bench", "kernels", "--device", "cpu", "--no-stac", "--no-warm-start", "--write")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "not writing BENCHMARKS.md" in result.output and "above the limit of 1 (0.5 per core)" in result.output
    assert measured == [] and written == []


def test_bench_figures_are_printed_but_not_written_when_other_processes_took_cpu(
        monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[str] = []
    written: list[str] = []
    _fake_bench(monkeypatch, [0.2, 2.5], measured, written, others_cores=0.8)
    result = _invoke("bench", "kernels", "--device", "cpu", "--no-stac", "--no-warm-start", "--write")
    assert result.exit_code == 2
    assert "european_option" in result.stdout and "5.0x" in result.stdout
    assert ("load average 0.20 before and 2.50 after, on 2 cores; other processes used 0.80 cores during the run"
            in result.stdout)
    assert "not writing BENCHMARKS.md" in result.stderr and "0.3 cores (0.15 per core)" in result.stderr
    assert measured == ["european_option"] and written == []


def test_a_run_that_fills_every_core_by_itself_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """The load after the run is the benchmark's own: what counts is the CPU other processes took."""
    measured: list[str] = []
    written: list[str] = []
    _fake_bench(monkeypatch, [0.66, 1.95], measured, written, others_cores=0.05)
    result = _invoke("bench", "kernels", "--device", "cpu", "--no-stac", "--no-warm-start", "--write", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["load_average"] == {"before": 0.66, "after": 1.95, "cores": 2,
                                                         "others_cores": pytest.approx(0.05)}
    assert written == ["kernels-cpu"]


def test_other_processes_cpu_is_the_machines_busy_time_less_this_process() -> None:
    from gpurt.bench.markdown import CpuClock, cpu_clock, others_cores

    assert others_cores(CpuClock(0.0, 50.0, 2.0), CpuClock(4.0, 58.0, 4.0)) == pytest.approx(1.5)
    assert others_cores(CpuClock(0.0, None, 2.0), CpuClock(4.0, 58.0, 4.0)) is None
    start = cpu_clock()
    deadline = start.own_s + 0.2
    while cpu_clock().own_s < deadline:  # this process busy: none of it is others'
        pass
    end = cpu_clock()
    if start.machine_busy_s is not None:  # Linux
        assert end.machine_busy_s - start.machine_busy_s >= 0.15  # the machine saw this process's CPU
        assert others_cores(start, end) is not None


def test_accuracy_check_passes_and_fails_on_its_tolerance() -> None:
    small = kernel_bench.accuracy("cpu", paths=200_000)
    assert small.relative_error < 1e-2
    assert small.ci99_half_width_relative > kernel_bench.ACCURACY_TOLERANCE  # too few paths for the SLO
    assert not small.passed
    assert "FAIL" in kernel_bench.accuracy_markdown(small)


def test_heston_bias_table_reports_each_step_count_against_the_integral() -> None:
    rows = kernel_bench.heston_bias("cpu", paths=20_000, steps=(3, 64))
    assert [r.steps for r in rows] == [3, 64]
    assert rows[0].semi_analytic == rows[1].semi_analytic
    assert rows[0].halving is None and rows[1].halving is not None  # an odd step count has no halving pair
    text = kernel_bench.heston_bias_markdown(rows, "cpu")
    assert "| 3 |" in text and "| 64 |" in text and "semi-analytic" in text and "n/a |" in text


def test_every_job_type_has_a_valid_example() -> None:
    from kernels.params import JobType
    from runtime.protocol.messages import parse_request

    requests = [parse_request(path.read_bytes()) for path in (REPO / "examples").glob("*.json")]
    assert {r.type for r in requests} == set(JobType)
    for request in requests:  # the params a result echoes (every field) parse again to the same job
        echoed = request.model_dump(mode="json")
        assert parse_request(json.dumps(echoed).encode()) == request
