"""Run reports: Markdown and HTML with matplotlib plots (P&L distribution, convergence)."""

from local_platform.report.model import ConvergencePoint, LossDistribution, ReportFiles, ReportInput
from local_platform.report.render import write_report

__all__ = ["ConvergencePoint", "LossDistribution", "ReportFiles", "ReportInput", "write_report"]
