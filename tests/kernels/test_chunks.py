"""The chunk driver: order-independent sums, cancellation, progress, out-of-memory retry, chunk scale."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.chunks import is_launch_timeout, is_out_of_memory, run_blocks
from kernels.context import RunContext
from kernels.errors import JobCancelled, TransientJobError


class OutOfMemoryError(Exception):
    """Named like cupy's allocator error, which is how the driver recognises it."""


class CudaAPIError(Exception):
    """Shaped like numba's driver error: a CUresult code and a message."""

    def __init__(self, code: int, msg: str) -> None:
        super().__init__(code, msg)
        self.code = code


ROWS = np.random.default_rng(0).standard_normal((97, 3)) * 1e3


def _rows(start: int, count: int) -> np.ndarray:
    return ROWS[start:start + count]


def _ctx(seen: list[float] | None = None, stop_after: int | None = None) -> RunContext:
    calls = {"n": 0}

    def should_stop() -> bool:
        calls["n"] += 1
        return stop_after is not None and calls["n"] > stop_after

    return RunContext(should_stop=should_stop, progress=(seen.append if seen is not None else lambda _: None))


def test_total_is_bitwise_independent_of_chunk_size() -> None:
    totals = {chunk: run_blocks(len(ROWS), 3, chunk, _rows, _ctx()).tobytes() for chunk in (1, 7, 32, 97, 500)}
    assert len(set(totals.values())) == 1
    assert np.allclose(np.frombuffer(totals[1]), ROWS.sum(axis=0))


def test_progress_rises_to_one() -> None:
    seen: list[float] = []
    run_blocks(len(ROWS), 3, 10, _rows, _ctx(seen))
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen) and len(seen) == 11


def test_stop_between_chunks_cancels() -> None:
    computed: list[int] = []

    def compute(start: int, count: int) -> np.ndarray:
        computed.append(start)
        return _rows(start, count)

    with pytest.raises(JobCancelled):
        run_blocks(len(ROWS), 3, 10, compute, _ctx(stop_after=3))
    assert computed == [0, 10, 20]


def test_out_of_memory_halves_the_chunk_and_keeps_the_result() -> None:
    sizes: list[int] = []
    freed: list[bool] = []

    def compute(start: int, count: int) -> np.ndarray:
        sizes.append(count)
        if count > 12:
            raise OutOfMemoryError("out of memory allocating 1 GB")
        return _rows(start, count)

    total = run_blocks(len(ROWS), 3, 64, compute, _ctx(), on_oom=lambda: freed.append(True))
    assert sizes[:4] == [64, 32, 16, 8]
    assert freed == [True, True, True]
    assert total.tobytes() == run_blocks(len(ROWS), 3, 1, _rows, _ctx()).tobytes()


def test_out_of_memory_at_one_block_is_transient() -> None:
    def compute(start: int, count: int) -> np.ndarray:
        raise CudaAPIError(2, "CUDA_ERROR_OUT_OF_MEMORY")

    with pytest.raises(TransientJobError, match="out of memory"):
        run_blocks(4, 3, 4, compute, _ctx())


def test_other_errors_pass_through_untouched() -> None:
    def compute(start: int, count: int) -> np.ndarray:
        raise CudaAPIError(700, "CUDA_ERROR_ILLEGAL_ADDRESS")

    with pytest.raises(CudaAPIError):
        run_blocks(4, 3, 4, compute, _ctx())


@pytest.mark.parametrize(
    ("exc", "expected"),
    [(OutOfMemoryError("x"), True), (CudaAPIError(2, "x"), True), (CudaAPIError(1, "x"), False),
     (MemoryError("host"), False), (ValueError("x"), False)],
)
def test_out_of_memory_recognition(exc: Exception, expected: bool) -> None:
    assert is_out_of_memory(exc) is expected


def test_chunk_scale_launches_smaller_chunks_with_the_same_total() -> None:
    sizes: list[int] = []

    def compute(start: int, count: int) -> np.ndarray:
        sizes.append(count)
        return _rows(start, count)

    scaled = RunContext(should_stop=lambda: False, progress=lambda _: None, chunk_scale=0.25)
    total = run_blocks(len(ROWS), 3, 40, compute, scaled)
    assert set(sizes[:-1]) == {10} and sum(sizes) == len(ROWS)
    assert total.tobytes() == run_blocks(len(ROWS), 3, 40, _rows, _ctx()).tobytes()
    # a pass of a multi-pass job keeps the scale
    assert scaled.part(0.0, 0.5).chunk_scale == 0.25


@pytest.mark.parametrize("scale", [0.0, -0.5, 1.5])
def test_chunk_scale_outside_zero_to_one_is_refused(scale: float) -> None:
    with pytest.raises(ValueError, match="chunk_scale"):
        RunContext(should_stop=lambda: False, progress=lambda _: None, chunk_scale=scale)


def test_a_launch_timeout_is_transient_and_not_retried_in_place() -> None:
    sizes: list[int] = []

    def compute(start: int, count: int) -> np.ndarray:
        sizes.append(count)
        raise CudaAPIError(702, "CUDA_ERROR_LAUNCH_TIMEOUT")

    with pytest.raises(TransientJobError, match="watchdog"):
        run_blocks(len(ROWS), 3, 64, compute, _ctx())
    assert sizes == [64]  # the CUDA context is lost: no second launch in this process


@pytest.mark.parametrize(("exc", "expected"), [(CudaAPIError(702, "x"), True), (CudaAPIError(2, "x"), False),
                                               (TimeoutError("x"), False)])
def test_launch_timeout_recognition(exc: Exception, expected: bool) -> None:
    assert is_launch_timeout(exc) is expected
