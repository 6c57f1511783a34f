"""SlotScheduler: one thread per slot, priority among waiting messages, nothing handed back to nack on drain."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import pytest
from google.cloud.pubsub_v1.subscriber.message import Message
from google.cloud.pubsub_v1.subscriber.scheduler import ThreadScheduler

from runtime.protocol import request_priority
from runtime.scheduler.dispatch import SlotScheduler
from tests.runtime.scheduler.platform import wait_for

RELEASE_TIMEOUT_S = 10.0


def _message(priority: int | None = None) -> mock.Mock:
    body = b"{}" if priority is None else f'{{"priority": {priority}}}'.encode()
    return mock.create_autospec(Message, instance=True, data=body)


class _OneBusySlot:
    """A callback whose first call blocks until released, so later messages wait for the slot."""

    def __init__(self) -> None:
        self.ran: list[mock.Mock] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, message: mock.Mock) -> None:
        if not self.ran:
            self.started.set()
            assert self.release.wait(RELEASE_TIMEOUT_S)
        self.ran.append(message)


def _shutdown_while_busy(scheduler, callback: _OneBusySlot, waiting: list[mock.Mock]) -> list:  # type: ignore[no-untyped-def]
    """Schedule a blocking message and ``waiting`` behind it, close like the client does, then release."""
    busy = _message()
    scheduler.schedule(callback, busy)
    assert callback.started.wait(RELEASE_TIMEOUT_S)
    for message in waiting:
        scheduler.schedule(callback, message)
    dropped: list = []
    closer = threading.Thread(target=lambda: dropped.extend(scheduler.shutdown(await_msg_callbacks=True)))
    closer.start()
    callback.release.set()
    closer.join(RELEASE_TIMEOUT_S)
    assert not closer.is_alive()
    for message in dropped:  # what StreamingPullManager._shutdown does with them
        message.nack()
    return dropped


def test_a_drain_runs_messages_waiting_for_a_slot_instead_of_nacking_them() -> None:
    callback, waiting = _OneBusySlot(), [_message(), _message()]
    dropped = _shutdown_while_busy(SlotScheduler(1, priority=lambda m: 0), callback, waiting)
    assert dropped == []
    assert callback.ran[1:] == waiting
    for message in waiting:
        message.nack.assert_not_called()


def test_the_client_default_scheduler_would_nack_them() -> None:
    # Why SlotScheduler exists: the library's ThreadScheduler hands waiting messages back, and the client nacks.
    callback, waiting = _OneBusySlot(), [_message()]
    dropped = _shutdown_while_busy(ThreadScheduler(ThreadPoolExecutor(max_workers=1)), callback, waiting)
    assert dropped == waiting
    waiting[0].nack.assert_called_once_with()


def test_waiting_messages_run_highest_priority_first() -> None:
    callback = _OneBusySlot()
    low, high, middle, also_high = _message(), _message(9), _message(4), _message(9)
    scheduler = SlotScheduler(1, priority=lambda m: request_priority(m.data))
    _shutdown_while_busy(scheduler, callback, [low, high, middle, also_high])
    assert callback.ran[1:] == [high, also_high, middle, low]


def test_without_awaiting_the_waiting_messages_are_handed_back() -> None:
    callback, scheduler = _OneBusySlot(), SlotScheduler(1, priority=lambda m: 0)
    scheduler.schedule(callback, _message())
    assert callback.started.wait(RELEASE_TIMEOUT_S)
    waiting = _message()
    scheduler.schedule(callback, waiting)
    assert scheduler.shutdown(await_msg_callbacks=False) == [waiting]
    callback.release.set()
    wait_for(lambda: len(callback.ran) == 1, RELEASE_TIMEOUT_S, "the running callback to finish")
    assert waiting not in callback.ran


def test_slots_run_in_parallel() -> None:
    barrier = threading.Barrier(3, timeout=RELEASE_TIMEOUT_S)
    scheduler = SlotScheduler(3, priority=lambda m: 0)
    for _ in range(3):
        scheduler.schedule(lambda message: barrier.wait(), _message())  # only passes if all three run at once
    assert scheduler.shutdown(await_msg_callbacks=True) == []
    assert barrier.n_waiting == 0 and not barrier.broken


@pytest.mark.parametrize(("body", "priority"), [
    (b'{"priority": 7}', 7), (b'{"job_id": "a"}', 0), (b"not json", 0), (b"[1]", 0),
    (b'{"priority": 12}', 0), (b'{"priority": true}', 0), (b'{"priority": "9"}', 0),
])
def test_request_priority_reads_only_a_valid_priority(body: bytes, priority: int) -> None:
    assert request_priority(body) == priority
