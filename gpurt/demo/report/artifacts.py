"""Reads a portfolio-VaR job's loss distribution back from the result store (any fsspec URL)."""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np

from gpurt.demo.report.model import LossDistribution
from runtime.protocol.messages import JobResult


class ArtifactError(ValueError):
    """An artifact exists but is not a loss distribution this report can draw."""


def loss_distribution(result: JobResult) -> LossDistribution | None:
    """The loss histogram of a ``portfolio_var`` result, or None when it stored none.

    Accepts the two shapes a kernel can sensibly store: a ``*.json`` histogram (``edges``/``bin_edges`` and
    ``counts``, optionally ``var``/``cvar``/``confidence``), preferred, or ``*.npy`` loss samples. A quantile
    grid (``*quantile*.npy``) is not a sample and is skipped.
    """
    summary = result.result or {}
    candidates = [(n, u) for n, u in result.artifacts.items() if n.endswith(".json")]
    candidates += [(n, u) for n, u in result.artifacts.items() if n.endswith(".npy") and "quantile" not in n]
    for name, url in candidates:
        raw = _read(url)
        if name.endswith(".npy"):
            samples = np.load(io.BytesIO(raw), allow_pickle=False)
            if samples.ndim != 1:
                continue
            return LossDistribution.from_samples(samples, **_risk(summary, {}))
        body = json.loads(raw)
        if isinstance(body, dict) and ("edges" in body or "bin_edges" in body) and "counts" in body:
            return LossDistribution(edges=body.get("edges", body.get("bin_edges")), counts=body["counts"],
                                    **_risk(summary, body))
    return None


def _risk(summary: dict[str, Any], body: dict[str, Any]) -> dict[str, float]:
    try:
        return {key: float(body.get(key, summary[key])) for key in ("var", "cvar", "confidence")}
    except KeyError as exc:
        raise ArtifactError(f"the result has no {exc.args[0]} to mark on the distribution") from None


def _read(url: str) -> bytes:
    import fsspec

    with fsspec.open(url, "rb") as handle:
        return handle.read()
