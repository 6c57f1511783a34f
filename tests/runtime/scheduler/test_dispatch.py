"""SlotScheduler: one thread per slot, nothing handed back to nack, a drain that holds acks until quiet."""

from __future__ import annotations

import math
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from unittest import mock

import pytest
from google.cloud.pubsub_v1.subscriber.message import Message
from google.cloud.pubsub_v1.subscriber.scheduler import ThreadScheduler

from runtime.scheduler import dispatch
from runtime.scheduler.dispatch import RequestQueue, SlotScheduler
from runtime.scheduler.records import Decision, Settle
from tests.runtime.scheduler.platform import wait_for

RELEASE_TIMEOUT_S = 10.0


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "QUIET_GRACE_S", 0.05)


def _message() -> mock.Mock:
    return mock.create_autospec(Message, instance=True, data=b"{}")


class _Gate:
    """A callback whose first call blocks until released, so later messages wait for the slot."""

    def __init__(self, settle: SlotScheduler | None = None) -> None:
        self.ran: list[mock.Mock] = []
        self.started = threading.Event()
        self.release = threading.Event()
        self._settle = settle

    def __call__(self, message: mock.Mock) -> None:
        if not self.ran:
            self.started.set()
            assert self.release.wait(RELEASE_TIMEOUT_S)
        self.ran.append(message)
        if self._settle is not None:
            self._settle.settle(message, ack=True)


def _close_in_background(scheduler) -> tuple[threading.Thread, list]:  # type: ignore[no-untyped-def]
    dropped: list = []
    closer = threading.Thread(target=lambda: dropped.extend(scheduler.shutdown(await_msg_callbacks=True)))
    closer.start()
    return closer, dropped


def _shutdown_while_busy(scheduler, callback: _Gate, waiting: list[mock.Mock]) -> list:  # type: ignore[no-untyped-def]
    """Schedule a blocking message and ``waiting`` behind it, close like the client does, then release."""
    scheduler.schedule(callback, _message())
    assert callback.started.wait(RELEASE_TIMEOUT_S)
    for message in waiting:
        scheduler.schedule(callback, message)
    closer, dropped = _close_in_background(scheduler)
    callback.release.set()
    closer.join(RELEASE_TIMEOUT_S)
    assert not closer.is_alive()
    for message in dropped:  # what StreamingPullManager._shutdown does with them
        message.nack()
    return dropped


def test_a_closing_stream_runs_messages_waiting_for_a_slot_instead_of_nacking_them() -> None:
    callback, waiting = _Gate(), [_message(), _message()]
    assert _shutdown_while_busy(SlotScheduler(1), callback, waiting) == []
    assert callback.ran[1:] == waiting
    for message in waiting:
        message.nack.assert_not_called()


def test_the_client_default_scheduler_would_nack_them() -> None:
    callback, waiting = _Gate(), [_message()]
    dropped = _shutdown_while_busy(ThreadScheduler(ThreadPoolExecutor(max_workers=1)), callback, waiting)
    assert dropped == waiting
    waiting[0].nack.assert_called_once_with()


def test_waiting_messages_run_in_arrival_order() -> None:
    callback, waiting = _Gate(), [_message() for _ in range(4)]
    _shutdown_while_busy(SlotScheduler(1), callback, waiting)
    assert callback.ran[1:] == waiting


def test_without_awaiting_the_waiting_messages_are_handed_back() -> None:
    callback, scheduler = _Gate(), SlotScheduler(1)
    scheduler.schedule(callback, _message())
    assert callback.started.wait(RELEASE_TIMEOUT_S)
    waiting = _message()
    scheduler.schedule(callback, waiting)
    assert scheduler.shutdown(await_msg_callbacks=False) == [waiting]
    callback.release.set()
    wait_for(lambda: len(callback.ran) == 1, RELEASE_TIMEOUT_S, "the running callback to finish")
    assert waiting not in callback.ran


def test_waiting_counts_the_messages_no_slot_has_taken_yet() -> None:
    callback, scheduler = _Gate(), SlotScheduler(1)
    scheduler.schedule(callback, _message())
    assert callback.started.wait(RELEASE_TIMEOUT_S)
    assert scheduler.waiting == 0  # the running one is not waiting
    for _ in range(2):
        scheduler.schedule(callback, _message())
    assert scheduler.waiting == 2
    callback.release.set()
    wait_for(lambda: len(callback.ran) == 3, RELEASE_TIMEOUT_S, "the waiting messages to run")
    assert scheduler.waiting == 0
    assert scheduler.shutdown(await_msg_callbacks=True) == []


