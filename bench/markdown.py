"""Writes benchmark figures into BENCHMARKS.md, one marked section per benchmark."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "BENCHMARKS.md"
_HEADER = "# Benchmarks\n\nFigures written by `gpurt bench … --write`; each section names its device and date.\n"


def write_section(name: str, markdown: str, path: Path = DEFAULT_PATH) -> None:
    """Replace (or append) the section ``name`` of ``path`` with ``markdown``.

    Sections are delimited by ``<!-- bench:NAME -->`` / ``<!-- /bench:NAME -->`` so each benchmark owns
    its own block and reruns replace old figures instead of piling up.
    """
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{markdown.strip()}\n{end}"
    text = path.read_text() if path.exists() else _HEADER
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


# Above this one-minute load average per core, before or after a CPU benchmark, its figures are not
# written: on a shared machine the parallel CPU twins lose more to other work than the single-threaded
# baseline does, and the same case measured 18.4 s at load 2.8 and 42.4 s at load 2.5 on 2 cores.
MAX_WRITE_LOAD_PER_CORE: Final = 0.5


@dataclass(frozen=True)
class LoadWindow:
    """The machine's one-minute load average before and after a measurement."""

    before: float
    after: float
    cores: int

    def note(self) -> str:
        """For the figures' section: both readings and the core count."""
        return f"load average {self.before:.2f} before and {self.after:.2f} after, on {self.cores} cores"

    def refusal(self, limit_per_core: float = MAX_WRITE_LOAD_PER_CORE) -> str | None:
        """Why the figures must not be written (a reading above ``limit_per_core`` x cores), else ``None``."""
        limit = limit_per_core * self.cores
        if max(self.before, self.after) <= limit:
            return None
        return (f"not writing BENCHMARKS.md: the {self.note()} is above the limit of {limit:g} "
                f"({limit_per_core:g} per core); figures from a loaded machine are not comparable. "
                "Re-run on an idle machine")


def one_minute_load() -> float:
    """The one-minute load average."""
    return os.getloadavg()[0]


def cores() -> int:
    """Logical CPUs of the machine."""
    return os.cpu_count() or 1


def load_window(before: float) -> LoadWindow:
    """The window from ``before`` (read as the measurement started) to now."""
    return LoadWindow(before, one_minute_load(), cores())


def load_note() -> str:
    """How busy the machine was as the figures were taken: CPU rates are only comparable at similar load."""
    one_minute, _, _ = os.getloadavg()
    return f"load average {one_minute:.1f} on {os.cpu_count()} cores when written"
