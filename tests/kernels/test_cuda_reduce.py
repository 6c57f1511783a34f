"""The block-sum kernel factory, interpreted by numba's CUDA simulator, against sums known in closed form.

Each thread function sums integers over its items, so every block's sums are exact integers whatever the
order of the reduction: the expected rows are the closed forms ``sum i`` and ``sum i^2`` over the block's
items below the job's last, not anything the factory computed. Two launches at different first blocks
cover a launch of several blocks and a launch that starts past block 0 at a last block cut short. The
storing variant writes each item's own value, so its expected output is the item numbers themselves.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from kernels.cuda_reduce import block_sums_kernel
from tests.kernels.child import REPO, child_env

ITEMS_PER_BLOCK = 512  # two items per thread of kernels.gpu.THREADS = 256
N_ITEMS = 2 * ITEMS_PER_BLOCK + 300  # the third block is cut short
LAUNCHES = ((0, 2), (2, 1))  # (first block, blocks): two blocks from block 0, then the short last block alone
ROWS = 3
# ``NUMBA_ENABLE_CUDASIM`` must be set before numba.cuda is imported: the kernels run in a child process.
RUNNER = """
import json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
from numba import float64
from numba.core.extending import register_jitable
from kernels import gpu
from kernels.cuda_reduce import block_sums_kernel

ITEMS_PER_BLOCK, N_ITEMS, ROWS, LAUNCHES = json.loads(sys.argv[1])


@register_jitable
def plain(first, count, stride, n_items, scale):
    total = 0.0
    total_sq = 0.0
    for i in range(count):
        item = first + i * stride
        if item >= n_items:
            break
        total += scale * item
        total_sq += scale * item * item
    return total, total_sq


@register_jitable
def with_scratch(first, count, stride, n_items, scale, scratch):
    # the thread's own float32 scratch carries its sums from item to item (two items: exact integers)
    scratch[0] = 0.0
    scratch[1] = 0.0
    for i in range(count):
        item = first + i * stride
        if item < n_items:
            scratch[0] += scale * item
            scratch[1] += scale * item * item
    return np.float64(scratch[0]), np.float64(scratch[1])


@register_jitable
def into_rows(first, count, stride, n_items, scales, acc):
    # row r holds the sums scaled by scales[r]; the launch's out has scales.size rows of two
    for i in range(count):
        item = first + i * stride
        if item >= n_items:
            break
        for r in range(scales.shape[0]):
            acc[r, 0] += scales[r] * item
            acc[r, 1] += scales[r] * item * item


@register_jitable
def storing(first, count, stride, n_items, scale, scratch, out, launch_first):
    # each item's own value, through the thread's (2, 2) float64 scratch, at its place in the launch's out
    for i in range(count):
        item = first + i * stride
        if item >= n_items:
            break
        scratch[1, 1] = scale * item
        out[item - launch_first] = scratch[1, 1]


kernels = {
    "plain": (block_sums_kernel(plain, width=2, items_per_block=ITEMS_PER_BLOCK), 2, (np.int64(N_ITEMS), 1.0)),
    "scratch": (block_sums_kernel(with_scratch, width=2, items_per_block=ITEMS_PER_BLOCK, scratch=2), 2,
                (np.int64(N_ITEMS), 1.0)),
    "rows": (block_sums_kernel(into_rows, width=2, items_per_block=ITEMS_PER_BLOCK, rows=ROWS), 2 * 2,
             (np.int64(N_ITEMS), np.array([1.0, 3.0]))),
}
out = {}
for name, (factory, width, args) in kernels.items():
    launch = factory()
    rows = []
    for first, count in LAUNCHES:
        sums = np.zeros((count, width))
        launch[count, gpu.THREADS](sums, np.int64(first), args)
        rows.append(sums.tolist())
    out[name] = rows
store = block_sums_kernel(storing, width=1, items_per_block=ITEMS_PER_BLOCK, scratch=(2, 2),
                          scratch_dtype=float64, stores=True)()
out["stores"] = []
for first, count in LAUNCHES:
    values = np.full(min(count * ITEMS_PER_BLOCK, N_ITEMS - first * ITEMS_PER_BLOCK), -1.0)
    store[count, gpu.THREADS](values, np.int64(first), (np.int64(N_ITEMS), 2.0))
    out["stores"].append(values.tolist())
print(json.dumps(out))
"""


def _expected(first: int, count: int, scales: tuple[float, ...]) -> list[list[float]]:
    rows = []
    for block in range(first, first + count):
        items = np.arange(block * ITEMS_PER_BLOCK, min((block + 1) * ITEMS_PER_BLOCK, N_ITEMS), dtype=np.int64)
        rows.append([s * float(v) for s in scales for v in (items.sum(), (items * items).sum())])
    return rows


def _run(simulated: bool) -> dict[str, list[list[list[float]]]]:
    env = child_env(simulated=simulated)
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps([ITEMS_PER_BLOCK, N_ITEMS, ROWS, LAUNCHES])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _assert_exact(kernels: dict[str, list[list[list[float]]]]) -> None:
    for name, scales in (("plain", (1.0,)), ("scratch", (1.0,)), ("rows", (1.0, 3.0))):
        assert kernels[name] == [_expected(first, count, scales) for first, count in LAUNCHES], name
    # the storing variant: every item of a launch written once, at its place (2 * item, exact in float64)
    assert kernels["stores"] == [[2.0 * i for i in range(first * ITEMS_PER_BLOCK, min((first + count) * ITEMS_PER_BLOCK,
                                                                                    N_ITEMS))]
                                 for first, count in LAUNCHES]


@pytest.mark.slow  # a child process interprets the kernels: no server, no port
@pytest.mark.timeout(120)
def test_simulated_block_sum_kernels_give_each_blocks_exact_sums() -> None:
    _assert_exact(_run(simulated=True))


@pytest.mark.gpu
@pytest.mark.timeout(120)
def test_compiled_block_sum_kernels_give_each_blocks_exact_sums() -> None:
    """The same kernels compiled for the real device: the tuple of arguments and its arrays cross the launch."""
    _assert_exact(_run(simulated=False))


def test_bad_shapes_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="width >= 1"):
        block_sums_kernel(lambda *args: (), width=0, items_per_block=256)
    with pytest.raises(ValueError, match="scratch \\(2\\) or rows \\(3\\), not both"):
        block_sums_kernel(lambda *args: (), width=1, items_per_block=256, scratch=2, rows=3)
    with pytest.raises(ValueError, match="not a multiple of 256"):
        block_sums_kernel(lambda *args: (), width=1, items_per_block=100)()
    with pytest.raises(ValueError, match="a storing kernel takes scratch and no rows"):
        block_sums_kernel(lambda *args: (), width=1, items_per_block=256, stores=True)
