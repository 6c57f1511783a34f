"""``gpurt bench queues``: a short run of its three phases on a real local platform, and the section it writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gpurt.bench.markdown import write_section
from gpurt.bench.queues import (
    BACKLOG_DESK,
    BENCH_QUEUES,
    CAPPED_SLOTS,
    FAST_DESK,
    SLOW_DESK,
    CapFigures,
    QueueFigures,
    ShareFigures,
    UrgentFigures,
    measure,
)
from gpurt.cli.bench.queues import SECTION, WORKERS, _markdown
from runtime.local import LocalConfig, LocalPlatform


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("queues-bench"),
                          LocalConfig(workers=WORKERS, port=0, emulator_port=0, queues=BENCH_QUEUES))
    local.up()
    try:
        yield local
    finally:
        local.down(drain_timeout_s=5)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_short_run_measures_every_phase(platform: LocalPlatform) -> None:
    seen: dict[str, int] = {}
    figures = measure(platform.target(), backlog=300, urgent_jobs=3, window_s=4, slow_rate=5, cap_window_s=3,
                      timeout_s=120, progress=lambda phase, done: seen.__setitem__(phase, done))
    assert seen["backlog"] == 300 and seen["urgent"] == 3
    urgent = figures.urgent
    assert len(urgent.waits_s) == 3 and all(wait >= 0 for wait in urgent.waits_s)
    assert urgent.backlog_waiting_after > 0  # the urgent jobs went past batch jobs published before them
    share = figures.share
    assert share.published[FAST_DESK] >= 5 * share.published[SLOW_DESK] > 0
    assert share.started[FAST_DESK] > 0 and share.started[SLOW_DESK] > 0
    cap = figures.cap
    assert cap.samples > 0 and cap.most_capped <= CAPPED_SLOTS and cap.met
    # Every phase discarded what it left: the next one started on empty queues.
    stats = platform.status().subscriptions
    assert all(stats[f"gpu-job-request-{desk}-sub"]["undelivered"] == 0 for desk in (BACKLOG_DESK, FAST_DESK))


def test_the_section_names_its_goals_and_whether_each_was_met(tmp_path: Path) -> None:
    figures = QueueFigures(
        UrgentFigures(5000, [0.2] * 19 + [0.9], backlog_waiting_after=4200),
        ShareFigures(120.0, {FAST_DESK: 30_000, SLOW_DESK: 3000}, {FAST_DESK: 1210.0, SLOW_DESK: 1190.0}, 0.99),
        CapFigures(20.0, CAPPED_SLOTS, most_capped=1, most_uncapped=3, samples=200))
    assert figures.met
    text = _markdown(figures, "2026-11-28 23:00 UTC", "load average 0.40 before and 1.90 after, on 2 cores")
    assert text.startswith("## Queues: urgent work, shares and caps (`gpurt bench queues`)")
    assert "| urgent publish-to-start p95, 20 jobs | 235 ms | ≤ 1 s | yes |" in text
    assert f"| {FAST_DESK} share of starts (30,000 published) | 50.4 % | 45-55 % | yes |" in text
    assert "goals met." in text
    page = tmp_path / "BENCHMARKS.md"
    page.write_text("# Benchmarks\n\n<!-- bench:result-cache -->\n## Queues: result cache\n"
                    "<!-- /bench:result-cache -->\n")
    write_section(SECTION, text, page)
    written = page.read_text()
    assert "## Queues: result cache" in written and written.index("result cache") < written.index("urgent work")
    unfair = QueueFigures(figures.urgent, ShareFigures(120.0, {FAST_DESK: 30_000, SLOW_DESK: 3000},
                                                       {FAST_DESK: 2000.0, SLOW_DESK: 400.0}, 0.99), figures.cap)
    assert not unfair.met and "goals NOT met." in _markdown(unfair, "d", "l")
