"""Small statistics helpers for the runtime benchmark."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``, None when there are none."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def fmt_duration(seconds: float | None) -> str:
    """A duration with three significant digits, in ms below a second; ``n/a`` for none."""
    if seconds is None:
        return "n/a"
    return f"{seconds * 1e3:.3g} ms" if abs(seconds) < 1.0 else f"{seconds:.3g} s"
