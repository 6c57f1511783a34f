"""A result's options as rows: the contracts of a book, or the one option of a single-option job.

The prices-by-strike plot, the smile and ``Result.implied_vols()`` read options alike from a book and from
many single-option jobs (a strip of ``EuropeanOption``\\ s, say), each with its interval and, where the kernel
computed one, its reference price.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpurt.client.result_view import ResultView
from kernels.descriptors import DESCRIPTORS

# The summary keys under which a single-option kernel reports a reference price, and what each one is.
REFERENCES: Final = {
    "closed_form": "Black-Scholes closed form",
    "semi_analytic": "semi-analytic Heston",
    "binomial_reference": "binomial tree (CRR)",
}


@dataclass(frozen=True)
class PricedOption:
    """One option's Monte Carlo price with its interval, its reference price, and the market it was priced in."""

    job_id: str
    job_type: str
    strike: float
    maturity: float
    call: bool
    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    confidence: float
    reference: float | None
    reference_name: str | None
    spot: float | None  # None for a basket (no one underlying)
    rate: float
    dividend_yield: float
    greeks: Mapping[str, Any]  # as the kernel reported them: name -> entry, or a list of entries per asset

    @property
    def has_implied_vol(self) -> bool:
        """Whether a Black-Scholes implied volatility describes this option (a European on one underlying)."""
        descriptor = DESCRIPTORS.get(self.job_type)  # its job type's options are Europeans on one underlying
        return descriptor is not None and descriptor.implied_vol and self.spot is not None

    @property
    def kind(self) -> str:
        """``call`` or ``put``."""
        return "call" if self.call else "put"


def priced_options(results: Iterable[ResultView]) -> list[PricedOption]:
    """Every option of ``results`` that succeeded: a book's contracts, or a single-option job's option."""
    out: list[PricedOption] = []
    for result in results:
        summary, params = result.summary, result.params
        job_type = result.raw.type.value if result.raw.type else ""
        if "contracts" in summary:
            name = summary.get("reference")
            out += [_option(result.job_id, job_type, contract, params, contract.get("reference"), name)
                    for contract in summary["contracts"]]
        elif "strike" in params and "estimate" in summary:
            key = next((k for k in REFERENCES if summary.get(k) is not None), None)
            reference = summary[key] if key else None
            out.append(_option(result.job_id, job_type, {**params, **summary}, params, reference,
                               REFERENCES.get(key or "")))
    return out


def _option(job_id: str, job_type: str, entry: Mapping[str, Any], params: Mapping[str, Any],
            reference: float | None, reference_name: str | None) -> PricedOption:
    # a basket's dividend yields are per asset; its options have no one underlying, hence no implied volatility
    return PricedOption(
        job_id=job_id, job_type=job_type, strike=float(entry["strike"]), maturity=float(entry["maturity"]),
        call=entry.get("kind", "call") == "call", estimate=float(entry["estimate"]),
        std_error=float(entry["std_error"]), ci_low=float(entry["ci_low"]), ci_high=float(entry["ci_high"]),
        confidence=float(entry["confidence"]), reference=reference, reference_name=reference_name,
        spot=params.get("spot"), rate=float(params.get("rate", 0.0)),
        dividend_yield=float(params.get("dividend_yield") or 0.0), greeks=dict(entry.get("greeks") or {}))
