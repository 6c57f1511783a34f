"""Small statistics helpers for the runtime benchmark."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values``, None when there are none."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def fmt_ms(seconds: float | None) -> str:
    """Seconds as milliseconds with three significant digits; ``n/a`` for none."""
    return "n/a" if seconds is None else f"{seconds * 1e3:.3g} ms"
