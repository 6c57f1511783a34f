"""Run reports: Markdown and HTML with matplotlib plots (P&L distribution, convergence)."""

from gpurt.demo.report.model import ConvergencePoint, LossDistribution, ReportFiles, ReportInput
from gpurt.demo.report.render import write_report

__all__ = ["ConvergencePoint", "LossDistribution", "ReportFiles", "ReportInput", "write_report"]
