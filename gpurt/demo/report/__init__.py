"""Run reports: Markdown and HTML with the Python API's plots (loss distribution, convergence, smile) and the
platform's Prometheus panels."""

from gpurt.demo.report.model import ReportFiles, ReportInput
from gpurt.demo.report.render import write_report

__all__ = ["ReportFiles", "ReportInput", "write_report"]
