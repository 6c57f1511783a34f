"""The arbiter in front of "a slot starts a job": urgent first, shares by weight, caps, no banked credit."""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator

import pytest

from runtime.protocol.queues import QueueSpec
from runtime.scheduler.fair_share import TASKS_PER_SLOT, FairShare

WAIT_S = 10.0


class Contenders:
    """A thread per queue that always has a job waiting: it asks for a place, records the grant and asks again.

    ``step`` frees the oldest place once every contender is waiting, so each grant is the arbiter's choice among
    all of them, never a race between threads."""

    def __init__(self, fair: FairShare) -> None:
        self.fair = fair
        self.grants: queue.Queue[str] = queue.Queue()
        self.held: deque[str] = deque()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._queues: list[str] = []

    def join(self, name: str) -> None:
        """A contender for ``name`` starts asking."""
        self._queues.append(name)
        thread = threading.Thread(target=self._ask, args=(name,), daemon=True)
        self._threads.append(thread)
        thread.start()

    def _ask(self, name: str) -> None:
        while self.fair.acquire(name, give_up=self._stop.is_set):
            self.grants.put(name)

    def fill(self) -> None:
        """Collect the grants of the places free at the start."""
        for _ in range(self.fair.capacity - len(self.held)):
            self.held.append(self.grants.get(timeout=WAIT_S))

    def step(self) -> str:
        """Free the oldest place once every contender waits; the queue the arbiter gave it to."""
        deadline = time.monotonic() + WAIT_S
        while not all(self.fair.waiting(name) for name in self._queues):
            assert time.monotonic() < deadline, "a contender never came back to ask"
            time.sleep(0.001)
        self.fair.release(self.held.popleft())
        granted = self.grants.get(timeout=WAIT_S)
        self.held.append(granted)
        return granted

    def stop(self) -> None:
        self._stop.set()
        self.fair.wake()
        for thread in self._threads:
            thread.join(WAIT_S)


@pytest.fixture
def contenders() -> Iterator[list[Contenders]]:
    made: list[Contenders] = []
    yield made
    for one in made:
        one.stop()


def _contend(made: list[Contenders], queues: list[QueueSpec], slots: int = 1) -> Contenders:
    one = Contenders(FairShare(queues, slots))
    made.append(one)
    return one


def test_backlogged_queues_get_starts_in_proportion_to_their_weights(contenders: list[Contenders]) -> None:
    c = _contend(contenders, [QueueSpec("a", weight=1), QueueSpec("b", weight=3), QueueSpec("c", weight=4)])
    for name in ("a", "b", "c"):
        c.join(name)
    c.fill()
    starts = Counter(c.step() for _ in range(800))
    assert starts == pytest.approx({"a": 100, "b": 300, "c": 400}, abs=2)


def test_equal_weights_share_evenly_however_many_threads_one_queue_asks_with(contenders: list[Contenders]) -> None:
    c = _contend(contenders, [QueueSpec("busy"), QueueSpec("quiet")])
    for _ in range(5):
        c.join("busy")  # five slot threads with a message each, against one
    c.join("quiet")
    c.fill()
    starts = Counter(c.step() for _ in range(400))
    assert starts == pytest.approx({"busy": 200, "quiet": 200}, abs=2)


def test_a_queue_never_holds_more_places_than_its_cap() -> None:
    most: Counter[str] = Counter()

    def on_held(name: str, held: int) -> None:
        most[name] = max(most[name], held)
    fair = FairShare([QueueSpec("capped", weight=1000, max_slots=2), QueueSpec("other")], slots=4, on_held=on_held)
    assert fair.try_acquire("capped") and fair.try_acquire("capped")
    assert not fair.try_acquire("capped")  # six places free, its weight the highest: still refused
    assert fair.try_acquire("other")
    fair.release("capped")
    assert fair.try_acquire("capped")
    assert not fair.try_acquire("capped")
    assert most["capped"] == 2
    assert [(s.name, s.held, s.waiting) for s in fair.shares()] == [("capped", 2, 0), ("other", 1, 0)]


def test_the_cap_holds_under_contention(contenders: list[Contenders]) -> None:
    most: Counter[str] = Counter()

    def on_held(name: str, held: int) -> None:
        most[name] = max(most[name], held)
    c = Contenders(FairShare([QueueSpec("capped", weight=10, max_slots=1), QueueSpec("other")], 2, on_held=on_held))
    contenders.append(c)
    for _ in range(3):
        c.join("capped")
    c.join("other")
    c.fill()
    starts = Counter(c.step() for _ in range(200))
    assert most["capped"] == 1
    assert starts["other"] > starts["capped"] > 0


def test_urgent_takes_the_next_free_place_ahead_of_a_backlog(contenders: list[Contenders]) -> None:
    c = _contend(contenders, [QueueSpec("desk", weight=1000), QueueSpec("urgent")])
    c.join("desk")
    c.fill()
    assert list(c.held) == ["desk"] * TASKS_PER_SLOT
    c.join("urgent")  # waits behind a desk job that asked first
    assert [c.step() for _ in range(3)] == ["urgent", "urgent", "urgent"]
    assert c.fair.waiting("desk") == 1


def test_an_idle_queue_banks_no_credit(contenders: list[Contenders]) -> None:
    c = _contend(contenders, [QueueSpec("steady"), QueueSpec("late")])
    c.join("steady")
    c.fill()
    for _ in range(100):
        assert c.step() == "steady"  # alone: every place
    c.join("late")
    starts = [c.step() for _ in range(20)]
    # It rejoins at the current pass: it takes its share from now on, not a burst for the 100 starts it missed.
    assert starts.count("late") == pytest.approx(10, abs=1)
    assert "steady" in starts[:3]


def test_a_waiting_slot_gives_up_when_told() -> None:
    fair = FairShare([QueueSpec("desk")], slots=1)
    for _ in range(fair.capacity):
        assert fair.try_acquire("desk")
    stop = threading.Event()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(fair.acquire("desk", give_up=stop.is_set)))
    waiter.start()
    stop.set()
    fair.wake()
    waiter.join(WAIT_S)
    assert result == [False] and fair.waiting("desk") == 0


def test_resize_follows_the_slots() -> None:
    fair = FairShare([QueueSpec("desk")], slots=1)
    assert fair.capacity == TASKS_PER_SLOT
    fair.resize(3)
    assert fair.capacity == 3 * TASKS_PER_SLOT
    with pytest.raises(ValueError, match="at least one slot"):
        fair.resize(0)
    with pytest.raises(RuntimeError, match="does not hold"):
        fair.release("desk")
