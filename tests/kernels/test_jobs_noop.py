"""The entry point with the drill job: validation, failures, cancellation, progress."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from kernels.errors import JobCancelled, PermanentJobError, TransientJobError
from kernels.jobs import run_job
from kernels.params import EuropeanOptionParams, JobType, NoopParams
from tests.kernels.job_input import run_raw


def test_noop_returns_immediately_on_cpu() -> None:
    out = run_raw("noop", {})
    assert out.device == "cpu"
    assert out.summary == {"slept_s": 0.0}
    assert out.artifacts == {}


@pytest.mark.parametrize(("fail", "error"), [("transient", TransientJobError), ("permanent", PermanentJobError)])
def test_noop_simulated_failures_raise_their_kind(fail: str, error: type[Exception]) -> None:
    with pytest.raises(error, match="simulated"):
        run_raw("noop", {"fail": fail})


def test_noop_sleeps_reporting_progress() -> None:
    seen: list[float] = []
    started = time.monotonic()
    run_raw("noop", {"sleep_s": 0.3}, progress=seen.append)
    assert time.monotonic() - started >= 0.3
    assert seen == sorted(seen)
    assert seen[-1] == 1.0 and len(seen) >= 3


@pytest.mark.timeout(10)
def test_noop_stops_soon_after_cancel() -> None:
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(JobCancelled):
        run_raw("noop", {"sleep_s": 60}, should_stop=cancel.is_set)
    assert time.monotonic() - started < 2.0


def test_invalid_params_and_type_are_value_errors() -> None:
    with pytest.raises(ValueError, match="sleep_s"):
        run_raw("noop", {"sleep_s": -1})
    with pytest.raises(ValueError):
        run_raw("teleport", {})


@pytest.mark.parametrize("params", [{"sleep_s": 0}, None, EuropeanOptionParams()])
def test_the_entry_point_takes_only_the_types_own_validated_params(params: object) -> None:
    """Params are validated once, where a request enters; a mapping or another type's model is a caller's bug."""
    with pytest.raises(TypeError, match="noop jobs take NoopParams, not"):
        run_job(JobType.NOOP, params, device="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="a job's type must be a JobType, not str 'noop'"):
        run_job("noop", NoopParams(), device="cpu")  # type: ignore[arg-type]
    assert run_job(JobType.NOOP, NoopParams(), device="cpu").summary == {"slept_s": 0.0}


def test_run_job_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(run_job)) is run_job


def test_importing_the_entry_point_loads_neither_numba_nor_cuda() -> None:
    import subprocess
    import sys

    code = "import sys, kernels.jobs; print(sorted(m for m in sys.modules if m.startswith(('numba', 'cupy'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"
