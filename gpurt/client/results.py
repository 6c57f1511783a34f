"""A job's outcome as data: estimates, Greeks, timings, DataFrames, and artifacts as arrays.

``Result`` wraps the protocol's ``JobResult`` (the message on ``gpu-job-result``, kept in the result store)
so a quant reads ``result.estimate`` or ``result.to_frame()`` instead of walking its JSON. Artifacts are
read from the URLs the result names, so nobody needs to know the store's layout.
"""

from __future__ import annotations

import html
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from gpurt.client.errors import ClientError
from gpurt.client.options import priced_options
from gpurt.client.plots import plot_many, plot_result
from gpurt.client.volatility import implied_vol_frame
from kernels.descriptors import DESCRIPTORS
from kernels.params import JobParams
from runtime.protocol.messages import JobResult, JobStatus

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    from matplotlib.axes import Axes

# Summary fields that become columns of a frame, in this order, when a result has them.
ESTIMATE_COLUMNS: Final = ("estimate", "std_error", "ci_low", "ci_high", "confidence")
CONTRACT_COLUMNS: Final = ("strike", "maturity", "kind")
# The timings a result carries: the platform's metrics and the kernel's own split of its run.
METRIC_TIMINGS: Final = ("queue_wait_s", "run_s")
KERNEL_TIMINGS: Final = ("elapsed_s", "load_s", "kernel_s")


@dataclass(frozen=True)
class GreekValue:
    """One Greek: its estimate, standard error, confidence interval and how it was estimated."""

    name: str
    estimate: float
    std_error: float | None
    ci_low: float | None
    ci_high: float | None
    method: str | None


