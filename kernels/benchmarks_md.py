"""Writes benchmark figures into BENCHMARKS.md, one marked section per benchmark."""

from __future__ import annotations

import os
import re
from pathlib import Path

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


def load_note() -> str:
    """How busy the machine was as the figures were taken: CPU rates are only comparable at similar load."""
    one_minute, _, _ = os.getloadavg()
    return f"load average {one_minute:.1f} on {os.cpu_count()} cores when written"
