"""The chaos drill's figures as the ``chaos`` section of BENCHMARKS.md (``gpurt drill chaos --write``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from validation.drills.base import DrillResult
from validation.drills.faults import DRAIN_HOLD_S, LONG_STORE_OUTAGE_FIGURE, STORE_FAULT_S

SECTION: Final = "chaos"


def shown(value: float | int | str | None) -> str:
    return "-" if value is None else str(value)


def write_benchmarks(result: DrillResult, path: Path | None = None) -> None:
    """Replace the ``chaos`` section of BENCHMARKS.md (or ``path``) with this run's figures, device and date."""
    from gpurt.bench.kernels.runner import machine
    from gpurt.bench.markdown import DEFAULT_PATH, load_note, write_section

    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    verdict = "passed" if result.passed else f"FAILED: {result.failure}"
    lines = [
        "## Chaos drill: nothing lost under load and faults", "",
        f"Device: {machine()}; {load_note()}; {date}. `gpurt drill chaos --jobs "
        f"{result.figures.get('jobs')}` on `gpurt local up --replicas {result.figures.get('scheduler replicas')}`: "
        "a mixed load (noop jobs of 0-50 ms, small european_option and random_walk kernels, permanent "
        "failures, malformed requests) while, in turn, a Dask worker is SIGKILLed, a scheduler replica is "
        f"SIGKILLed and started again, intake is drained for {DRAIN_HOLD_S:.0f} s, and the result store fails "
        f"for {STORE_FAULT_S:.0f} s, then for {shown(result.figures.get(LONG_STORE_OUTAGE_FIGURE))} s (read-only; "
        "unavailable where root ignores that). Counted per job id "
        "from the drill's own subscription on the result topic; recovery is from the fault until the "
        "platform was whole again and every job running when it struck had its result."
        f" Drill {verdict} in {result.duration_s:.0f} s.", "",
        "| figure | value |", "| --- | --- |",
        *(f"| {name} | {shown(value)} |" for name, value in result.figures.items()),
    ]
    write_section(SECTION, "\n".join(lines), path or DEFAULT_PATH)