class Result:
    """The outcome of one job; ``raw`` is the protocol's ``JobResult`` it reads from."""

    def __init__(self, raw: JobResult) -> None:
        self.raw = raw

    # --- identity and status ------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self.raw.job_id

    @property
    def status(self) -> JobStatus:
        """``succeeded``, ``failed``, ``rejected`` or ``cancelled``."""
        return self.raw.status

    @property
    def cached(self) -> bool:
        """True when the platform answered from its result cache: the earlier result of the same computation and
        kernels (``cached_from``), bit for bit, with no new run (docs/python-api.md, "Cached results")."""
        return self.raw.cached

    @property
    def cached_from(self) -> str | None:
        """The job id whose result a cached result copies; ``None`` for a result that ran."""
        return self.raw.cached_from

    @property
    def summary(self) -> dict[str, Any]:
        """Everything the kernel reported, as it sent it (empty for a job that did not succeed)."""
        return dict(self.raw.result or {})

    def __getitem__(self, key: str) -> Any:
        """A summary field by name, e.g. ``result["cvar"]`` or ``result["closed_form"]``."""
        return self.summary[key]

    # --- the estimate ------------------------------------------------------------------------------

    @property
    def estimate(self) -> float | None:
        """The price (or VaR, or mean); ``None`` for a book (see ``contracts``) or a noop."""
        return self.summary.get("estimate")

    @property
    def std_error(self) -> float | None:
        """Standard error of ``estimate``."""
        return self.summary.get("std_error")

    @property
    def interval(self) -> tuple[float, float] | None:
        """The confidence interval ``(ci_low, ci_high)`` at ``confidence``."""
        s = self.summary
        return (s["ci_low"], s["ci_high"]) if "ci_low" in s and "ci_high" in s else None

    @property
    def confidence(self) -> float | None:
        """Two-sided confidence of ``interval``."""
        return self.summary.get("confidence")

    @property
    def greeks(self) -> dict[str, GreekValue]:
        """The Greeks asked for, by name."""
        return _greeks(self.summary)

    @property
    def contracts(self) -> list[dict[str, Any]]:
        """A book's contracts, each with its estimate and Greeks (empty for other jobs)."""
        return list(self.summary.get("contracts", []))

    # --- what produced it --------------------------------------------------------------------------

    @property
    def params(self) -> dict[str, Any]:
        """The parameters the job ran with, defaults filled in (the kernel's echo), as JSON has them; ``job`` has
        them typed."""
        return dict(self.summary.get("params", {}))

    @cached_property
    def job(self) -> JobParams | None:
        """The parameters the job ran with as its type's validated params model (``EuropeanOptionParams`` …):
        ``result.job.paths``, ``result.job.greeks``. ``None`` when the result carries none (a job that did not
        succeed, a noop's result of an older platform)."""
        descriptor = DESCRIPTORS.get(self.raw.type or "")
        if descriptor is None or "params" not in self.summary:
            return None
        try:
            return descriptor.params.model_validate(self.summary["params"])  # type: ignore[return-value]
        except ValidationError as exc:  # a result edited by hand, or of kernels whose params have changed since
            raise ClientError(f"job {self.job_id}'s parameters are not valid {descriptor.type} parameters now: "
                              f"{exc}") from None

    @property
    def seed(self) -> int | None:
        """The random seed: the same params and seed give the same result."""
        return self.params.get("seed")

    @property
    def timings(self) -> dict[str, float | None]:
        """Seconds: queue wait and run (the platform's), elapsed, load and kernel time (the kernel's)."""
        metrics = self.raw.metrics.model_dump()
        return {**{k: metrics.get(k) for k in METRIC_TIMINGS}, **{k: self.summary.get(k) for k in KERNEL_TIMINGS}}

    @property
    def device(self) -> str | None:
        """Where it ran: ``cpu`` or a GPU's name."""
        return self.raw.metrics.device or self.summary.get("device")

    # --- artifacts ---------------------------------------------------------------------------------

    @property
    def artifact_names(self) -> list[str]:
        """Names of the job's artifacts in the result store (e.g. ``loss_quantiles.npy``)."""
        return sorted(self.raw.artifacts)

    def artifact_bytes(self, name: str) -> bytes:
        """The raw bytes of artifact ``name``."""
        if name not in self.raw.artifacts:
            raise KeyError(f"job {self.job_id} has no artifact {name!r}; it has {self.artifact_names or 'none'}")
        from runtime.storage.filesystems import url_to_fs

        url = self.raw.artifacts[name]
        try:
            fs, path = url_to_fs(url)
            with fs.open(path, "rb") as handle:
                return handle.read()
        except OSError as exc:  # a store this machine cannot reach, or an artifact removed since
            raise ClientError(f"cannot read artifact {name} of job {self.job_id} at {url}: {exc}") from None

    def artifact(self, name: str) -> Any:
        """Artifact ``name`` as data: ``.npy`` a NumPy array, ``.json`` a dict, ``.parquet`` a pyarrow Table."""
        data = self.artifact_bytes(name)
        if name.endswith(".npy"):
            import numpy as np

            return np.load(io.BytesIO(data), allow_pickle=False)
        if name.endswith(".json"):
            return json.loads(data)
        if name.endswith(".parquet"):
            import pyarrow.parquet as pq

            return pq.read_table(io.BytesIO(data))
        return data

    def artifact_table(self, name: str) -> pa.Table:
        """Artifact ``name`` as a pyarrow Table (write it with ``pyarrow.parquet.write_table``)."""
        import pyarrow as pa

        value = self.artifact(name)
        if isinstance(value, pa.Table):
            return value
        if isinstance(value, dict):
            raise TypeError(f"{name} is a JSON document, not a table; read it with artifact({name!r})")
        stem = name.rsplit(".", 1)[0]
        return pa.table({stem: value})

    def loss_quantiles(self) -> np.ndarray:
        """A VaR job's loss distribution: its quantiles at 0, 0.001, ..., 1 (the 0.99 entry is the 99% VaR)."""
        return self.artifact("loss_quantiles.npy")  # type: ignore[no-any-return]

    def loss_histogram(self) -> pd.DataFrame:
        """A VaR job's loss histogram: one row per bin (``bin_low``, ``bin_high``, ``count``)."""
        import pandas as pd

        body = self.artifact("loss_histogram.json")
        edges = body["bin_edges"]
        return pd.DataFrame({"bin_low": edges[:-1], "bin_high": edges[1:], "count": body["counts"]})

    # --- as a table --------------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """This result as table rows: one per contract for a book, else one."""
        base = {"job_id": self.job_id, "type": self.raw.type.value if self.raw.type else None,
                "status": self.status.value}
        if self.contracts:
            return [{**base, "contract": i, **_row(contract, CONTRACT_COLUMNS)}
                    for i, contract in enumerate(self.contracts)]
        extra = {"device": self.device, "run_s": self.raw.metrics.run_s}
        if self.raw.error is not None:
            extra["error"] = self.raw.error.message
        return [{**base, **_row(self.summary, ()), **extra}]

    def greeks_frame(self) -> pd.DataFrame:
        """The Greeks as a table: one row per Greek (a basket's per-asset ones as ``delta_0``, ``delta_1``…)."""
        import pandas as pd

        return pd.DataFrame([vars(g) for g in self.greeks.values()],
                            columns=["name", "estimate", "std_error", "ci_low", "ci_high", "method"])

    def to_frame(self) -> pd.DataFrame:
        """A DataFrame: a book gives one row per contract with Greeks as columns; any other job one row."""
        return to_frame([self])

    def implied_vols(self) -> pd.DataFrame:
        """Black-Scholes implied volatilities of a book's contracts (or of a European or Heston option): one row
        per option with its price, implied volatility, its standard error and interval (the price's divided by
        vega) and the reference price's implied volatility."""
        return implied_vol_frame(priced_options([self]))

    # --- as a picture ------------------------------------------------------------------------------

    def plot(self, ax: Axes | Sequence[Axes] | None = None, *, kind: str | None = None,
             **options: Any) -> Axes | np.ndarray:
        """Draw this result with matplotlib and return the Axes (``gpurt.client.plots.plot_result``).

        By job type: a price with its interval and its closed-form or semi-analytic reference, a book's smile
        with error bars and the reference smile, a VaR job's loss distribution with VaR and CVaR marked.
        ``kind="greeks"`` draws the Greeks (one panel each, an array of Axes), ``kind="prices"`` a book's prices
        by strike. With ``ax`` given it draws there; otherwise on a new figure.
        """
        return plot_result(self, ax, kind=kind, **options)

    # --- display -----------------------------------------------------------------------------------

    def __repr__(self) -> str:
        head = f"Result({self.job_id!r}, {self.status.value}"
        if self.raw.error is not None:
            return f"{head}, {self.raw.error.kind.value}: {self.raw.error.message!r})"
        if self.contracts:
            return f"{head}, {len(self.contracts)} contracts)"
        if self.estimate is None:
            return f"{head})"
        low_high = f" [{self.interval[0]:.6g}, {self.interval[1]:.6g}]" if self.interval else ""
        greeks = "".join(f", {g.name}={g.estimate:.6g}" for g in self.greeks.values())
        return f"{head}, estimate={self.estimate:.6g} ± {self.std_error or 0:.2g}{low_high}{greeks})"

    def _repr_html_(self) -> str:
        title = f"<b>{html.escape(self.job_id)}</b>: {html.escape(self.status.value)}"
        if self.raw.error is not None:
            return f"<p>{title}: {html.escape(self.raw.error.message)}</p>"
        return f"<p>{title}</p>" + self.to_frame().to_html(index=False)


