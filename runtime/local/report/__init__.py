"""Run reports: Markdown and HTML with matplotlib plots (P&L distribution, convergence)."""

from runtime.local.report.model import ConvergencePoint, LossDistribution, ReportFiles, ReportInput
from runtime.local.report.render import write_report

__all__ = ["ConvergencePoint", "LossDistribution", "ReportFiles", "ReportInput", "write_report"]
