"""The report's figures: the Python API's plots (``gpurt.client.plots``, what ``result.plot()`` draws in a
notebook), each drawn into a figure of its own rendered with Agg (no pyplot global state, no display)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from runtime.local.processes import private_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DPI: Final = 110  # sharp in a browser, a few tens of kB per PNG
SIZE_IN: Final = (8.0, 4.5)


def save_png(path: Path, draw: Callable[[Axes], Any], size: tuple[float, float] = SIZE_IN) -> Path:
    """A figure with one Axes that ``draw`` fills (a plot of ``gpurt.client.plots``), written to ``path``."""
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    draw(fig.add_subplot())
    fig.savefig(private_file(path))  # created 0600 first: savefig keeps the mode of the file it overwrites
    return path
