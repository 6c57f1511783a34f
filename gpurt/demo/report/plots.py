"""The report's figures, drawn with matplotlib's object API (no pyplot global state, no display)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from gpurt.demo.report.model import ConvergencePoint, LossDistribution

DPI: Final = 110  # sharp in a browser, a few tens of kB per PNG
SIZE_IN: Final = (8.0, 4.5)


def loss_distribution_png(loss: LossDistribution, path: Path) -> Path:
    """Histogram of portfolio losses with VaR and CVaR marked; the tail beyond VaR shaded."""
    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    edges, counts = loss.edges, loss.counts
    widths = [hi - lo for lo, hi in itertools.pairwise(edges)]
    colours = ["#c0392b" if lo >= loss.var else "#5b8db8" for lo in edges[:-1]]
    ax.bar(edges[:-1], counts, width=widths, align="edge", color=colours, linewidth=0)
    level = f"{loss.confidence:.1%}"
    ax.axvline(loss.var, color="#c0392b", linestyle="--", label=f"VaR {level} = {loss.var:,.0f}")
    ax.axvline(loss.cvar, color="#7d1f14", linestyle="-", label=f"CVaR {level} = {loss.cvar:,.0f}")
    ax.set_xlabel("loss over the horizon (positive = loss)")
    ax.set_ylabel("scenarios")
    ax.set_title("Portfolio P&L distribution (as losses)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path


def convergence_png(points: Sequence[ConvergencePoint], reference: float | None, path: Path,
                    reference_label: str = "Black-Scholes") -> Path:
    """Option estimate with its confidence interval against the number of paths (log scale)."""
    ordered = sorted(points, key=lambda p: p.paths)
    paths = [p.paths for p in ordered]
    fig = Figure(figsize=SIZE_IN, dpi=DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.fill_between(paths, [p.ci_low for p in ordered], [p.ci_high for p in ordered], alpha=0.25,
                    color="#5b8db8", label="confidence interval")
    ax.plot(paths, [p.estimate for p in ordered], marker="o", color="#1f4e79", label="Monte Carlo estimate")
    if reference is not None:
        ax.axhline(reference, color="#c0392b", linestyle="--", label=f"{reference_label} = {reference:.4f}")
    ax.set_xscale("log")
    ax.set_xlabel("paths")
    ax.set_ylabel("price")
    ax.set_title("Convergence of the option estimate")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return path
