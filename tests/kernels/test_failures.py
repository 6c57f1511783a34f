"""A kernel's own error for a given set of params is the job's fault: permanent at once, never retried.

Infrastructure failures (CUDA out of memory, a lost device, host memory, I/O) keep their transient or
unclassified kind so another delivery can run the job on another worker.
"""

from __future__ import annotations

import pytest

from kernels import european
from kernels.errors import PermanentJobError, TransientJobError
from kernels.params import EuropeanOptionParams
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
