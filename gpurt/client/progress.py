"""Progress bars for waiting on many jobs, in a terminal and in Jupyter alike (``tqdm.auto`` picks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from tqdm.auto import tqdm

# Below this many jobs a bar only flickers; ``progress=True`` shows one anyway.
AUTO_PROGRESS_MIN_JOBS: Final = 10


def progress_bar(total: int, progress: bool | None, description: str) -> tqdm | None:
    """A bar over ``total`` jobs, or ``None``: ``progress`` True or False decides, ``None`` shows it for many jobs."""
    if not (progress if progress is not None else total >= AUTO_PROGRESS_MIN_JOBS):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=description, unit="job")
