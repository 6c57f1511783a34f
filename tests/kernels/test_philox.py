"""Philox4x32-10 against the Random123 known-answer vectors, and the normals it feeds."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from kernels.philox import box_muller, normals4, philox4x32_10

# Random123's kat_vectors for philox4x32_10: (counter, key, expected output).
KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@njit
def _compiled(c0, c1, c2, c3, k0, k1):  # type: ignore[no-untyped-def]
    return philox4x32_10(c0, c1, c2, c3, k0, k1)


@njit
def _normals(seed: int, groups: int) -> np.ndarray:
    out = np.empty(groups * 4, dtype=np.float32)
    for g in range(groups):
        z = normals4(g, 0, seed)
        for lane in range(4):
            out[4 * g + lane] = z[lane]
    return out


@pytest.mark.parametrize(("counter", "key", "expected"), KNOWN_ANSWERS)
def test_known_answers_interpreted_and_compiled(counter: tuple, key: tuple, expected: tuple) -> None:
    words = [np.uint64(v) for v in (*counter, *key)]
    assert [int(w) for w in philox4x32_10(*words)] == list(expected)
    assert [int(w) for w in _compiled(*words)] == list(expected)


def test_normals_have_unit_moments_and_use_both_box_muller_outputs() -> None:
    z = _normals(11, 250_000).astype(np.float64)  # 1e6 normals
    n = z.size
    assert abs(z.mean()) < 4.0 / np.sqrt(n)
    assert abs(z.var() - 1.0) < 4.0 * np.sqrt(2.0 / n)
    # kurtosis 3 distinguishes a normal from most wrong transforms
    assert abs(np.mean(z**4) - 3.0) < 4.0 * np.sqrt(96.0 / n)
    pairs = z.reshape(-1, 2)  # the cos and sin outputs of one pair must be uncorrelated
    assert abs(np.corrcoef(pairs[:, 0], pairs[:, 1])[0, 1]) < 4.0 / np.sqrt(pairs.shape[0])


def test_a_zero_uniform_is_clamped_before_log() -> None:
    z0, z1 = box_muller(np.uint64(0), np.uint64(0))
    assert np.isfinite(z0) and np.isfinite(z1) and 6.0 < abs(z0) < 7.0


def test_streams_depend_on_seed_group_and_draw() -> None:
    base = normals4(5, 0, 42)
    assert normals4(5, 0, 42) == base
    assert normals4(5, 0, 43) != base
    assert normals4(6, 0, 42) != base
    assert normals4(5, 1, 42) != base
