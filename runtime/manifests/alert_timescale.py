"""The alert time scale: shorter ``for:`` windows and range vectors, so a drill sees an alert in seconds.

The cloud rules wait minutes before firing (``for: 10m``) and look back minutes (``rate(x[5m])``). Locally
``--alert-time-scale 0.02`` multiplies every such duration by 0.02, keeping each rule's shape: what fires
after 10 minutes in the cloud fires after 12 seconds here. A range vector never shrinks below a few
scrape intervals, or ``rate()`` would see fewer than two samples and never fire at all.

Pure arithmetic on Prometheus durations and on the rule groups ``alerts`` builds, with no tie to the processes
that evaluate them: it sits beside the rules it rescales, where the local monitoring stack that writes them and
the alert drill that waits out their windows both read it.
"""

from __future__ import annotations

import copy
import re
from typing import Final

from runtime.manifests.common import Manifest

# A Prometheus duration: one or more <number><unit> parts, largest unit first ("1h30m", "90s", "500ms").
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0}
_PART: Final = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_DURATION: Final = r"(?:\d+(?:ms|s|m|h|d|w|y))+"
# Range selectors ``[5m]`` and subquery ranges ``[5m:30s]`` (only the range part is scaled), and offsets.
_RANGE: Final = re.compile(rf"\[({_DURATION})(:[^\]]*)?\]")
_OFFSET: Final = re.compile(rf"\boffset\s+({_DURATION})")
# rate() and increase() need at least two samples in the window; four scrapes leave room for a late one.
MIN_RANGE_SCRAPES: Final = 4


class TimeScaleError(ValueError):
    """A time scale or duration that cannot be applied; the message says why."""


def parse_duration(text: str) -> float:
    """Seconds in a Prometheus duration such as ``10m`` or ``1h30m``."""
    if not text or _PART.sub("", text) != "":
        raise TimeScaleError(f"{text!r} is not a Prometheus duration (e.g. 30s, 10m, 1h30m)")
    return sum(int(number) * _UNIT_S[unit] for number, unit in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """A Prometheus duration for ``seconds``, to the millisecond (``12s``, ``1500ms``, ``0s``)."""
    millis = round(seconds * 1000)
    return f"{millis // 1000}s" if millis % 1000 == 0 else f"{millis}ms"


def scale_duration(text: str, scale: float, floor_s: float = 0.0) -> str:
    """``text`` times ``scale``, never below ``floor_s`` (nor above the original, which is then kept as written)."""
    original = parse_duration(text)
    scaled = min(original, max(original * scale, floor_s))
    return text if scaled == original else format_duration(scaled)


def scale_expr(expr: str, scale: float, min_range_s: float) -> str:
    """``expr`` with every range vector and ``offset`` scaled; ranges kept at ``min_range_s`` or more."""
    ranged = _RANGE.sub(lambda m: f"[{scale_duration(m.group(1), scale, min_range_s)}{m.group(2) or ''}]", expr)
    return _OFFSET.sub(lambda m: f"offset {scale_duration(m.group(1), scale)}", ranged)


def longest_lookback_s(groups: list[Manifest]) -> float:
    """The furthest any rule of ``groups`` looks back (range plus offset), in seconds: the history a rule
    needs before it can compare now with then."""
    longest = 0.0
    for group in groups:
        for rule in group["rules"]:
            ranges = [parse_duration(m.group(1)) for m in _RANGE.finditer(rule["expr"])]
            offsets = [parse_duration(m.group(1)) for m in _OFFSET.finditer(rule["expr"])]
            longest = max(longest, max(ranges, default=0.0) + max(offsets, default=0.0))
    return longest


def scale_rule_groups(groups: list[Manifest], scale: float, scrape_interval_s: float,
                      evaluation_interval_s: float) -> list[Manifest]:
    """A copy of ``groups`` (Prometheus' rule-group format) at ``scale``, evaluated every ``evaluation_interval_s``.

    ``scale`` 1 keeps every duration (the cloud's timing); below 1 shortens ``for:``, range vectors and
    offsets. The group interval is always the local one: it sets how quickly a change is noticed, not
    what a rule means.
    """
    if not 0 < scale <= 1:
        raise TimeScaleError(f"the alert time scale must be in (0, 1], not {scale}")
    min_range_s = MIN_RANGE_SCRAPES * scrape_interval_s
    scaled = copy.deepcopy(groups)
    for group in scaled:
        group["interval"] = format_duration(evaluation_interval_s)
        for rule in group["rules"]:
            rule["expr"] = scale_expr(rule["expr"], scale, min_range_s)
            if "for" in rule:
                rule["for"] = scale_duration(rule["for"], scale)
    return scaled