def test_slots_run_in_parallel() -> None:
    barrier = threading.Barrier(3, timeout=RELEASE_TIMEOUT_S)
    scheduler = SlotScheduler(3)
    for _ in range(3):
        scheduler.schedule(lambda message: barrier.wait(), _message())  # only passes if all three run at once
    assert scheduler.shutdown(await_msg_callbacks=True) == []
    assert not barrier.broken


def test_settle_acks_or_nacks_at_once_outside_a_drain() -> None:
    scheduler = SlotScheduler(1)
    done, failed = _message(), _message()
    scheduler.settle(done, ack=True)
    scheduler.settle(failed, ack=False)
    done.ack.assert_called_once_with()
    failed.nack.assert_called_once_with()
    done.drop.assert_not_called()
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_draining_stream_parks_acks_until_it_closes_and_frees_their_places_meanwhile() -> None:
    scheduler = SlotScheduler(2)
    scheduler.hold()
    first, second = _message(), _message()
    scheduler.schedule(lambda m: scheduler.settle(m, ack=True), first)
    wait_for(lambda: first.drop.called, RELEASE_TIMEOUT_S, "the first message to free its place")
    first.ack.assert_not_called()  # no ack: the server frees no place and sends nothing new
    scheduler.schedule(lambda m: scheduler.settle(m, ack=False), second)
    wait_for(lambda: second.drop.called, RELEASE_TIMEOUT_S, "the second message to park")
    scheduler.wait_quiet(threading.Event())  # both parked, nothing for the dispatcher: quiet
    closer, dropped = _close_in_background(scheduler)
    closer.join(RELEASE_TIMEOUT_S)
    assert dropped == []
    first.ack.assert_called_once_with()
    second.nack.assert_called_once_with()


def _quiet_in_background(scheduler: SlotScheduler) -> threading.Event:
    quiet = threading.Event()
    threading.Thread(target=lambda: (scheduler.wait_quiet(threading.Event()), quiet.set()), daemon=True).start()
    return quiet


def _busy(scheduler: SlotScheduler, jobs: int) -> tuple[threading.Event, list[mock.Mock]]:
    release, messages = threading.Event(), [_message() for _ in range(jobs)]

    def job(message: mock.Mock) -> None:
        assert release.wait(RELEASE_TIMEOUT_S)
        scheduler.settle(message, ack=True)

    for message in messages:
        scheduler.schedule(job, message)
    return release, messages


def test_a_drain_waits_while_the_client_is_too_busy_to_read_or_its_dispatcher_lags() -> None:
    scheduler = SlotScheduler(5)
    release, messages = _busy(scheduler, 4)
    scheduler.hold()
    quiet = _quiet_in_background(scheduler)
    # 4 of 5 places busy: the client reads no more, yet the server may already have sent a fifth message.
    assert not quiet.wait(0.3)
    scheduler.queue.put("an ack the client sent just before the drain")
    release.set()
    wait_for(lambda: all(m.drop.called for m in messages), RELEASE_TIMEOUT_S, "every job parked")
    assert not quiet.wait(0.3)  # the client reads again, but the dispatcher has not handled that ack yet
    scheduler.queue.get()  # the dispatcher takes it ...
    assert not quiet.wait(0.3)  # ... and may still be handling it
    threading.Thread(target=scheduler.queue.get, daemon=True).start()  # waits for more: it caught up
    assert quiet.wait(RELEASE_TIMEOUT_S)
    for message in messages:
        message.ack.assert_not_called()  # parked until the close
    scheduler.shutdown(await_msg_callbacks=True)
    for message in messages:
        message.ack.assert_called_once_with()


def test_a_drain_is_quiet_at_once_when_idle_or_when_every_place_holds_a_known_message() -> None:
    idle = SlotScheduler(2)
    idle.hold()
    assert _quiet_in_background(idle).wait(RELEASE_TIMEOUT_S)
    idle.shutdown(await_msg_callbacks=True)
    full = SlotScheduler(2)
    release, _ = _busy(full, 2)  # the server counts both against the stream: it has sent nothing else
    full.hold()
    assert _quiet_in_background(full).wait(RELEASE_TIMEOUT_S)
    release.set()
    full.shutdown(await_msg_callbacks=True)


