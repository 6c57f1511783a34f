"""Philox4x32-10, the counter-based generator every option and VaR kernel draws from.

Written once as plain Python over ``numpy.uint64`` scalars and registered with ``register_jitable``:
the same source runs in the Python interpreter (and so in the CUDA simulator), inside ``@njit`` CPU
twins, and inside ``@cuda.jit`` kernels. A draw is a pure function of (key, counter): key = the job's
seed, counter = (path group, draw index). Any thread on any grid that asks for the same counter gets
the same numbers, which is what makes results independent of the launch grid and of chunking, and
keeps the generator's whole state in registers.

32-bit words live in ``uint64`` scalars so a 32x32-bit product fits without overflow; every constant
is a ``uint64`` because NumPy and numba promote ``uint64 op int64`` to ``float64``.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from numba.core.extending import register_jitable

from kernels.special import cos_sin_turn, log32

# Philox4x32 round multipliers and Weyl key increments (Salmon et al., SC'11, "Random123").
_M0: Final = np.uint64(0xD2511F53)
_M1: Final = np.uint64(0xCD9E8D57)
_W0: Final = np.uint64(0x9E3779B9)
_W1: Final = np.uint64(0xBB67AE85)
_MASK32: Final = np.uint64(0xFFFFFFFF)
_SHIFT32: Final = np.uint64(32)
ROUNDS: Final = 10

# 2**-32 maps a 32-bit word onto [0, 1]. Uniforms are clamped to at least half a step above zero
# before ``log`` so Box-Muller never sees log(0); this truncates normals at about 6.8 sigma.
_TWO_POW_M32: Final = np.float32(2.0**-32)
UNIFORM_FLOOR: Final = np.float32(2.0**-33)
_MINUS_TWO: Final = np.float32(-2.0)

# Normals per generator call: four 32-bit words make two Box-Muller pairs, both outputs used.
NORMALS_PER_DRAW: Final = 4


@register_jitable
def _round(c0, c1, c2, c3, k0, k1):  # type: ignore[no-untyped-def]
    """One Philox round: two 32x32 -> 64-bit products, their halves crossed and keyed."""
    p0 = _M0 * c0
    p1 = _M1 * c2
    return (p1 >> _SHIFT32) ^ c1 ^ k0, p1 & _MASK32, (p0 >> _SHIFT32) ^ c3 ^ k1, p0 & _MASK32


@register_jitable
def philox4x32_10(c0, c1, c2, c3, k0, k1):  # type: ignore[no-untyped-def]
    """Ten Philox rounds on counter (c0..c3) with key (k0, k1); all ``uint64`` holding 32-bit words."""
    for _ in range(ROUNDS):
        c0, c1, c2, c3 = _round(c0, c1, c2, c3, k0, k1)
        k0 = (k0 + _W0) & _MASK32
        k1 = (k1 + _W1) & _MASK32
    return c0, c1, c2, c3


@register_jitable
def fill_words(words, first_group, n_groups, draw, seed):  # type: ignore[no-untyped-def]
    """``words[4 i + lane]`` = word ``lane`` of ``philox4x32_10`` for group ``first_group + i``, i < n_groups.

    The same rounds as ``philox4x32_10``, taken round by round over the whole range (one array per
    counter word) so that a CPU compiler vectorises them; CPU twins use it to fill a block of words.
    """
    c0 = np.empty(n_groups, dtype=np.uint64)
    c1 = np.empty(n_groups, dtype=np.uint64)
    c2 = np.full(n_groups, np.uint64(draw), dtype=np.uint64)
    c3 = np.zeros(n_groups, dtype=np.uint64)
    for i in range(n_groups):
        g = np.uint64(first_group + i)
        c0[i] = g & _MASK32
        c1[i] = g >> _SHIFT32
    s = np.uint64(seed)
    k0 = s & _MASK32
    k1 = s >> _SHIFT32
    for _ in range(ROUNDS):
        for i in range(n_groups):
            c0[i], c1[i], c2[i], c3[i] = _round(c0[i], c1[i], c2[i], c3[i], k0, k1)
        k0 = (k0 + _W0) & _MASK32
        k1 = (k1 + _W1) & _MASK32
    for i in range(n_groups):
        words[4 * i] = np.uint32(c0[i])
        words[4 * i + 1] = np.uint32(c1[i])
        words[4 * i + 2] = np.uint32(c2[i])
        words[4 * i + 3] = np.uint32(c3[i])


@register_jitable
def box_muller(w0, w1):  # type: ignore[no-untyped-def]
    """Two independent float32 standard normals from two 32-bit words (both Box-Muller outputs)."""
    # converting from a 32-bit integer (not the 64-bit one the words travel in) is one GPU instruction
    radius = math.sqrt(_MINUS_TWO * log32(max(np.float32(np.uint32(w0)) * _TWO_POW_M32, UNIFORM_FLOOR)))
    cos, sin = cos_sin_turn(np.float32(np.uint32(w1)) * _TWO_POW_M32)
    return radius * cos, radius * sin


@register_jitable
def normals4(group, draw, seed):  # type: ignore[no-untyped-def]
    """Four independent float32 standard normals for path group ``group`` and draw index ``draw``.

    ``group`` and ``seed`` are non-negative ints below 2**64, ``draw`` below 2**32.
    """
    g = np.uint64(group)
    s = np.uint64(seed)
    w0, w1, w2, w3 = philox4x32_10(g & _MASK32, g >> _SHIFT32, np.uint64(draw), np.uint64(0),
                                   s & _MASK32, s >> _SHIFT32)
    z0, z1 = box_muller(w0, w1)
    z2, z3 = box_muller(w2, w3)
    return z0, z1, z2, z3
