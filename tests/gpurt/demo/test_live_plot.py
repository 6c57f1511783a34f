"""The report's Prometheus figure draws only the series with data over the run, and names what it left out."""

from __future__ import annotations

from pathlib import Path

from gpurt.demo.report.live_plot import run_series_figure, run_series_png
from runtime.local.prometheus.series import Line, Panel, RunSeries

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _panel(title: str, unit: str, *lines: Line) -> Panel:
    return Panel(title=title, unit=unit, query=f"query of {title}", lines=list(lines))


def _series(*panels: Panel) -> RunSeries:
    return RunSeries(source="http://127.0.0.1:9090", panels=list(panels), scrape_interval_s=1.0, step_s=1.0,
                     duration_s=4.0)


# What a demo run looks like: the backlog stays at 0 (the scheduler pulls every request at once), the
# queue-wait quantile has no samples (too few jobs finished inside its window), the other two have data.
RUN = _series(
    _panel("Request backlog", "messages", Line(label="Request backlog", points=[(t, 0.0) for t in range(5)])),
    _panel("Jobs finished per second", "jobs/s", Line(label="succeeded", points=[(0, 0.0), (1, 3.0), (2, 5.0)]),
           Line(label="failed", points=[(0, 0.0), (2, 1.0)])),
    _panel("Jobs in flight", "jobs", Line(label="Jobs in flight", points=[(0, 0.0), (1, 2.0), (4, 0.0)])),
    _panel("Queue wait, 95th percentile", "seconds"),
)


def test_only_panels_with_data_are_drawn_each_with_units_and_numeric_ticks() -> None:
    figure = run_series_figure(RUN)

    axes = figure.axes
    assert [ax.get_title() for ax in axes] == ["Jobs finished per second", "Jobs in flight"]
    for ax in axes:
        assert ax.get_ylabel() in {"jobs/s", "jobs"} and ax.get_xlabel() == "seconds since the run started"
        assert len(ax.get_xticks()) >= 2 and ax.get_xlim() == (0.0, 4.0)
    finished = axes[0].get_lines()
    assert [line.get_label() for line in finished] == ["succeeded", "failed"]
    assert list(finished[0].get_ydata()) == [0.0, 3.0, 5.0]
    footnote = figure.get_supxlabel()
    assert footnote == ("Not drawn: no samples over the run: Queue wait, 95th percentile; "
                        "0 throughout the run: Request backlog")


def test_a_run_without_any_data_says_so_in_its_one_panel(tmp_path: Path) -> None:
    empty = _series(_panel("Request backlog", "messages"), _panel("Jobs in flight", "jobs",
                                                                  Line(label="x", points=[(0, 0.0)])))
    figure = run_series_figure(empty)

    (ax,) = figure.axes
    assert [t.get_text() for t in ax.texts] == ["no series had data over the run"]
    assert "Request backlog" in figure.get_supxlabel() and "Jobs in flight" in figure.get_supxlabel()
    assert run_series_png(empty, tmp_path / "live.png").read_bytes().startswith(PNG_MAGIC)