def test_the_request_queue_knows_when_the_dispatcher_caught_up() -> None:
    requests = RequestQueue()
    assert requests.caught_up  # nothing put yet
    requests.put("ack")
    assert not requests.caught_up
    assert requests.get() == "ack"
    assert not requests.caught_up  # taken, maybe still being handled
    with pytest.raises(queue.Empty):
        requests.get(timeout=0.01)  # collecting a batch is not waiting for the next one
    assert not requests.caught_up
    reader = threading.Thread(target=requests.get, daemon=True)
    reader.start()  # the next blocking get on an empty queue: the batch before it is done
    wait_for(lambda: requests.caught_up, RELEASE_TIMEOUT_S, "caught up")
    requests.put("stop the reader")
    reader.join(RELEASE_TIMEOUT_S)


def test_the_dispatcher_sends_what_is_queued_without_waiting_to_batch_more() -> None:
    from google.cloud.pubsub_v1.subscriber._protocol.helper_threads import _get_many

    requests = RequestQueue()
    batches: list[list[str]] = []
    # How the client's dispatcher reads its queue, told to wait a minute for more requests to batch.
    collect = threading.Thread(target=lambda: batches.append(_get_many(requests, max_items=100, max_latency=60)),
                               daemon=True)
    requests.put("ack-1")
    requests.put("ack-2")
    collect.start()
    collect.join(RELEASE_TIMEOUT_S)
    assert not collect.is_alive(), "the dispatcher waited for more requests before sending an ack"
    assert batches == [["ack-1", "ack-2"]]  # what was already queued still goes out together


def test_a_draining_slot_starts_the_message_held_for_it_at_once_and_its_ack_still_waits() -> None:
    scheduler = SlotScheduler(1, places=2)  # one slot, one message prefetched for it
    scheduler.hold()
    first, held = _message(), _message()
    started = threading.Event()
    scheduler.schedule(lambda m: scheduler.settle(m, ack=True), first)
    scheduler.schedule(lambda m: (started.set(), scheduler.settle(m, ack=True)), held)
    # The held message runs while the stream is still open: its slot freed, it does not wait for the close.
    assert started.wait(RELEASE_TIMEOUT_S)
    wait_for(lambda: held.drop.called, RELEASE_TIMEOUT_S, "the held message to park its ack")
    first.ack.assert_not_called()
    held.ack.assert_not_called()
    assert scheduler.shutdown(await_msg_callbacks=True) == []
    first.ack.assert_called_once_with()
    held.ack.assert_called_once_with()


def test_a_drain_judges_whether_the_client_reads_by_its_places_not_its_slots() -> None:
    # 5 slots, 10 places: 4 running jobs leave the client far below 80 % of its places, so it reads on
    # and nothing sent can stay unread; with only 5 places it would not be reading.
    scheduler = SlotScheduler(5, places=10)
    release, _ = _busy(scheduler, 4)
    scheduler.hold()
    assert _quiet_in_background(scheduler).wait(RELEASE_TIMEOUT_S)
    release.set()
    scheduler.shutdown(await_msg_callbacks=True)
    with pytest.raises(ValueError, match="one place per slot"):
        SlotScheduler(2, places=1)


def _concluding(scheduler: SlotScheduler, gate: threading.Event, settle: Settle = Settle.ACK):  # type: ignore[no-untyped-def]
    """A callback that hands its message on to conclude, the conclusion blocked until ``gate`` is set."""
    def finish() -> list[Decision]:
        assert gate.wait(RELEASE_TIMEOUT_S)
        return [Decision(settle, "j")]
    return lambda message: scheduler.conclude([message], finish)


def test_a_slot_takes_its_next_message_while_the_last_one_concludes() -> None:
    scheduler = SlotScheduler(1, places=3)
    publish = threading.Event()  # the first job's conclusion (store, publish) is stuck until this is set
    first, second = _message(), _message()
    second_started = threading.Event()
    scheduler.schedule(_concluding(scheduler, publish), first)
    scheduler.schedule(lambda m: second_started.set(), second)
    # Without a concluding thread the one slot would be busy concluding the first job.
    assert second_started.wait(RELEASE_TIMEOUT_S)
    first.ack.assert_not_called()  # the ack waits for the conclusion: stored and published first
    publish.set()
    wait_for(lambda: first.ack.called, RELEASE_TIMEOUT_S, "the first message acked once concluded")
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_conclusion_settles_by_its_decision_and_a_closing_stream_waits_for_it() -> None:
    scheduler = SlotScheduler(2, places=6)
    publish = threading.Event()
    acked, nacked = _message(), _message()
    scheduler.schedule(_concluding(scheduler, publish), acked)
    scheduler.schedule(_concluding(scheduler, publish, Settle.NACK), nacked)
    closer, dropped = _close_in_background(scheduler)
    closer.join(0.2)
    assert closer.is_alive()  # the close waits for the conclusions, so their acks reach the client's dispatcher
    publish.set()
    closer.join(RELEASE_TIMEOUT_S)
    assert not closer.is_alive() and dropped == []
    acked.ack.assert_called_once_with()
    nacked.nack.assert_called_once_with()
    acked.nack.assert_not_called()


