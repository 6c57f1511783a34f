"""The client against the real local platform: futures, typed failures, results as data, and its subscription.

Prices and Greeks are checked against QuantLib's Black-Scholes formulas and the delta-normal VaR closed
form, never against the platform's own output. Jobs are small: the machine running the suite is shared.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from google.api_core.exceptions import NotFound
from pydantic import ValidationError

from gpurt.bench.cache import timed_runs
from gpurt.client import (
    Client,
    ClientClosed,
    ClientError,
    Contract,
    EuropeanOption,
    JobCancelled,
    JobFailed,
    JobRejected,
    JobTimeout,
    Noop,
    OptionBook,
    PortfolioVaR,
    as_completed,
    gather,
    session,
    to_frame,
    wait,
)
from gpurt.client.session import SUBSCRIPTION_PREFIX
from kernels.params import NoopParams
from runtime.access.target import Target, resolve_target
from runtime.access.transport import TEMP_SUBSCRIPTION_TTL_S
from runtime.local import LocalPlatform
from runtime.protocol.contract import RESULT_TOPIC
from runtime.protocol.messages import JobRequest, JobResult, JobStatus, JobType
from runtime.protocol.queues import request_topic
from tests.gpurt.client import ON_THE_CLIENT_PLATFORM

if TYPE_CHECKING:
    import QuantLib as ql

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300), ON_THE_CLIENT_PLATFORM]

# Generous: the first option job loads the kernels on a loaded two-core machine.
RESULT_TIMEOUT_S = 150.0
PATHS = 20_000
# Monte Carlo estimates lie within this many standard errors of the exact value (a 1-in-1.7-million miss).
TOLERANCE_SE = 5.0


@pytest.fixture
def client(platform_env: LocalPlatform) -> Iterator[Client]:
    with Client() as opened:
        yield opened


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _black_scholes(spot: float, strike: float, rate: float, vol: float, years: float,
                   call: bool = True) -> ql.BlackCalculator:
    import QuantLib as ql  # the reference, 0.3 s to import: only where a test prices against it

    forward = spot * math.exp(rate * years)
    payoff = ql.PlainVanillaPayoff(ql.Option.Call if call else ql.Option.Put, strike)
    return ql.BlackCalculator(payoff, forward, vol * math.sqrt(years), math.exp(-rate * years))


def test_a_european_option_with_greeks_matches_black_scholes(client: Client) -> None:
    job = EuropeanOption(spot=100, strike=105, rate=0.05, volatility=0.2, maturity=1.0, paths=PATHS, seed=11,
                         greeks=["delta", "vega"])
    result = client.submit(job).result(timeout=RESULT_TIMEOUT_S)
    exact = _black_scholes(100, 105, 0.05, 0.2, 1.0)
    assert abs(result.estimate - exact.value()) < TOLERANCE_SE * result.std_error
    assert result.interval[0] < result.estimate < result.interval[1]
    assert abs(result.greeks["delta"].estimate - exact.delta(100.0)) < TOLERANCE_SE * result.greeks["delta"].std_error
    assert abs(result.greeks["vega"].estimate - exact.vega(1.0)) < TOLERANCE_SE * result.greeks["vega"].std_error
    assert result.greeks["delta"].method
    assert result.seed == 11 and result.params["strike"] == 105
    assert result.timings["run_s"] is not None and result.timings["kernel_s"] is not None
    row = result.to_frame().iloc[0]
    assert row["estimate"] == result.estimate and row["delta"] == result.greeks["delta"].estimate
    assert "delta_std_error" in row and "vega" in row


def test_a_books_frame_has_one_row_per_contract_with_greeks_as_columns(client: Client) -> None:
    contracts = [Contract(strike=90, maturity=0.5), Contract(strike=100, maturity=1.0),
                 Contract(strike=110, maturity=1.0, kind="put")]
    book = OptionBook(contracts, volatility=0.25, steps_per_year=4, paths=PATHS, greeks=["delta"])
    frame = client.submit(book).result(timeout=RESULT_TIMEOUT_S).to_frame()
    assert list(frame["strike"]) == [90, 100, 110] and list(frame["kind"]) == ["call", "call", "put"]
    for contract, (_, row) in zip(contracts, frame.iterrows(), strict=True):
        exact = _black_scholes(100, contract.strike, 0.05, 0.25, contract.maturity, contract.kind == "call")
        assert abs(row["estimate"] - exact.value()) < TOLERANCE_SE * row["std_error"]
        assert abs(row["delta"] - exact.delta(100.0)) < TOLERANCE_SE * row["delta_std_error"]


def test_var_and_its_loss_quantiles_match_the_delta_normal_closed_form(client: Client) -> None:
    exposures, vols, horizon = np.array([1e6, 2e6]), np.array([0.2, 0.3]), 10.0
    job = PortfolioVaR(exposures=list(exposures), volatilities=list(vols), horizon_days=horizon, paths=PATHS)
    result = client.submit(job).result(timeout=RESULT_TIMEOUT_S)
    sigma = math.sqrt(float(np.sum((exposures * vols * math.sqrt(horizon / 252)) ** 2)))  # independent assets
    assert abs(result["var"] - NormalDist().inv_cdf(0.99) * sigma) < TOLERANCE_SE * result["var_std_error"]
    quantiles = result.loss_quantiles()
    assert quantiles[990] == pytest.approx(result["var"])  # the artifact's 99% point is the reported VaR


def test_many_jobs_gather_in_order_with_a_progress_bar(client: Client, capsys: pytest.CaptureFixture[str]) -> None:
    futures = client.map([Noop()] * 12)
    results = gather(futures, timeout=RESULT_TIMEOUT_S, progress=True)
    assert [r.job_id for r in results] == [f.job_id for f in futures]
    assert all(r.status is JobStatus.SUCCEEDED for r in results)
    assert "12/12" in capsys.readouterr().err
    assert sorted(f.job_id for f in as_completed(futures, timeout=5)) == sorted(f.job_id for f in futures)
    assert len(to_frame(futures)) == 12


def test_a_rejected_and_a_failed_job_raise_typed_errors_with_the_platforms_message(client: Client) -> None:
    # A request this protocol version would refuse locally, sent as an older or newer client might.
    stale = JobRequest.model_construct(job_id=_id("stale"), type=JobType.NOOP,
                                       params=NoopParams.model_construct(sleep_s=-1.0), session_id=None,
                                       timeout_s=60.0)
    rejected, failed, fine = client.submit(stale), client.submit(Noop(fail="permanent")), client.submit(Noop())
    with pytest.raises(JobRejected, match="sleep_s") as caught:
        rejected.result(timeout=RESULT_TIMEOUT_S)
    assert caught.value.job_id == stale.job_id and caught.value.kind == "invalid"
    with pytest.raises(JobFailed, match="permanent") as failure:
        failed.result(timeout=RESULT_TIMEOUT_S)
    assert isinstance(failed.exception(), JobFailed) and failure.value.job_id == failed.job_id
    outcomes = gather([rejected, failed, fine], timeout=RESULT_TIMEOUT_S, return_exceptions=True)
    assert [type(o).__name__ for o in outcomes] == ["JobRejected", "JobFailed", "Result"]
    with pytest.raises(JobRejected):
        gather([fine, rejected], timeout=RESULT_TIMEOUT_S)


def test_cancel_stops_a_running_job_and_its_future_ends_cancelled(client: Client) -> None:
    future = client.submit(Noop(sleep_s=60))
    assert future.cancel() is True
    with pytest.raises(JobCancelled):
        future.result(timeout=RESULT_TIMEOUT_S)
    assert future.cancelled() and future.cancel() is False


def test_a_timeout_names_the_pending_jobs_and_leaves_them_running(client: Client) -> None:
    slow = client.submit(Noop(sleep_s=3))
    with pytest.raises(JobTimeout, match=slow.job_id) as caught:
        slow.result(timeout=0.2)
    assert caught.value.pending == [slow.job_id]
    quick = client.submit(Noop())
    with pytest.raises(JobTimeout) as many:
        gather([quick, slow, client.submit(Noop(sleep_s=3))], timeout=0.5)
    assert slow.job_id in many.value.pending and slow.job_id in str(many.value)
    done, not_done = wait([slow], timeout=RESULT_TIMEOUT_S)
    assert done == {slow} and not not_done
    assert slow.result(timeout=0).status is JobStatus.SUCCEEDED


@contextlib.contextmanager
def _ctrl_c_once_waiting(function: str) -> Iterator[None]:
    """Send the main thread SIGINT (Ctrl-C) once it is blocked inside ``function``, never before, and never
    after the block ends.

    A timer that fires after a fixed delay races the main thread on a loaded machine: a SIGINT that lands
    before the wait begins, or after it, interrupts the test run itself, and on an xdist worker that stops
    every worker's run. Polling the main thread's stack makes the interrupt hit the wait under test.

    Python's own handler is installed for the block. Python keeps SIGINT ignored when it starts with it
    ignored, which is how a shell without job control starts a command run in the background (``make test &``
    in a script): there the signal did nothing and the wait ran to its result. The signal goes to the main
    thread itself (``pthread_kill``), whose wait it must interrupt, not to whichever thread of this busy
    process the kernel would pick."""
    main = threading.main_thread()
    done = threading.Event()

    def interrupt_when_waiting() -> None:
        while not done.wait(0.01):
            frame = sys._current_frames().get(main.ident or -1)
            names = []
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            # Inside ``function`` and blocked in its condition's wait (threading's ``wait`` innermost).
            if function in names and names[0] == "wait":
                signal.pthread_kill(main.ident or 0, signal.SIGINT)
                return

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=interrupt_when_waiting, name="ctrl-c", daemon=True)
    sender.start()
    try:
        yield
    finally:
        done.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_interrupts_the_wait_not_the_job(client: Client) -> None:
    future = client.submit(Noop(sleep_s=3))
    with pytest.raises(KeyboardInterrupt) as caught, _ctrl_c_once_waiting("_wait"):
        future.result(timeout=RESULT_TIMEOUT_S)
    assert "go on running" in " ".join(getattr(caught.value, "__notes__", []))
    assert future.result(timeout=RESULT_TIMEOUT_S).status is JobStatus.SUCCEEDED


def test_futures_can_be_awaited(client: Client) -> None:
    async def main() -> list[JobStatus]:
        direct = await client.submit_async(Noop())
        awaited = await asyncio.gather(client.submit(Noop()), client.submit(Noop()))
        return [direct.status, *(r.status for r in awaited)]

    assert asyncio.run(asyncio.wait_for(main(), RESULT_TIMEOUT_S)) == [JobStatus.SUCCEEDED] * 3


def test_an_id_is_answered_once_and_then_from_the_store(platform_env: LocalPlatform) -> None:
    job_id = _id("same")
    with Client() as first:
        future = first.submit(Noop(), job_id=job_id)
        assert first.submit(Noop(), job_id=job_id) is future  # no second publish
        original = future.result(timeout=RESULT_TIMEOUT_S)
    with Client() as second:
        again = second.submit(Noop(), job_id=job_id).result(timeout=RESULT_TIMEOUT_S)
    # another computation under the finished id is a conflict, never the stored result under its digest (a client
    # of its own: one client hands back its own future for an id it already submitted)
    with Client() as third, pytest.raises(JobRejected) as conflict:
        third.submit(Noop(sleep_s=30), job_id=job_id).result(timeout=RESULT_TIMEOUT_S)
    assert again.raw.finished_at == original.raw.finished_at  # the stored result, not a second run
    assert conflict.value.kind == "conflict"


def test_results_reach_other_readers_too(platform: LocalPlatform, client: Client) -> None:
    clients = platform.pubsub()
    other = clients.subscription(_id("other-reader"))
    clients.subscriber.create_subscription(request={"name": other, "topic": clients.topic(RESULT_TOPIC)})
    try:
        job_id = client.submit(Noop()).result(timeout=RESULT_TIMEOUT_S).job_id
        seen: set[str] = set()
        for _ in range(20):
            answer = clients.subscriber.pull(request={"subscription": other, "max_messages": 100}, timeout=10)
            seen |= {m.message.attributes.get("job_id", "") for m in answer.received_messages}
            if job_id in seen:
                break
        assert job_id in seen
    finally:
        clients.subscriber.delete_subscription(request={"subscription": other})
        clients.close()


def test_close_deletes_the_subscription_and_ends_the_clients_work(platform: LocalPlatform,
                                                                  platform_env: LocalPlatform) -> None:
    clients = platform.pubsub()
    try:
        opened = Client()
        name = opened.subscription
        assert name.rsplit("/", 1)[1].startswith(SUBSCRIPTION_PREFIX)
        live = clients.subscriber.get_subscription(request={"subscription": name})
        assert live.expiration_policy.ttl.total_seconds() == TEMP_SUBSCRIPTION_TTL_S  # gone if we die
        pending = opened.submit(Noop(sleep_s=5))
        opened.close()
        with pytest.raises(NotFound):
            clients.subscriber.get_subscription(request={"subscription": name})
        with pytest.raises(ClientClosed, match="may still finish"):
            pending.result(timeout=RESULT_TIMEOUT_S)
        with pytest.raises(ClientClosed, match="closed"):
            opened.submit(Noop())
    finally:
        clients.close()


def test_what_is_not_a_job_is_refused_before_publishing(client: Client) -> None:
    with pytest.raises(TypeError, match="not dict"):
        client.submit({"type": "noop"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="job_ids has 1 ids for 2 jobs"):
        client.map([Noop(), Noop()], job_ids=["only-one"])
    with pytest.raises(ValidationError, match="job_id"):
        client.submit(Noop(), job_id="not a valid id!")


def test_a_reopened_session_lists_and_collects_what_it_submitted_before(platform_env: LocalPlatform) -> None:
    session = _id("desk")
    with Client(session_id=session) as first:
        fine, failing = first.map([Noop(), Noop(fail="permanent")])
        wait([fine, failing], timeout=RESULT_TIMEOUT_S)
    kept = [fine.job_id, failing.job_id]
    with Client(session_id=session) as reopened, Client() as stranger:
        assert reopened.jobs() == {fine.job_id: "succeeded", failing.job_id: "failed"}
        assert reopened.collect() == []  # it sent nothing itself
        by_ids, whole = reopened.collect(kept), reopened.collect(session_id=session)
        assert [r.job_id for r in by_ids] == [r.job_id for r in whole] == sorted(kept)
        assert {r.raw.session_id for r in whole} == {session}
        assert stranger.jobs() == {} and stranger.jobs(session) == reopened.jobs()
        with pytest.raises(TypeError, match="list of job ids"):
            reopened.collect(fine.job_id)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="not both"):
            reopened.collect(kept, session_id=session)


def test_collect_returns_this_clients_own_results_not_a_row_another_publisher_put_in_its_session(
        platform: LocalPlatform, platform_env: LocalPlatform) -> None:
    # issue #35: one publish with a victim's session id put an attacker's row into the victim's collect()
    from runtime.access.transport import ResultCollector, publish_request

    session = _id("desk-2026-11-25")
    intruder = _id("noop")
    clients = platform.pubsub()
    try:
        with Client(session_id=session) as victim, ResultCollector(clients) as spy:
            own = victim.submit(Noop())
            publish_request(clients, json.dumps({"job_id": intruder, "type": "noop", "session_id": session}).encode())
            own.result(timeout=RESULT_TIMEOUT_S)
            assert spy.wait({intruder}, RESULT_TIMEOUT_S)[intruder].status is JobStatus.SUCCEEDED
            assert intruder in victim.jobs()  # the label is anyone's to use: the listing shows it
            assert [r.job_id for r in victim.collect()] == [own.job_id]
            assert [r.job_id for r in victim.collect([own.job_id, "never-submitted"])] == [own.job_id]
            assert sorted(r.job_id for r in victim.collect(session_id=session)) == sorted([own.job_id, intruder])
    finally:
        clients.close()


def test_a_forged_result_and_a_bogus_request_under_its_id_leave_a_future_to_its_own_result(
        platform: LocalPlatform, client: Client) -> None:
    # issue #35: {"job_id": <victim's id>, "type": "bogus"} made the victim's future raise JobRejected, and a
    # JobResult published straight to gpu-job-result completed it (estimate 42)
    from runtime.access.transport import ResultCollector, publish_request

    future = client.submit(Noop(sleep_s=3))
    victim = future.job_id
    clients = platform.pubsub()
    try:
        with ResultCollector(clients) as spy:
            publish_request(clients, json.dumps({"job_id": victim, "type": "bogus"}).encode())
            forged = JobResult(job_id=victim, status=JobStatus.SUCCEEDED, result={"estimate": 42.0},
                               request_digest="0" * 64)
            clients.publisher.publish(clients.topic(RESULT_TOPIC), forged.model_dump_json().encode(),
                                      job_id=victim, status="succeeded").result(timeout=30)
            # both reached every reader of results (the client's subscription too) while the job still runs
            spy.wait(set(), 1.0)
            assert spy.wait({victim}, RESULT_TIMEOUT_S)[victim].status in (JobStatus.REJECTED, JobStatus.SUCCEEDED)
            assert not future.done()
        result = future.result(timeout=RESULT_TIMEOUT_S)
    finally:
        clients.close()
    assert result.status is JobStatus.SUCCEEDED and result.raw.request_digest == future.digest
    assert (result.raw.result or {}).get("estimate") != 42.0
    assert client.jobs()[victim] == "succeeded"


def test_a_repeat_is_answered_from_the_result_cache_and_cache_false_runs_again(client: Client) -> None:
    """docs/python-api.md, "Cached results": the same numbers, marked cached, and no run on a Dask worker."""
    job = EuropeanOption(spot=100, strike=97, rate=0.03, volatility=0.25, maturity=0.5, paths=PATHS, seed=4513)
    first = client.submit(job).result(timeout=RESULT_TIMEOUT_S)
    runs = timed_runs(client.target.api_url, "european_option")  # the scheduler's timed runs: a hit is none
    again = client.submit(job).result(timeout=RESULT_TIMEOUT_S)
    assert again.cached and again.cached_from == first.job_id and not first.cached
    assert again.job_id != first.job_id and json.dumps(again.summary) == json.dumps(first.summary)
    assert again.timings["run_s"] is None and timed_runs(client.target.api_url, "european_option") == runs
    fresh = client.submit(job, cache=False).result(timeout=RESULT_TIMEOUT_S)
    assert not fresh.cached and fresh.cached_from is None
    assert timed_runs(client.target.api_url, "european_option") == runs + 1



def test_a_desk_client_publishes_to_its_queue_with_its_own_token_and_reads_results_as_a_user(
        platform: LocalPlatform, platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    desk = "rates-desk"
    clients = platform.pubsub()
    topic, tap = clients.topic(request_topic(desk)), clients.subscription(_id("desk-tap"))
    clients.publisher.create_topic(request={"name": topic})
    clients.subscriber.create_subscription(request={"name": tap, "topic": topic})
    # The local state's desk tokens (Target.emulator_queue_tokens), as a platform running desk queues hands them
    # out: here the operator's, the one token that may publish to a topic the test made.
    operator = platform.running_state().broker_token
    assert operator is not None

    def with_desk_token(**kwargs: Any) -> Target:
        return dataclasses.replace(resolve_target(**kwargs), emulator_queue_tokens={desk: operator})

    monkeypatch.setattr(session, "resolve_target", with_desk_token)
    try:
        with Client(queue=desk) as opened:
            future = opened.submit(Noop(), job_id=_id("desk"))
            assert future.message_id
            # The user's token opened the result subscription: the desk token is the publisher's alone.
            assert opened.subscription.rsplit("/", 1)[1].startswith(SUBSCRIPTION_PREFIX)
            answer = clients.subscriber.pull(request={"subscription": tap, "max_messages": 10}, timeout=10)
            published = [JobRequest.model_validate_json(m.message.data) for m in answer.received_messages]
            assert [(r.job_id, m.message.message_id) for r, m in zip(published, answer.received_messages,
                                                                      strict=True)] == [(future.job_id,
                                                                                         future.message_id)]
    finally:
        clients.subscriber.delete_subscription(request={"subscription": tap})
        clients.publisher.delete_topic(request={"topic": topic})
        clients.close()


def test_a_queue_the_platform_does_not_declare_is_a_clear_error_that_names_it(
        platform: LocalPlatform, platform_env: LocalPlatform, monkeypatch: pytest.MonkeyPatch) -> None:
    # With a token that may publish anywhere, what is left is the broker's NOT_FOUND for the topic no queue has.
    operator = platform.running_state().broker_token
    assert operator is not None

    def with_desk_token(**kwargs: Any) -> Target:
        return dataclasses.replace(resolve_target(**kwargs), emulator_queue_tokens={"ghost-desk": operator})

    monkeypatch.setattr(session, "resolve_target", with_desk_token)
    with Client(queue="ghost-desk") as ghost, pytest.raises(ClientError) as caught:
        ghost.submit(Noop())
    message = str(caught.value)
    assert "queue ghost-desk (topic gpu-job-request-ghost-desk)" in message and "declares no such queue" in message


def test_a_queue_the_user_may_not_publish_to_is_a_clear_error_that_names_it(client: Client,
                                                                            platform_env: LocalPlatform) -> None:
    with Client(queue="rates-desk") as desk, pytest.raises(ClientError) as caught:
        desk.submit(Noop())
    message = str(caught.value)
    assert "queue rates-desk (topic gpu-job-request-rates-desk)" in message and "not allowed" in message
