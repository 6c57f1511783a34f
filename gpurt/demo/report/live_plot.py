"""The figure of the run's Prometheus panels: one chart per panel, time since the run started on x."""

from __future__ import annotations

from pathlib import Path
from typing import Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpurt.demo.report.plots import DPI
from runtime.local.prometheus.series import RunSeries

LIVE_SIZE_IN: Final = (10.0, 6.5)
COLUMNS: Final = 2


def run_series_png(series: RunSeries, path: Path) -> Path:
    """A grid of the panels, time since the start of the run on every x axis."""
    fig = Figure(figsize=LIVE_SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    rows = max(1, -(-len(series.panels) // COLUMNS))
    for index, panel in enumerate(series.panels, start=1):
        ax = fig.add_subplot(rows, COLUMNS, index)
        for line in panel.lines:
            ax.plot([t for t, _ in line.points], [v for _, v in line.points], label=line.label)
        if not panel.lines:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes, color="#888")
        ax.set_title(panel.title, fontsize=10)
        ax.set_ylabel(panel.unit, fontsize=9)
        ax.set_xlabel("seconds since the run started", fontsize=9)
        ax.set_ylim(bottom=0)
        if series.duration_s:
            ax.set_xlim(0, series.duration_s)  # the whole run, also where a line has no points yet
        if len(panel.lines) > 1:
            ax.legend(fontsize=8)
    resolution = series.resolution()
    fig.suptitle(f"The platform during the run (Prometheus, {series.source}"
                 f"{'; ' + resolution if resolution else ''})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    return path