def test_a_draining_stream_parks_the_ack_of_a_conclusion_and_counts_it_busy_until_then() -> None:
    scheduler = SlotScheduler(1, places=3)
    publish = threading.Event()
    message = _message()
    scheduler.schedule(_concluding(scheduler, publish), message)
    scheduler.hold()
    publish.set()
    wait_for(lambda: message.drop.called, RELEASE_TIMEOUT_S, "the concluded message to free its place")
    message.ack.assert_not_called()
    assert scheduler.shutdown(await_msg_callbacks=True) == []
    message.ack.assert_called_once_with()


def _occupy_every_slot(scheduler: SlotScheduler, slots: int) -> threading.Event:
    """Give each slot a job that runs until the returned event is set: what comes next waits."""
    release, running = threading.Event(), threading.Semaphore(0)

    def busy(message: mock.Mock) -> None:
        running.release()
        assert release.wait(RELEASE_TIMEOUT_S)

    for _ in range(slots):
        scheduler.schedule(busy, _message())
    for _ in range(slots):
        assert running.acquire(timeout=RELEASE_TIMEOUT_S)
    return release


def test_a_pack_takes_the_wanted_messages_waiting_in_front_up_to_its_share() -> None:
    scheduler = SlotScheduler(2, places=6)
    release = _occupy_every_slot(scheduler, 2)
    tiny = [mock.Mock(data=b"tiny") for _ in range(5)]
    big = mock.Mock(data=b"big")
    for message in [*tiny[:3], big, *tiny[3:]]:
        scheduler.schedule(lambda m: None, message)
    wanted = lambda message: message.data == b"tiny"  # noqa: E731
    # 6 waiting, 2 slots: a pack takes at most 3 (of the 7 asked), so the other slot still finds work.
    assert scheduler.take_waiting(wanted, limit=7) == tiny[:3]
    # Only from the front, never past a message it does not want: the order stays the arrival order.
    assert scheduler.take_waiting(wanted, limit=7) == []
    release.set()
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_share_is_rounded_up_so_one_waiting_message_joins_a_pack() -> None:
    scheduler = SlotScheduler(2, places=6)
    release = _occupy_every_slot(scheduler, 2)
    alone = mock.Mock(data=b"tiny")
    scheduler.schedule(lambda m: None, alone)
    # Its slot's thread is free to take it anyway; with jobs submitted ahead, the other slot has one queued.
    assert scheduler.take_waiting(lambda message: True, limit=7) == [alone]
    release.set()
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_packs_messages_settle_each_by_its_own_decision() -> None:
    scheduler = SlotScheduler(1, places=3)
    ok, failed = _message(), _message()
    scheduler.conclude([ok, failed], lambda: [Decision(Settle.ACK, "ok"), Decision(Settle.NACK, "failed")])
    wait_for(lambda: ok.ack.called and failed.nack.called, RELEASE_TIMEOUT_S, "both settled")
    ok.nack.assert_not_called()
    failed.ack.assert_not_called()
    scheduler.shutdown(await_msg_callbacks=True)


class _Job:
    """A job a callback submitted: ends when ``end`` is set (or its deadline passes); records its completion."""

    def __init__(self, name: str, log: list[str], timeout_s: float = 60.0) -> None:
        self.name = name
        self.log = log
        self.ended = threading.Event()
        self._callbacks: list = []
        self._timeout_s = timeout_s
        self.deadline: float | None = None

    def end(self) -> None:
        self.ended.set()
        for callback in self._callbacks:
            callback()

    def ready(self) -> bool:
        return self.ended.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def on_ready(self, callback) -> None:  # type: ignore[no-untyped-def]
        self._callbacks.append(callback)

    def start_clock(self) -> float:
        self.log.append(f"turn {self.name}")
        self.deadline = self.deadline or time.monotonic() + self._timeout_s
        return self.deadline

    def complete(self) -> None:
        self.ended.wait(max(0.0, (self.deadline or math.inf) - time.monotonic()) if self.deadline else None)
        self.log.append(f"complete {self.name}")


