"""``gpurt bench kernels --vs-quantlib``: the kernel and QuantLib price the same American put, at equal
standard error, and the figures are only written from a quiet machine."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpurt.bench.kernels import quantlib as quantlib_bench
from kernels.binomial import binomial_price
from tests.kernels.conftest import bonferroni_z

TINY = 0.03  # 6,000 pricing and 1,500 regression paths
# What a rule fitted on TINY's 1,500 regression paths gives up against the tree: 0.7% to 1.2% over three
# seeds (0.2% to 0.5% on 10,000). The kernel's standard error is small enough to show it.
TINY_RULE_LOSS = 0.02


def test_a_run_is_charged_up_to_the_common_error_never_down() -> None:
    """A larger error costs 1 / SE^2 more paths; a smaller one, bought with fixed costs (the kernel's
    regression) that fewer paths would not shrink, earns no discount."""
    noisy = quantlib_bench.EngineRun("noisy", 1000, 6.0, 0.02, 1.0, 1.0)
    precise = quantlib_bench.EngineRun("precise", 1000, 6.0, 0.005, 1.0, 1.0)
    assert noisy.cpu_at(0.01) == pytest.approx(4.0)
    assert precise.cpu_at(0.01) == pytest.approx(1.0)
    assert precise.efficiency < noisy.efficiency


@pytest.mark.slow  # real timed runs: three QuantLib settings, a pilot and two kernel runs
def test_kernel_and_quantlib_price_the_same_put_at_equal_error() -> None:
    pytest.importorskip("QuantLib")
    c = quantlib_bench.compare(TINY)
    p = quantlib_bench.CASE
    exact = binomial_price(p.spots[0], p.strike, p.rate, 0.0, p.volatilities[0], p.maturity, False, 2000, p.steps)
    z = bonferroni_z(len(c.runs))
    for run in c.runs:  # the same option: each within its error (and the rule's loss) of the tree
        assert abs(run.estimate - exact) < z * run.std_error + TINY_RULE_LOSS * exact, (run, exact)
    assert c.quantlib in c.tried and c.quantlib.efficiency == min(r.efficiency for r in c.tried)
    # the kernel picked its setting the same way, from one pilot per setting QuantLib tried
    assert len(c.kernel_tried) == len(quantlib_bench.SETTINGS)
    chosen = min(c.kernel_tried, key=lambda r: r.efficiency)
    assert c.kernel.engine == chosen.engine and c.runs[0] is c.kernel
    # the kernel's paths were chosen for QuantLib's error: equal up to the pilot's own noise, or below it
    # at the fewest paths the kernel is timed on
    target = c.quantlib.std_error
    if c.kernel.paths > quantlib_bench.MIN_KERNEL_PATHS:
        assert c.kernel.std_error == pytest.approx(target, rel=0.25)
    else:
        assert c.kernel.std_error < 1.25 * target
    assert c.ratio == pytest.approx(c.quantlib.cpu_at(target) / c.kernel.cpu_at(target))
    text = quantlib_bench.markdown(c, "a test CPU", "2026-11-25", "load average 1.0 before and 1.0 after")
    assert "QuantLib / kernel" in text and "load average 1.0" in text and "MCAmericanEngine" in text


def test_cli_prints_the_comparison_and_refuses_to_write_from_a_loaded_machine(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("QuantLib")
    from gpurt.bench import markdown as benchmarks_md
    from gpurt.cli.app import app

    run = quantlib_bench.EngineRun("x", 1000, 6.0, 0.02, 1.0, 1.0)
    monkeypatch.setattr(quantlib_bench, "compare", lambda scale: quantlib_bench.Comparison(run, run, [run], 500, [run]))
    result = CliRunner().invoke(app, ["bench", "kernels", "--vs-quantlib", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["ratio"] == pytest.approx(1.0) and "before" in payload["load_average"]
    monkeypatch.setattr(benchmarks_md, "one_minute_load", lambda: 100.0)
    refused = CliRunner().invoke(app, ["bench", "kernels", "--vs-quantlib", "--write"])
    assert refused.exit_code == 2 and "not writing BENCHMARKS.md" in refused.output
    assert CliRunner().invoke(app, ["bench", "kernels", "--vs-quantlib", "--device", "gpu"]).exit_code == 2
