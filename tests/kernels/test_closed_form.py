"""Closed forms against independent facts: textbook values, parity, limiting cases."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from kernels.closed_form import black_scholes, delta_normal_var, geometric_asian


def test_black_scholes_textbook_value() -> None:
    # Hull's at-the-money example: S=K=100, r=5%, sigma=20%, T=1 -> 10.4506
    assert black_scholes(100, 100, 0.05, 0.2, 1.0) == pytest.approx(10.450583572185565, rel=1e-12)


@pytest.mark.parametrize(("spot", "strike", "rate", "vol", "t"), [(100, 90, 0.03, 0.25, 0.5), (50, 70, -0.01, 0.6, 3)])
def test_put_call_parity(spot: float, strike: float, rate: float, vol: float, t: float) -> None:
    call = black_scholes(spot, strike, rate, vol, t, call=True)
    put = black_scholes(spot, strike, rate, vol, t, call=False)
    assert call - put == pytest.approx(spot - strike * math.exp(-rate * t), rel=1e-12)


def test_geometric_asian_with_one_date_is_the_european() -> None:
    for call in (True, False):
        assert geometric_asian(100, 105, 0.04, 0.3, 2.0, 1, call) == pytest.approx(
            black_scholes(100, 105, 0.04, 0.3, 2.0, call), rel=1e-12)


def test_geometric_asian_is_cheaper_than_the_european_and_converges() -> None:
    european = black_scholes(100, 100, 0.05, 0.2, 1.0)
    fine = geometric_asian(100, 100, 0.05, 0.2, 1.0, 10_000)
    continuous_vol = 0.2 / math.sqrt(3.0)  # continuous geometric average: volatility sigma / sqrt(3)
    continuous = black_scholes(100 * math.exp(-0.5 * (0.05 + 0.2**2 / 6) * 1.0), 100, 0.05, continuous_vol, 1.0)
    assert fine < european
    assert fine == pytest.approx(continuous, rel=1e-3)


def test_parametric_var_of_one_position() -> None:
    risk = delta_normal_var(np.array([2e6]), np.array([[0.01**2]]), 0.99)
    sd = 2e6 * 0.01
    assert risk.var == pytest.approx(NormalDist().inv_cdf(0.99) * sd)
    assert risk.cvar == pytest.approx(sd * NormalDist().pdf(NormalDist().inv_cdf(0.99)) / 0.01)
    assert risk.cvar > risk.var