def _carrying(scheduler: SlotScheduler, jobs: dict[str, _Job]):  # type: ignore[no-untyped-def]
    """A callback that submits the message's job and leaves it carried on its slot."""

    def callback(message: mock.Mock) -> None:
        job = jobs[message.data.decode()]
        job.log.append(f"start {job.name}")
        scheduler.carry(job.complete, job.ready, job.on_ready, job.start_clock)
    return callback


def _named(name: str) -> mock.Mock:
    return mock.create_autospec(Message, instance=True, data=name.encode())


def _two_jobs(slots: int) -> tuple[SlotScheduler, list[str], dict[str, _Job], Any]:
    """A scheduler of ``slots`` slots, jobs ``a`` and ``b`` sharing one log, and the callback that carries them."""
    log: list[str] = []
    jobs = {name: _Job(name, log) for name in "ab"}
    scheduler = SlotScheduler(slots, places=3 * slots)
    return scheduler, log, jobs, _carrying(scheduler, jobs)


def test_a_slot_starts_its_next_job_before_waiting_for_the_one_it_carries() -> None:
    scheduler, log, jobs, callback = _two_jobs(1)
    scheduler.schedule(callback, _named("a"))
    scheduler.schedule(callback, _named("b"))
    wait_for(lambda: "start b" in log, RELEASE_TIMEOUT_S, "b submitted while a runs")
    assert "complete a" not in log  # b went to the workers before the slot waited for a
    jobs["a"].end()
    wait_for(lambda: "complete a" in log, RELEASE_TIMEOUT_S, "a completed once it ended")
    assert log.index("complete a") < log.index("turn b")  # b's timeout counts from a's end, not its submit
    jobs["b"].end()
    wait_for(lambda: "complete b" in log, RELEASE_TIMEOUT_S, "b completed once it ended, with nothing waiting")
    scheduler.shutdown(await_msg_callbacks=True)
    assert log == ["start a", "turn a", "start b", "complete a", "turn b", "complete b"]


def test_a_carried_job_whose_time_is_up_is_completed_without_another_message() -> None:
    log: list[str] = []
    job = _Job("slow", log, timeout_s=0.2)  # never ends on its own
    scheduler = SlotScheduler(1, places=4)
    scheduler.schedule(_carrying(scheduler, {"slow": job}), _named("slow"))
    wait_for(lambda: "complete slow" in log, RELEASE_TIMEOUT_S, "the carried job completed at its deadline")
    assert not job.ended.is_set()
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_closing_stream_completes_the_job_its_slot_carries() -> None:
    log: list[str] = []
    job = _Job("last", log)
    scheduler = SlotScheduler(1, places=4)
    scheduler.schedule(_carrying(scheduler, {"last": job}), _named("last"))
    wait_for(lambda: "turn last" in log, RELEASE_TIMEOUT_S, "the job carried")
    closer, dropped = _close_in_background(scheduler)
    closer.join(0.2)
    assert closer.is_alive()  # the close waits for the carried job: its message is settled before the client stops
    job.end()
    closer.join(RELEASE_TIMEOUT_S)
    assert not closer.is_alive() and dropped == [] and log[-1] == "complete last"


def test_a_job_that_must_wait_completes_the_carried_one_first() -> None:
    log: list[str] = []
    carried = _Job("carried", log)
    scheduler = SlotScheduler(1, places=4)

    def blocking(message: mock.Mock) -> None:  # e.g. a twin of the carried job, which waits for its result
        scheduler.complete_carried()
        log.append("twin answered")
    scheduler.schedule(_carrying(scheduler, {"carried": carried}), _named("carried"))
    scheduler.schedule(blocking, _named("twin"))
    threading.Timer(0.1, carried.end).start()
    wait_for(lambda: "twin answered" in log, RELEASE_TIMEOUT_S, "the twin answered")
    assert log.index("complete carried") < log.index("twin answered")
    scheduler.shutdown(await_msg_callbacks=True)


def test_a_slot_without_a_job_takes_the_next_message_before_a_slot_that_carries_one() -> None:
    scheduler, log, jobs, callback = _two_jobs(2)
    scheduler.schedule(callback, _named("a"))
    wait_for(lambda: "turn a" in log, RELEASE_TIMEOUT_S, "a carried")
    scheduler.schedule(callback, _named("b"))
    wait_for(lambda: "turn b" in log, RELEASE_TIMEOUT_S, "b's turn")
    # b went to the idle slot, where its turn came at once; had a's slot taken it, b would wait for a's end.
    assert log == ["start a", "turn a", "start b", "turn b"]
    for job in jobs.values():
        job.end()
    scheduler.shutdown(await_msg_callbacks=True)
