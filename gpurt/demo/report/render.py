"""Writes a report folder: ``report.md`` and ``report.html`` beside their PNG plots."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from gpurt.client import ClientError, Result
from gpurt.client.plots import plot_convergence, plot_loss, plot_smile
from gpurt.demo.report.greeks import COLUMNS as GREEK_COLUMNS
from gpurt.demo.report.greeks import greek_rows
from gpurt.demo.report.live_plot import run_series_png
from gpurt.demo.report.model import ReportFiles, ReportInput
from gpurt.demo.report.plots import save_png
from gpurt.demo.report.summary import headline
from runtime.local.processes import private_dir, write_private
from runtime.protocol.messages import JobResult, JobStatus, JobType

LOSS_PNG = "loss_distribution.png"
CONVERGENCE_PNG = "convergence.png"
SMILE_PNG = "heston_smile.png"
LIVE_PNG = "platform_prometheus.png"
_COLUMNS = ("job", "type", "status", "attempt", "run s", "queue s", "result")


def write_report(report: ReportInput, directory: Path) -> ReportFiles:
    """Draw the plots and write the Markdown and HTML versions of ``report`` into ``directory``.

    The report holds a user's prices and risk figures: the folder (and any parent it makes) is 0700, every
    file 0600, as all the local platform writes.
    """
    private_dir(directory)
    plots: dict[str, Path] = {}
    notes = list(report.notes)
    var = _var_result(report)
    if var is not None:
        try:
            plots["Loss distribution with VaR and CVaR"] = save_png(directory / LOSS_PNG, lambda ax: plot_loss(var, ax))
        except (ClientError, KeyError) as exc:  # the histogram artifact unreadable, or never stored
            notes.append(f"loss distribution not drawn: {exc}")
    convergence = _convergence_results(report)
    if convergence:
        plots["Convergence of the option estimate"] = save_png(directory / CONVERGENCE_PNG,
                                                               lambda ax: plot_convergence(convergence, ax))
    book = _heston_book(report)
    if book is not None:
        try:
            plots["Heston smile (implied volatility by strike)"] = save_png(directory / SMILE_PNG,
                                                                            lambda ax: plot_smile(book, ax))
        except ValueError as exc:  # no contract's price has an implied volatility
            notes.append(f"Heston smile not drawn: {exc}")
    if report.live is not None:
        resolution = report.live.resolution()
        caption = f"The platform during the run (from Prometheus{'; ' + resolution if resolution else ''})"
        plots[caption] = run_series_png(report.live, directory / LIVE_PNG)
    report = report.model_copy(update={"notes": notes})
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    markdown = directory / "report.md"
    write_private(markdown, _markdown(report, plots, generated))
    page = directory / "report.html"
    write_private(page, _html(report, plots, generated))
    return ReportFiles(directory=directory, markdown=markdown, html=page, plots=plots)


def _succeeded(report: ReportInput) -> dict[str, Result]:
    return {r.job_id: Result(r) for r in report.results if r.status is JobStatus.SUCCEEDED}


def _var_result(report: ReportInput) -> Result | None:
    return _succeeded(report).get(report.var_id or "")


def _convergence_results(report: ReportInput) -> list[Result]:
    succeeded = _succeeded(report)
    return [succeeded[job_id] for job_id in report.convergence_ids if job_id in succeeded]


def _heston_book(report: ReportInput) -> Result | None:
    """The first Heston book: the smile the report draws."""
    return next((r for r in _succeeded(report).values()
                 if r.raw.type is JobType.OPTION_BOOK and r["model"] == "heston"), None)


def _row(result: JobResult) -> list[str]:
    metrics = result.metrics
    return [result.job_id, str(result.type or "-"), str(result.status), str(result.attempt),
            _fmt(metrics.run_s), _fmt(metrics.queue_wait_s), headline(result)]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _risk_lines(report: ReportInput) -> list[str]:
    lines = []
    var = _var_result(report)
    if var is not None:
        level = f"{var['var_confidence']:.1%}"
        lines.append(f"VaR {level}: {var['var']:,.2f}; CVaR {level}: {var['cvar']:,.2f} "
                     f"(over {var['horizon_trading_days']:g} trading days)")
    convergence = _convergence_results(report)
    last = max(convergence, key=lambda r: r["paths"], default=None)
    if last is not None and last.interval is not None and last.summary.get("closed_form") is not None:
        (low, high), reference = last.interval, last["closed_form"]
        inside = low <= reference <= high
        lines.append(f"Option at {last['paths']:,} paths: {last.estimate:.5f} [{low:.5f}, {high:.5f}] vs "
                     f"Black-Scholes {reference:.5f} ({'inside' if inside else 'outside'} the interval)")
    return lines


def _markdown(report: ReportInput, plots: dict[str, Path], generated: str) -> str:
    out = [f"# {report.title}", "", f"Generated {generated}.", ""]
    out += [f"- {line}" for line in _risk_lines(report) + report.notes]
    out += ["", "## Jobs", "", "| " + " | ".join(_COLUMNS) + " |", "|" + " --- |" * len(_COLUMNS)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _row(r)) + " |" for r in report.results]
    greeks = greek_rows(report.results)
    if greeks:
        out += ["", "## Greeks", "", "| " + " | ".join(GREEK_COLUMNS) + " |", "|" + " --- |" * len(GREEK_COLUMNS)]
        out += ["| " + " | ".join(row.cells()) + " |" for row in greeks]
    for caption, path in plots.items():
        out += ["", f"## {caption}", "", f"![{caption}]({path.name})"]
    if report.validation is not None:
        out += ["", "## Validation (`gpurt validate --local`)", "",
                "| check | status | detail |", "| --- | --- | --- |"]
        out += [f"| {row.get('check', '')} | {row.get('status', '')} | {row.get('detail', '')} |"
                for row in report.validation]
    return "\n".join(out) + "\n"


def _html(report: ReportInput, plots: dict[str, Path], generated: str) -> str:
    esc = html.escape
    rows = "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in _row(r)) + "</tr>" for r in report.results)
    head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
    facts = "".join(f"<li>{esc(line)}</li>" for line in _risk_lines(report) + report.notes)
    figures = "".join(f'<h2>{esc(caption)}</h2><img src="{esc(path.name)}" alt="{esc(caption)}">'
                      for caption, path in plots.items())
    greeks = "".join("<tr>" + "".join(f"<td>{esc(cell)}</td>" for cell in row.cells()) + "</tr>"
                     for row in greek_rows(report.results))
    if greeks:
        greek_head = "".join(f"<th>{esc(c)}</th>" for c in GREEK_COLUMNS)
        figures = f"<h2>Greeks</h2><table><tr>{greek_head}</tr>{greeks}</table>" + figures
    validation = ""
    if report.validation is not None:
        vrows = "".join(f"<tr><td>{esc(r.get('check', ''))}</td><td>{esc(r.get('status', ''))}</td>"
                        f"<td>{esc(r.get('detail', ''))}</td></tr>" for r in report.validation)
        validation = ("<h2>Validation</h2><table><tr><th>check</th><th>status</th><th>detail</th></tr>"
                      f"{vrows}</table>")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{esc(report.title)}</title><style>"
        "body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:4px 6px;font-size:13px}"
        "th{background:#f3f3f3}img{max-width:100%}</style></head><body>"
        f"<h1>{esc(report.title)}</h1><p>Generated {esc(generated)}.</p><ul>{facts}</ul>"
        f"<h2>Jobs</h2><table><tr>{head}</tr>{rows}</table>{figures}{validation}</body></html>\n"
    )
