"""A kernel's own error for a given set of params is the job's fault: permanent at once, never retried.

Infrastructure failures (CUDA out of memory, a lost device, host memory, I/O) keep their transient or
unclassified kind so another delivery can run the job on another worker.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from kernels import european
from kernels.context import KernelResult
from kernels.errors import PermanentJobError, TransientJobError
from kernels.jobs import run_job
from kernels.params import (
    EXP32_LIMIT,
    FLOAT32_LOG_MAX,
    FLOAT32_LOG_MIN,
    NORMAL_DRAW_MAX,
    EuropeanOptionParams,
    JobType,
    parse_params,
)
from kernels.shards import run_shard
from tests.kernels.job_input import run_raw, typed


def test_a_zero_division_in_a_kernel_is_permanent() -> None:
    """Params that bypass validation (a model built without it) reach the real closed form's division."""
    unpriceable = EuropeanOptionParams(paths=1_000).model_copy(update={"volatility": 1e-200})
    with pytest.raises(PermanentJobError, match=r"european_option cannot be computed.*ZeroDivisionError"):
        run_raw("european_option", unpriceable, device="cpu")


@pytest.mark.parametrize("error", [ZeroDivisionError("float division by zero"), FloatingPointError("overflow"),
                                   ValueError("SVD did not converge\nsecond line"), IndexError("index 3")])
def test_deterministic_kernel_errors_become_permanent_with_one_line(monkeypatch: pytest.MonkeyPatch,
                                                                    error: Exception) -> None:
    def broken(*_: object) -> None:
        raise error

    monkeypatch.setattr(european, "run", broken)
    with pytest.raises(PermanentJobError) as raised:
        run_raw("european_option", {"paths": 1_000}, device="cpu")
    assert type(error).__name__ in str(raised.value) and "\n" not in str(raised.value)
    assert raised.value.__cause__ is error


@pytest.mark.parametrize("error", [TransientJobError("CUDA out of memory even for the smallest chunk"),
                                   MemoryError(), OSError("numba cache unreadable")])
def test_infrastructure_errors_keep_their_kind(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def broken(*_: object) -> None:
        raise error

    monkeypatch.setattr(european, "run", broken)
    with pytest.raises(type(error)) as raised:
        run_raw("european_option", {"paths": 1_000}, device="cpu")
    assert raised.value is error


def test_a_shard_classifies_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(european, "shard_part", broken)
    with pytest.raises(PermanentJobError, match="ZeroDivisionError"):
        run_shard(*typed("european_option", {"paths": 100_000}), 0, 2, device="cpu")


# issue #35: a European call with spot 1e9, strike 0.001, volatility 5, maturity 100 and rate 1 returned
# succeeded 0.0 +/- 0.0 while the same result's closed_form was 1e9 (Heston the same)
_DEGENERATE = {"spot": 1e9, "strike": 0.001, "volatility": 5.0, "maturity": 100.0, "rate": 1.0}


@pytest.mark.parametrize(("job", "params"), [
    ("european_option", _DEGENERATE),
    ("heston_option", {k: v for k, v in _DEGENERATE.items() if k != "volatility"}),
    ("heston_option", {**{k: v for k, v in _DEGENERATE.items() if k not in ("volatility", "rate")},
                       "initial_variance": 4.0, "long_variance": 4.0}),
])
def test_params_whose_float32_paths_overflow_or_underflow_are_refused_with_the_bound(job: str, params: dict) -> None:
    with pytest.raises(ValidationError, match="float32"):
        parse_params(job, params)


def test_a_confident_wrong_answer_from_params_past_the_bounds_fails_permanently() -> None:
    """Params that bypass validation reach the kernel: every path pays the same, the exact price says otherwise."""
    past = EuropeanOptionParams(paths=1_000).model_copy(update=_DEGENERATE)
    with pytest.raises(PermanentJobError, match=r"zero error bar.*float32"):
        run_job(JobType.EUROPEAN_OPTION, past, device="cpu")


def test_a_result_that_is_not_a_number_fails_permanently(monkeypatch: pytest.MonkeyPatch) -> None:
    def overflowed(*_: object) -> KernelResult:
        return KernelResult(summary={"estimate": 1.0, "greeks": {"delta": {"estimate": float("nan")}}}, paths=1)

    monkeypatch.setattr(european, "run", overflowed)
    with pytest.raises(PermanentJobError, match=r"not a number at greeks\.delta\.estimate"):
        run_raw("european_option", {"paths": 1_000}, device="cpu")


def test_a_deep_out_of_the_money_option_whose_few_paths_paid_nothing_still_succeeds() -> None:
    output = run_raw("european_option", {"strike": 300.0, "paths": 100}, device="cpu")
    assert output.summary["estimate"] == 0.0 and output.summary["std_error"] == 0.0


def test_the_bounds_are_the_generators_and_the_exp_functions() -> None:
    from kernels.philox import UNIFORM_FLOOR
    from kernels.special import _EXP_LO

    assert pytest.approx(math.sqrt(-2.0 * math.log(float(UNIFORM_FLOOR)))) == NORMAL_DRAW_MAX
    assert -float(_EXP_LO) == EXP32_LIMIT
    assert math.exp(FLOAT32_LOG_MAX) == pytest.approx(float(np.finfo(np.float32).max))
    assert math.exp(FLOAT32_LOG_MIN) == pytest.approx(float(np.finfo(np.float32).tiny))
