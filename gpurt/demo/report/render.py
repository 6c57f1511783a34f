"""Writes a report folder: ``report.md`` and ``report.html`` beside their PNG plots."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from pathlib import Path

from gpurt.demo.report.greeks import COLUMNS as GREEK_COLUMNS
from gpurt.demo.report.greeks import greek_rows
from gpurt.demo.report.live_plot import run_series_png
from gpurt.demo.report.model import ReportFiles, ReportInput
from gpurt.demo.report.plots import convergence_png, loss_distribution_png
from gpurt.demo.report.smile import smile_from, smile_png
from gpurt.demo.report.summary import headline
from runtime.protocol.messages import JobResult

LOSS_PNG = "loss_distribution.png"
CONVERGENCE_PNG = "convergence.png"
SMILE_PNG = "heston_smile.png"
LIVE_PNG = "platform_prometheus.png"
_COLUMNS = ("job", "type", "status", "attempt", "run s", "queue s", "result")


def write_report(report: ReportInput, directory: Path) -> ReportFiles:
    """Draw the plots and write the Markdown and HTML versions of ``report`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    plots: dict[str, Path] = {}
    if report.loss is not None:
        plots["P&L distribution with VaR and CVaR"] = loss_distribution_png(report.loss, directory / LOSS_PNG)
    if report.convergence:
        plots["Convergence of the option estimate"] = convergence_png(
            report.convergence, report.reference_price, directory / CONVERGENCE_PNG, report.reference_label)
    smile = smile_from(report.results)
    if smile is not None:
        plots["Heston smile (implied volatility by strike)"] = smile_png(smile, directory / SMILE_PNG)
    if report.live is not None:
        resolution = report.live.resolution()
        caption = f"The platform during the run (from Prometheus{'; ' + resolution if resolution else ''})"
        plots[caption] = run_series_png(report.live, directory / LIVE_PNG)
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    markdown = directory / "report.md"
    markdown.write_text(_markdown(report, plots, generated))
    page = directory / "report.html"
    page.write_text(_html(report, plots, generated))
    return ReportFiles(directory=directory, markdown=markdown, html=page, plots=plots)


def _row(result: JobResult) -> list[str]:
    metrics = result.metrics
    return [result.job_id, str(result.type or "-"), str(result.status), str(result.attempt),
            _fmt(metrics.run_s), _fmt(metrics.queue_wait_s), headline(result)]


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _risk_lines(report: ReportInput) -> list[str]:
    lines = []
    if report.loss is not None:
        level = f"{report.loss.confidence:.1%}"
        lines.append(f"VaR {level}: {report.loss.var:,.2f}; CVaR {level}: {report.loss.cvar:,.2f}")
    if report.convergence and report.reference_price is not None:
        last = max(report.convergence, key=lambda p: p.paths)
        inside = last.ci_low <= report.reference_price <= last.ci_high
        lines.append(f"Option at {last.paths:,} paths: {last.estimate:.5f} "
                     f"[{last.ci_low:.5f}, {last.ci_high:.5f}] vs {report.reference_label} "
                     f"{report.reference_price:.5f} ({'inside' if inside else 'outside'} the interval)")
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
