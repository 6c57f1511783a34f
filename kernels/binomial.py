"""Cox-Ross-Rubinstein binomial tree for American and Bermudan options on one asset: the reference the
Longstaff-Schwartz kernel is checked against (independent of it: no paths, no regression).
"""

from __future__ import annotations

import math

import numpy as np


def binomial_price(spot: float, strike: float, rate: float, dividend_yield: float, volatility: float,
                   maturity: float, call: bool, steps: int, exercise_dates: int | None = None) -> float:
    """Price by backward induction on a CRR tree of ``steps`` steps.

    ``exercise_dates`` equally spaced dates (the last at maturity) allow early exercise; ``None`` allows it
    at every tree step (American). Exercise dates fall on the tree step nearest to them, and never at time 0.
    """
    dt = maturity / steps
    up = math.exp(volatility * math.sqrt(dt))
    down = 1.0 / up
    prob = (math.exp((rate - dividend_yield) * dt) - down) / (up - down)
    if not 0.0 < prob < 1.0:
        raise ValueError("the tree has no risk-neutral probability here: use more steps")
    discount = math.exp(-rate * dt)
    if exercise_dates is None:
        allowed = set(range(1, steps))
    else:
        allowed = {round(steps * d / exercise_dates) for d in range(1, exercise_dates)}
    prices = spot * up ** np.arange(steps, -steps - 1, -2, dtype=np.float64)
    sign = 1.0 if call else -1.0
    values = np.maximum(sign * (prices - strike), 0.0)
    for step in range(steps - 1, -1, -1):
        values = discount * (prob * values[:-1] + (1.0 - prob) * values[1:])
        if step in allowed:
            prices = spot * up ** np.arange(step, -step - 1, -2, dtype=np.float64)
            np.maximum(values, sign * (prices - strike), out=values)
    return float(values[0])