def to_frame(items: Iterable[Result | Any]) -> pd.DataFrame:
    """One DataFrame of many results (or finished futures): a row per job, or per contract of a book."""
    import pandas as pd

    rows = [row for item in items for row in _as_result(item).rows()]
    return pd.DataFrame(rows)


def plot_results(items: Iterable[Result | Any], ax: Axes | None = None, *, kind: str | None = None) -> Axes:
    """Draw many results (or finished futures) in one picture; returns the Axes (``plots.plot_many``).

    ``kind``: ``"convergence"`` (one option at several path counts: estimate and interval against paths),
    ``"prices"`` (options by strike), ``"smile"`` (their implied volatilities by strike) or ``"var"`` (VaR and
    CVaR by horizon). Left out, it is chosen from the results: VaR jobs give ``"var"``, jobs that price the same
    option at different path counts ``"convergence"``, other option jobs ``"prices"``, and one result its own
    default picture (as ``Result.plot``). Jobs that did not succeed are left out; if none succeeded,
    ``ValueError``.
    """
    return plot_many(map(_as_result, items), ax, kind=kind)


def _as_result(item: Result | Any) -> Result:
    if isinstance(item, Result):
        return item
    if isinstance(item, JobResult):
        return Result(item)
    outcome = getattr(item, "outcome", None)  # a JobFuture: its Result whatever the status, never raising
    if callable(outcome):
        return outcome()  # type: ignore[no-any-return]
    raise TypeError(f"expected results or job futures, not {type(item).__name__}")


def _row(summary: Mapping[str, Any], leading: tuple[str, ...]) -> dict[str, Any]:
    row = {k: summary[k] for k in (*leading, *ESTIMATE_COLUMNS) if k in summary}
    for greek in _greeks(summary).values():
        row[greek.name] = greek.estimate
        row[f"{greek.name}_std_error"] = greek.std_error
    return row


def _greeks(summary: Mapping[str, Any]) -> dict[str, GreekValue]:
    out: dict[str, GreekValue] = {}
    for name, value in (summary.get("greeks") or {}).items():
        # a basket's per-asset Greeks come as a list, one entry per asset: delta_0, delta_1, ...
        entries = {f"{name}_{i}": g for i, g in enumerate(value)} if isinstance(value, list) else {name: value}
        out.update({key: GreekValue(key, g["estimate"], g.get("std_error"), g.get("ci_low"), g.get("ci_high"),
                                    g.get("method")) for key, g in entries.items()})
    return out
