"""One-line summaries of job results, shared by the CLI tables and the reports."""

from __future__ import annotations

from typing import Final

from runtime.protocol import JobResult

# Summary fields worth showing, in the order a risk user reads them.
HEADLINE_FIELDS: Final = ("estimate", "std_error", "var", "cvar", "ci_low", "ci_high", "paths")


def headline(result: JobResult) -> str:
    """The gist of a result: its main figures, or its error."""
    if result.error is not None:
        return f"{result.error.kind}: {result.error.message}"
    summary = result.result or {}
    parts = [f"{key}={number(summary[key])}" for key in HEADLINE_FIELDS if key in summary]
    return ", ".join(parts) or "-"


def number(value: object) -> str:
    """A compact rendering of a figure (six significant digits), ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)
