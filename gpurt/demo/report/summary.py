"""One-line summaries of job results, shared by the CLI tables and the reports."""

from __future__ import annotations

from runtime.protocol.messages import JobResult


def headline(result: JobResult) -> str:
    """The gist of a result: its main figures with their uncertainty, or its error."""
    if result.error is not None:
        return f"{result.error.kind}: {result.error.message}"
    summary = result.result or {}
    paths = f" ({summary['paths']:,} paths)" if isinstance(summary.get("paths"), int) else ""
    if "var" in summary and "cvar" in summary:
        level = f" @ {summary['var_confidence']:.1%}" if "var_confidence" in summary else ""
        return f"VaR {summary['var']:,.0f}, CVaR {summary['cvar']:,.0f}{level}{paths}"
    if isinstance(summary.get("contracts"), list):
        return f"{len(summary['contracts'])} contracts{paths}"
    if "estimate" in summary:
        error = f" ± {summary['std_error']:.3g}" if isinstance(summary.get("std_error"), float) else ""
        return f"{number(summary['estimate'])}{error}{paths}"
    return "-"


def number(value: object) -> str:
    """A compact rendering of a figure (six significant digits), ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
