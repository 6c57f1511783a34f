"""The report's Greeks table: every Greek a succeeded job returned, with its error and method."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from runtime.protocol.messages import JobResult, JobStatus

COLUMNS = ("job", "contract", "greek", "estimate", "std error", "method")


class GreekRow(BaseModel):
    """One Greek of one option (a job, or a contract of a book)."""

    model_config = ConfigDict(frozen=True)

    job_id: str
    contract: str
    greek: str
    estimate: float
    std_error: float
    method: str

    def cells(self) -> list[str]:
        """The row as table cells."""
        return [self.job_id, self.contract, self.greek, f"{self.estimate:.6g}", f"{self.std_error:.2g}", self.method]


def greek_rows(results: Iterable[JobResult]) -> list[GreekRow]:
    """Rows for every Greek in the succeeded results, in result order."""
    return [row for result in results if result.status is JobStatus.SUCCEEDED for row in _rows(result)]


def _rows(result: JobResult) -> Iterator[GreekRow]:
    summary = result.result or {}
    options = summary.get("contracts") or [summary]
    for option in options:
        if not isinstance(option, dict):
            continue
        contract = _describe(option, summary)
        for name, value in (option.get("greeks") or {}).items():
            # a basket's per-asset Greeks are lists, one entry per asset: delta_0, delta_1, ...
            named = [(f"{name}_{i}", v) for i, v in enumerate(value)] if isinstance(value, list) else [(name, value)]
            for greek, entry in named:
                if isinstance(entry, dict) and isinstance(entry.get("estimate"), float | int):
                    yield GreekRow(job_id=result.job_id, contract=contract, greek=greek, estimate=entry["estimate"],
                                   std_error=float(entry.get("std_error", 0.0)), method=str(entry.get("method", "")))


def _describe(option: dict[str, Any], summary: dict[str, Any]) -> str:
    """``call K=100 T=1`` from the option's own fields, or the job's params."""
    params = summary.get("params") or {}
    kind = option.get("kind", params.get("kind", ""))
    strike = option.get("strike", params.get("strike"))
    maturity = option.get("maturity", params.get("maturity"))
    parts = [str(kind)] if kind else []
    if strike is not None:
        parts.append(f"K={strike:g}")
    if maturity is not None:
        parts.append(f"T={maturity:g}")
    return " ".join(parts) or "-"
