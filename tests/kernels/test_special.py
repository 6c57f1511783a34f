"""The branch-free float32 special functions against NumPy's double-precision ones."""

from __future__ import annotations

import numpy as np
from numba import njit

from kernels.special import cos_sin_turn, exp32, log32


@njit
def _map_exp(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = exp32(x[i])
    return out


@njit
def _map_log(x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    for i in range(x.size):
        out[i] = log32(x[i])
    return out


@njit
def _map_turn(x: np.ndarray) -> np.ndarray:
    out = np.empty((x.size, 2), dtype=np.float32)
    for i in range(x.size):
        out[i, 0], out[i, 1] = cos_sin_turn(x[i])
    return out


def test_exp32_relative_error() -> None:
    x = np.linspace(-80.0, 80.0, 200_001, dtype=np.float32)
    assert np.max(np.abs(_map_exp(x) / np.exp(x.astype(np.float64)) - 1.0)) < 5e-7


def test_log32_error_over_the_unit_interval() -> None:
    u = np.concatenate([np.geomspace(2.0**-33, 1.0, 100_000), np.linspace(1e-3, 1.0, 100_000)]).astype(np.float32)
    exact = np.log(u.astype(np.float64))
    error = np.abs(_map_log(u) - exact)
    # float32 resolution: relative where the log is large, absolute near u = 1 where it vanishes
    assert np.all(error <= np.maximum(5e-7 * np.abs(exact), 1e-7))


def test_cos_sin_of_a_turn_cover_all_quadrants() -> None:
    u = np.linspace(0.0, 1.0, 100_003, dtype=np.float32)
    got = _map_turn(u)
    angle = 2.0 * np.pi * u.astype(np.float64)
    assert np.max(np.abs(got[:, 0] - np.cos(angle))) < 1e-7 * 2
    assert np.max(np.abs(got[:, 1] - np.sin(angle))) < 1e-7 * 2


def test_python_and_compiled_versions_agree() -> None:
    """The CUDA simulator runs the plain-Python function: it must compute the same thing."""
    for x in (np.float32(-3.7), np.float32(0.0), np.float32(12.25)):
        assert np.isclose(exp32(x), _map_exp(np.array([x]))[0], rtol=1e-6)
    for u in (np.float32(1e-9), np.float32(0.3), np.float32(1.0)):
        assert np.isclose(log32(u), _map_log(np.array([u]))[0], rtol=1e-6, atol=1e-7)
    for u in (np.float32(0.1), np.float32(0.6), np.float32(0.99)):
        assert np.allclose(cos_sin_turn(u), _map_turn(np.array([u]))[0], atol=1e-7)
