"""The alert time scale: durations parsed and scaled, ranges kept above a few scrapes, rules' shape unchanged."""

from __future__ import annotations

import pytest

from runtime.local.prometheus import config
from runtime.manifests import alerts
from runtime.manifests.alert_timescale import (
    TimeScaleError,
    format_duration,
    longest_lookback_s,
    parse_duration,
    scale_duration,
    scale_expr,
    scale_rule_groups,
)


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("500ms", 0.5), ("0m", 0),
                                                ("2d", 172800), ("1m30s", 90)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "5 m", "m", "10x", "1.5m"])
def test_parse_duration_rejects_what_prometheus_would(text: str) -> None:
    with pytest.raises(TimeScaleError, match="not a Prometheus duration"):
        parse_duration(text)


@pytest.mark.parametrize(("seconds", "text"), [(12, "12s"), (1.5, "1500ms"), (0, "0s"), (0.0004, "0s")])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_scale_duration_floors_and_never_lengthens() -> None:
    assert scale_duration("10m", 0.02) == "12s"
    assert scale_duration("5m", 0.01, floor_s=4) == "4s"  # 3 s would be below the floor
    assert scale_duration("2s", 0.5, floor_s=4) == "2s"  # a floor above the original keeps the original


def test_scale_expr_scales_ranges_subqueries_and_offsets_only() -> None:
    expr = 'sum(rate(x_total{le="5m"}[5m])) / max(y offset 15m) + max_over_time(z[10m:30s]) > 300'
    assert scale_expr(expr, 0.1, min_range_s=4) == (
        'sum(rate(x_total{le="5m"}[30s])) / max(y offset 90s) + max_over_time(z[60s:30s]) > 300')


def test_scale_one_keeps_the_cloud_rules() -> None:
    groups = alerts.build_rule_groups()
    scaled = scale_rule_groups(groups, 1.0, scrape_interval_s=1, evaluation_interval_s=1)
    for cloud, local in zip(groups, scaled, strict=True):
        assert local["interval"] == "1s"
        for rule_c, rule_l in zip(cloud["rules"], local["rules"], strict=True):
            assert (rule_l["expr"], parse_duration(rule_l["for"])) == (rule_c["expr"], parse_duration(rule_c["for"]))
    assert groups[0]["interval"] == alerts.EVALUATION_INTERVAL  # the builder's own output is untouched


def test_scaled_rules_keep_names_labels_and_annotations() -> None:
    cloud = {r["alert"]: r for g in alerts.build_rule_groups() for r in g["rules"]}
    local = {r["alert"]: r for g in config.build_rules(0.02)["groups"] for r in g["rules"]}
    assert local.keys() == cloud.keys()
    assert all(local[name]["labels"] == cloud[name]["labels"] for name in cloud)
    assert all(local[name]["annotations"] == cloud[name]["annotations"] for name in cloud)
    assert local["JobQueueBacklog"]["for"] == "12s"
    assert "[6s]" in local["JobFailureRateHigh"]["expr"] and "[5m]" in cloud["JobFailureRateHigh"]["expr"]


@pytest.mark.parametrize("scale", [0, -1, 1.5])
def test_scale_outside_zero_one_is_refused(scale: float) -> None:
    with pytest.raises(TimeScaleError, match=r"in \(0, 1\]"):
        scale_rule_groups(alerts.build_rule_groups(), scale, 1, 1)


def test_longest_lookback_counts_range_plus_offset() -> None:
    groups = [{"rules": [{"expr": "rate(a[5m]) > 0"}, {"expr": "max(b offset 15m) - max(b[1m] offset 15m) > 1"}]},
              {"rules": [{"expr": "c > 1"}]}]
    assert longest_lookback_s(groups) == 16 * 60
    assert longest_lookback_s(config.build_rules(0.02)["groups"]) == 72  # GpuEccErrors: 1 h at 0.02
