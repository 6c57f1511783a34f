"""Bad parameters are refused with a reason, before any kernel runs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kernels.device import DeviceUnavailable, resolve_device
from kernels.errors import TransientJobError
from kernels.params import MAX_PATH_STEPS, MAX_VAR_PATHS, parse_params


@pytest.mark.parametrize(
    ("job", "params", "reason"),
    [
        ("european_option", {"paths": 0}, "paths"),
        ("european_option", {"volatility": -0.1}, "volatility"),
        ("european_option", {"kind": "straddle"}, "kind"),
        ("european_option", {"strikes": 100}, "strikes"),
        ("asian_option", {"steps": 0}, "steps"),
        ("asian_option", {"paths": 2_000_000_000, "steps": MAX_PATH_STEPS // 1_000_000_000}, "exceeds the limit"),
        ("random_walk", {"steps": 100_000}, "steps"),
        ("portfolio_var", {"exposures": [1, 2], "volatilities": [0.1]}, "volatilities has 1"),
        ("portfolio_var", {"exposures": [1, 2], "volatilities": [0.1, 0.2], "correlation": [[1, 0.9], [0.8, 1]]},
         "symmetric"),
        ("portfolio_var", {"exposures": [1, 1, 1], "volatilities": [0.1] * 3,
                           "correlation": [[1, 0.9, -0.9], [0.9, 1, 0.9], [-0.9, 0.9, 1]]}, "positive definite"),
        ("portfolio_var", {"exposures": [1], "volatilities": [0.1], "paths": MAX_VAR_PATHS + 1}, "100 to"),
        ("portfolio_var", {"exposures": [1], "volatilities": [0.1], "paths": 10}, "100 to"),
        ("portfolio_var", {"exposures": [1], "volatilities": [0.1], "confidence": 1.0}, "confidence"),
    ],
)
def test_invalid_params_are_rejected_with_the_reason(job: str, params: dict, reason: str) -> None:
    with pytest.raises(ValidationError, match=reason):
        parse_params(job, params)


_BASKET = {"spots": [100.0, 90.0], "weights": [1.0, 1.0], "volatilities": [0.2, 0.3], "strike": 190.0}
_HESTON_ASSETS = {"initial_variance": [0.04, 0.04], "long_variance": [0.04, 0.04], "mean_reversion": [1.5, 1.5],
                  "vol_of_vol": [0.5, 0.5], "correlation": [-0.7, -0.7]}
_BOOK = {"contracts": [{"strike": 100.0, "maturity": 1.0}]}


@pytest.mark.parametrize(
    ("job", "params", "field"),
    [
        ("european_option", {"volatility": 1e-200}, "volatility"),
        ("european_option", {"maturity": 5e-324}, "maturity"),
        ("european_option", {"spot": 1e-40}, "spot"),
        ("asian_option", {"volatility": 1e-200}, "volatility"),
        ("asian_option", {"maturity": 5e-324}, "maturity"),
        ("heston_option", {"vol_of_vol": 1e-200}, "vol_of_vol"),
        ("heston_option", {"initial_variance": 1e-300}, "initial_variance"),
        ("heston_option", {"strike": 5e-324}, "strike"),
        ("basket_option", {**_BASKET, "volatilities": [0.2, 1e-200]}, "volatilities"),
        ("basket_option", {**_BASKET, "maturity": 5e-324}, "maturity"),
        ("basket_option", {**_BASKET, "weights": [1.0, 1e-12]}, "weights"),
        ("american_option", {**_BASKET, "strike": 1e-200}, "strike"),
        ("american_option", {**_BASKET, "volatilities": None, "model": "heston",
                             "heston": {**_HESTON_ASSETS, "vol_of_vol": [0.5, 1e-200]}}, "heston.vol_of_vol"),
        ("option_book", {**_BOOK, "volatility": 1e-200}, "volatility"),
        ("option_book", {"contracts": [{"strike": 100.0, "maturity": 5e-324}]}, "maturity"),
        ("option_book", {**_BOOK, "model": "heston", "vol_of_vol": 1e-200}, "vol_of_vol"),
    ],
)
def test_values_a_kernel_cannot_price_are_refused_with_the_bound(job: str, params: dict, field: str) -> None:
    """Positive values that once divided by zero in a kernel (and were retried as transient) name the floor."""
    refusal = f"(?s){field}.*must be at least [0-9.e-]+ \\(.+\\)"
    with pytest.raises(ValidationError, match=refusal):
        parse_params(job, params)


def test_device_names_are_checked() -> None:
    assert resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device must be one of"):
        resolve_device("tpu")


def test_auto_falls_back_to_cpu_and_gpu_without_one_is_transient(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernels import device

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(DeviceUnavailable, match="no CUDA device") as caught:
        resolve_device("gpu")
    assert isinstance(caught.value, TransientJobError)
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    assert resolve_device("auto") == "gpu"
