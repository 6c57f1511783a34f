"""The job entry point a Dask worker runs: job type and params in, a ``JobOutput`` out.

``run_job`` is a module-level function so Dask pickles it by reference. It imports the kernel modules
(and through them numba, and CUDA only on a GPU device) when a job runs, never when this module is
imported, so the scheduler process that submits jobs never touches a GPU.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kernels.context import KernelResult, RunContext
from kernels.errors import PermanentJobError, TransientJobError
from kernels.params import PARAMS_BY_TYPE, JobParams, JobType, NoopParams
from kernels.registry import kernel_module

# A noop polls for cancellation this often (seconds): short enough that a drain or cancel feels
# immediate, long enough not to burn the worker's CPU.
NOOP_POLL_S: Final = 0.05

# Exceptions a kernel raises for a given set of params, the same at every attempt (arithmetic on values
# the protocol's bounds let through, a singular regression, a bug): the job's fault, not the
# infrastructure's, so they fail it at once (PermanentJobError) instead of being redelivered until
# dead-lettered. CUDA out-of-memory and launch timeouts are TransientJobError already (kernels.launch);
# lost workers and timeouts happen outside this process; MemoryError, OSError and CUDA driver errors are
# left as they are: another attempt, on another worker, may succeed.
DETERMINISTIC_ERRORS: Final = (ArithmeticError, ValueError, TypeError, IndexError, KeyError, AssertionError)
# The figures a result answers with, wherever they sit in a summary. Diagnostics may be infinite by right (a
# control's variance reduction when every path paid nothing is 0/0) and are not checked.
FIGURES: Final = frozenset({"estimate", "std_error", "ci_low", "ci_high", "closed_form", "var", "cvar",
                            "var_std_error", "cvar_std_error"})
# An estimate with a zero error bar may differ from the exact price by rounding only: far less than this share
# of the contract's size (the larger of spot and strike). A deep out-of-the-money option whose few paths all
# paid nothing differs from its exact price by much less.
DEGENERATE_SHARE: Final = 1e-3


@dataclass(frozen=True)
class JobOutput:
    """What a job produced. ``summary`` is JSON-safe; ``artifacts`` go to the result store."""

    summary: dict[str, Any]
    artifacts: dict[str, bytes] = field(default_factory=dict)
    device: str = "cpu"
    elapsed_s: float = 0.0  # wall time: load plus kernel
    paths: int = 0
    kernel_s: float = 0.0  # the kernel's work alone, after imports and the compile or cache load
    load_s: float = 0.0  # imports, device set-up, numba cache load or JIT compile

    @property
    def paths_per_s(self) -> float | None:
        """Paths per second of kernel time (wall time for outputs that do not say their kernel time)."""
        seconds = self.kernel_s or self.elapsed_s
        return self.paths / seconds if self.paths and seconds > 0 else None


def run_job(
    kind: JobType,
    params: JobParams,
    *,
    device: str = "auto",
    should_stop: Callable[[], bool] | None = None,
    progress: Callable[[float], None] | None = None,
) -> JobOutput:
    """Run one job to completion on ``device`` (``auto``, ``cpu``, ``gpu``; ``auto`` picks a GPU if present).

    ``params`` are ``kind``'s validated params: a request's (``runtime.protocol.messages.JobRequest``), or made
    with ``kernels.params.parse_params`` where untrusted input enters; they are not validated again.
    Raises ``JobCancelled`` when ``should_stop`` turns true, ``TransientJobError`` / ``PermanentJobError``
    for failures worth / not worth retrying: an arithmetic or value error raised by the kernel itself
    (``DETERMINISTIC_ERRORS``) is permanent.
    """
    expect_params(kind, params)
    ctx = RunContext(should_stop=should_stop or _never, progress=progress or _ignore)
    started = time.perf_counter()
    if isinstance(params, NoopParams):
        summary = _run_noop(params, ctx)
        return JobOutput(summary=summary, device="cpu", elapsed_s=time.perf_counter() - started)

    from kernels.device import resolve_device

    used = resolve_device(device)
    module = kernel_module(kind)
    with failures_of_the_job(kind):
        result = module.run(params, used, ctx)
    finished = time.perf_counter()
    ctx.progress(1.0)
    load_s = ctx.clock.load_s(started) if ctx.clock.warm_at is not None else 0.0
    return job_output(params, result, used, elapsed_s=finished - started, load_s=load_s)


@contextmanager
def failures_of_the_job(kind: JobType) -> Iterator[None]:
    """Turn ``DETERMINISTIC_ERRORS`` raised inside into a one-line ``PermanentJobError`` naming the job type."""
    try:
        yield
    except DETERMINISTIC_ERRORS as exc:
        raise PermanentJobError(f"{kind.value} cannot be computed for these params: {type(exc).__name__}: "
                                f"{_one_line(exc)}") from exc


def job_output(params: JobParams, result: KernelResult, device: str, *, elapsed_s: float, load_s: float,
               **extra: Any) -> JobOutput:
    """A kernel's result as the job's output: the summary gains timings, rate, params and ``extra``.

    Raises ``PermanentJobError`` for a summary with a NaN or infinite figure: the float32 paths overflowed or
    underflowed somewhere the params' bounds did not foresee, and the same params would do it again. (JSON has
    no NaN: the figure would have reached the client as a null estimate of a ``succeeded`` job.)
    """
    where = non_finite(result.summary)
    if where is not None:
        raise PermanentJobError(f"the result is not a number at {where}: the float32 paths overflowed or underflowed "
                                "for these params; a narrower volatility x maturity, rate x maturity or price "
                                "range avoids it")
    _refuse_degenerate(params, result.summary)
    out = JobOutput(summary={}, artifacts=result.artifacts, device=device, elapsed_s=elapsed_s,
                    paths=result.paths, kernel_s=elapsed_s - load_s, load_s=load_s)
    # the resolved params (defaults filled in, seed included) make a result reproducible from itself
    summary = {**result.summary, "device": device, "elapsed_s": out.elapsed_s, "load_s": out.load_s,
               "kernel_s": out.kernel_s, "paths_per_s": out.paths_per_s,
               "params": params.model_dump(mode="json"), **extra}
    return replace(out, summary=summary)


def _refuse_degenerate(params: JobParams, summary: dict[str, Any]) -> None:
    """Raise ``PermanentJobError`` when every path paid the same (a zero error bar) and yet the exact price the
    summary carries differs from that by more than ``DEGENERATE_SHARE`` of the contract's size: the paths did
    not sample the price's distribution (float32 saturated or flushed to zero, or its mass lies beyond every
    draw), and the estimate would read as exact."""
    estimate, error, exact = (summary.get(key) for key in ("estimate", "std_error", "closed_form"))
    if not all(isinstance(v, numbers.Real) for v in (estimate, error, exact)) or error != 0:
        return
    scale = max(getattr(params, "spot", 1.0), getattr(params, "strike", 1.0))
    if abs(estimate - exact) > DEGENERATE_SHARE * scale:
        raise PermanentJobError(f"every path paid {estimate:.6g} (a zero error bar) where the exact price is "
                                f"{exact:.6g}: the float32 paths cannot represent these params; a narrower "
                                "volatility x maturity, rate x maturity or price range avoids it")


def non_finite(value: Any, path: str = "") -> str | None:
    """The dotted path of the first NaN or infinite figure (``FIGURES``) in ``value``, dicts and lists walked
    (a contract of a book, a Greek), or None."""
    if isinstance(value, numbers.Real):  # NumPy's floats too
        name = path.rsplit(".", 1)[-1]
        return None if name not in FIGURES or math.isfinite(value) else path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list | tuple) else ()
    for key, item in items:
        found = non_finite(item, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def expect_params(kind: JobType, params: JobParams) -> None:
    """Raise ``TypeError`` unless ``kind`` is a ``JobType`` and ``params`` its params model: a caller's mistake,
    caught before a kernel reads the wrong fields (validation itself happened where the request entered)."""
    if not isinstance(kind, JobType):
        raise TypeError(f"a job's type must be a JobType, not {type(kind).__name__} {kind!r}: parse untrusted "
                        "input once where it enters (kernels.params.JobType, parse_params)")
    model = PARAMS_BY_TYPE[kind]
    if not isinstance(params, model):
        raise TypeError(f"{kind.value} jobs take {model.__name__}, not {type(params).__name__}: parse untrusted "
                        "params once where they enter (kernels.params.parse_params)")


def _run_noop(params: NoopParams, ctx: RunContext) -> dict[str, Any]:
    deadline = time.monotonic() + params.sleep_s
    while (left := deadline - time.monotonic()) > 0:
        ctx.checkpoint(1.0 - left / params.sleep_s)
        time.sleep(min(NOOP_POLL_S, left))
    ctx.checkpoint(1.0)
    if params.fail == "transient":
        raise TransientJobError("simulated transient failure (noop drill)")
    if params.fail == "permanent":
        raise PermanentJobError("simulated permanent failure (noop drill)")
    return {"slept_s": params.sleep_s}


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else "(no message)"


def _never() -> bool:
    return False


def _ignore(_: float) -> None:
    return None
