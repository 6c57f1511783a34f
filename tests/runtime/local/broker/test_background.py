"""The emulator's background-thread lifecycle (the journal's writer and the sweeper run on it)."""

from __future__ import annotations

import threading

from runtime.local.broker.background import ConditionThread


def _waiting_thread() -> tuple[ConditionThread, list[str]]:
    cond = threading.Condition()
    ran: list[str] = []

    def loop() -> None:
        ran.append(threading.current_thread().name)
        with cond:
            while not worker.stopping:
                cond.wait()

    worker = ConditionThread(cond, "test-loop", loop)
    return worker, ran


def test_start_runs_one_thread_however_often_it_is_called_and_stop_wakes_and_joins_it() -> None:
    worker, ran = _waiting_thread()
    worker.start()
    worker.start()
    worker.stop()  # returns only once the loop has seen `stopping` and returned
    assert ran == ["test-loop"] and worker.started
    assert "test-loop" not in {t.name for t in threading.enumerate()}
    worker.stop()  # idempotent


def test_stop_before_start_returns_at_once_and_nothing_runs() -> None:
    worker, ran = _waiting_thread()
    worker.stop()
    assert worker.stopping and not worker.started and ran == []
