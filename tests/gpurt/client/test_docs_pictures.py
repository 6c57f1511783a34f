"""docs/python-api.md shows each picture with the code that draws it, and the pictures can be drawn again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.gpurt.client.gallery import IMAGES, JOBS, PICTURES, ROOT, draw

PAGE = ROOT / "docs" / "python-api.md"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_page_shows_each_picture_under_the_call_that_draws_it() -> None:
    page = PAGE.read_text()
    assert JOBS in page  # the jobs the pictures were drawn from, verbatim
    for name, call in PICTURES.items():
        assert re.search(rf"```python\n{re.escape(call)}\n```\n\n!\[[^\]]+\]\(images/{re.escape(name)}\)", page), name
        assert (IMAGES / name).read_bytes().startswith(PNG_MAGIC)
    assert {p.name for p in IMAGES.glob("*.png")} == set(PICTURES)  # no picture the page no longer shows


@pytest.mark.slow  # runs every job of the page on the CPU
@pytest.mark.timeout(600)
def test_the_pictures_are_drawn_again_by_the_gallery(tmp_path: Path) -> None:
    written = draw(tmp_path)
    assert [p.name for p in written] == list(PICTURES)
    for path in written:
        assert path.read_bytes().startswith(PNG_MAGIC) and 10_000 < path.stat().st_size < 200_000  # small PNGs
