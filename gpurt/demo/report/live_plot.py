"""The figure of the run's Prometheus panels: one chart per panel that has data, time since the run started on x.

A series is drawn only if it has data over the run: at least one sample, and not 0 throughout (a backlog that
stayed empty is a fact for a line of text, not a chart). A panel left without a series is not drawn; the figure
names it and says why, and if no panel is left it says so in its one chart.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpurt.demo.report.plots import DPI
from runtime.local.processes import private_file
from runtime.local.prometheus.series import Line, Panel, RunSeries

if TYPE_CHECKING:
    from matplotlib.axes import Axes

WIDTH_IN: Final = 10.0
ROW_IN: Final = 3.2  # height of a row of charts
TITLES_IN: Final = 0.9  # the figure's title and footnote


def has_data(line: Line) -> bool:
    """Whether ``line`` says something over the run: a sample, and one that is not 0."""
    return any(value != 0 for _, value in line.points)


def run_series_png(series: RunSeries, path: Path) -> Path:
    """``run_series_figure`` written to ``path``."""
    run_series_figure(series).savefig(private_file(path))  # 0600 first, as every file of the report
    return path


def run_series_figure(series: RunSeries) -> Figure:
    """A grid of the panels with data (three to a row, or two by two for four)."""
    shown = [panel.model_copy(update={"lines": [ln for ln in panel.lines if has_data(ln)]})
             for panel in series.panels]
    drawn = [panel for panel in shown if panel.lines]
    columns = 2 if len(drawn) == 4 else max(1, min(len(drawn), 3))
    rows = max(1, math.ceil(len(drawn) / columns))
    fig = Figure(figsize=(WIDTH_IN, rows * ROW_IN + TITLES_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    for index, panel in enumerate(drawn, start=1):
        _chart(fig.add_subplot(rows, columns, index), panel, series.duration_s)
    if not drawn:
        ax = fig.add_subplot()
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no series had data over the run", ha="center", va="center", transform=ax.transAxes)
    resolution = series.resolution()
    fig.suptitle(f"The platform during the run (Prometheus, {series.source}"
                 f"{'; ' + resolution if resolution else ''})", fontsize=11)
    left_out = _left_out(series.panels, shown)
    if left_out:
        fig.supxlabel(left_out, fontsize=9, color="#555555")
    return fig


def _chart(ax: Axes, panel: Panel, duration_s: float | None) -> None:
    for line in panel.lines:
        ax.plot([t for t, _ in line.points], [v for _, v in line.points], label=line.label)
    ax.set_title(panel.title, fontsize=10)
    ax.set_ylabel(panel.unit, fontsize=9)
    ax.set_xlabel("seconds since the run started", fontsize=9)
    ax.set_ylim(bottom=0)
    if duration_s:
        ax.set_xlim(0, duration_s)  # the whole run, also where a line starts late
    if len(panel.lines) > 1:
        ax.legend(fontsize=8)


def _left_out(panels: list[Panel], shown: list[Panel]) -> str:
    """What the figure does not draw, and why: "no samples: …; 0 throughout the run: …"."""
    empty = [p.title for p in panels if not p.lines]
    zero = [p.title for p, s in zip(panels, shown, strict=True) if p.lines and not s.lines]
    parts = [f"no samples over the run: {', '.join(empty)}" if empty else "",
             f"0 throughout the run: {', '.join(zero)}" if zero else ""]
    return "Not drawn: " + "; ".join(p for p in parts if p) if empty or zero else ""
