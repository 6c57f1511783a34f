"""The stream's window: narrow by default, wide after a run of tiny jobs, narrow again at the first large one."""

from __future__ import annotations

from runtime.protocol.messages import MAX_TIMEOUT_S
from runtime.scheduler.window import (
    NARROW_PLACES_PER_SLOT,
    WIDE_PLACES_PER_SLOT,
    WIDEN_AFTER_TINY,
    WIDEN_COOLDOWN_S,
    Window,
    lease_s,
)


def test_a_run_of_tiny_jobs_widens_the_window_and_the_first_large_job_narrows_it() -> None:
    window = Window()
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT
    assert not window.observe(tiny=True, jobs=WIDEN_AFTER_TINY - 1, now=0.0)
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT
    assert window.observe(tiny=True, jobs=1, now=0.0)
    assert window.places_per_slot == WIDE_PLACES_PER_SLOT
    assert not window.observe(tiny=True, jobs=5, now=0.0)  # already wide: no change to act on
    assert window.observe(tiny=False, jobs=1, now=1.0)
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT
    assert not window.observe(tiny=False, jobs=1, now=1.0)  # already narrow


def test_a_large_job_among_tiny_ones_starts_the_run_again() -> None:
    window = Window()
    window.observe(tiny=True, jobs=WIDEN_AFTER_TINY - 1, now=0.0)
    window.observe(tiny=False, jobs=1, now=0.0)
    assert not window.observe(tiny=True, jobs=WIDEN_AFTER_TINY - 1, now=0.0)
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT


def test_after_narrowing_the_window_stays_narrow_for_the_cooldown() -> None:
    window = Window()
    window.observe(tiny=True, jobs=WIDEN_AFTER_TINY, now=0.0)
    window.observe(tiny=False, jobs=1, now=100.0)
    assert not window.observe(tiny=True, jobs=WIDEN_AFTER_TINY, now=100.0 + WIDEN_COOLDOWN_S / 2)
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT
    assert window.observe(tiny=True, jobs=1, now=100.0 + WIDEN_COOLDOWN_S)  # the run counted on
    assert window.places_per_slot == WIDE_PLACES_PER_SLOT


def test_a_reset_narrows_without_a_cooldown() -> None:
    window = Window()
    window.observe(tiny=True, jobs=WIDEN_AFTER_TINY, now=0.0)
    window.reset()
    assert window.places_per_slot == NARROW_PLACES_PER_SLOT
    assert window.observe(tiny=True, jobs=WIDEN_AFTER_TINY, now=0.0)


def test_leases_cover_a_job_for_every_place_ahead_of_the_last_held_message() -> None:
    assert lease_s(NARROW_PLACES_PER_SLOT) >= NARROW_PLACES_PER_SLOT * MAX_TIMEOUT_S
    assert lease_s(WIDE_PLACES_PER_SLOT) >= WIDE_PLACES_PER_SLOT * MAX_TIMEOUT_S
