"""Pure builders of the local Prometheus and Alertmanager configuration, and the files they are written to.

- Scrape jobs carry the cloud's ``job`` labels (the Service names the ServiceMonitors select), so a
  query or a rule that selects on ``job`` means the same here.
- Rules are exactly ``runtime.manifests.alerts.build_rule_groups()`` — the groups the Monitoring
  component deploys as a PrometheusRule — at the local alert time scale.
- Alertmanager routes by the ``severity`` label, one receiver per severity, each posting to the local
  platform's webhook receiver (the on-call notification the drill waits for).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

import yaml

from runtime.local.processes import private_dir, write_private
from runtime.manifests import alerts
from runtime.manifests.alert_timescale import format_duration, scale_rule_groups
from runtime.manifests.common import Manifest
from runtime.protocol import contract

# Locally everything is quick: a scrape and a rule evaluation every second, so a drill measures alert
# latency in seconds. A few hundred series at 1 s cost Prometheus next to nothing.
SCRAPE_INTERVAL_S: Final = 1.0
EVALUATION_INTERVAL_S: Final = 1.0
# Alertmanager batches alerts of one group: wait 1 s for companions of a new alert, re-notify a changed
# group after 2 s (the cloud defaults, 30 s and 5 min, would dominate a drill's timings).
GROUP_WAIT: Final = "1s"
GROUP_INTERVAL: Final = "2s"
REPEAT_INTERVAL: Final = "1h"
# Prometheus re-sends a firing alert to Alertmanager this often; an alert not refreshed within a few of
# these is considered resolved by Alertmanager, so it stays well below the drill's timings.
RESEND_DELAY: Final = "1s"
RULES_FILE: Final = "rules.yml"
PROMETHEUS_FILE: Final = "prometheus.yml"
ALERTMANAGER_FILE: Final = "alertmanager.yml"
# Where the webhook receiver takes Alertmanager's POSTs: /alerts/<receiver name>.
RECEIVER_PATH: Final = "/alerts"
SEVERITIES: Final = tuple(priority.severity for priority in alerts.Priority)
DASK_JOB: Final = f"{contract.DASK_CLUSTER_NAME}-scheduler"  # the Dask scheduler Service's name
EMULATOR_JOB: Final = "pubsub-emulator"  # in the cloud these series come from the stackdriver exporter


@dataclass(frozen=True)
class ScrapeTargets:
    """``host:port`` of every ``/metrics`` endpoint of the local platform."""

    schedulers: tuple[str, ...]
    dask: tuple[str, ...]
    emulator: tuple[str, ...]

    def jobs(self) -> dict[str, tuple[str, ...]]:
        """Scrape job name → targets, for the jobs that have any."""
        named = {contract.SCHEDULER_DEPLOYMENT: self.schedulers, DASK_JOB: self.dask, EMULATOR_JOB: self.emulator}
        return {job: targets for job, targets in named.items() if targets}


def build_prometheus_config(targets: ScrapeTargets, alertmanager: str) -> Manifest:
    """``prometheus.yml``: scrape every target, evaluate ``rules.yml``, send alerts to ``alertmanager`` (host:port)."""
    interval = format_duration(SCRAPE_INTERVAL_S)
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": format_duration(EVALUATION_INTERVAL_S)},
        "rule_files": [RULES_FILE],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
        "scrape_configs": [
            {"job_name": job, "metrics_path": contract.METRICS_PATH, "static_configs": [{"targets": list(hosts)}]}
            for job, hosts in targets.jobs().items()
        ],
    }


def build_rules(time_scale: float) -> Manifest:
    """``rules.yml``: the cloud's rule groups at ``time_scale`` (1 = the cloud's timing)."""
    groups = scale_rule_groups(alerts.build_rule_groups(), time_scale, SCRAPE_INTERVAL_S, EVALUATION_INTERVAL_S)
    return {"groups": groups}


def build_alertmanager_config(receiver_url: str) -> Manifest:
    """``alertmanager.yml``: route by ``severity`` to one webhook receiver per severity, resolved alerts too."""
    base = receiver_url.rstrip("/")
    return {
        "route": {
            "receiver": SEVERITIES[-1],  # an alert without a known severity still reaches someone
            "group_by": ["alertname"],
            "group_wait": GROUP_WAIT,
            "group_interval": GROUP_INTERVAL,
            "repeat_interval": REPEAT_INTERVAL,
            "routes": [{"matchers": [f'severity="{severity}"'], "receiver": severity} for severity in SEVERITIES],
        },
        "receivers": [
            {"name": severity,
             "webhook_configs": [{"url": f"{base}{RECEIVER_PATH}/{severity}", "send_resolved": True}]}
            for severity in SEVERITIES
        ],
    }


def write_yaml(document: Manifest, path: Path) -> Path:
    """Write ``document`` as YAML to ``path``, private to its user (0600; parents made 0700) as all the platform
    writes: the scrape configuration names every endpoint of the platform."""
    private_dir(path.parent)
    return write_private(path, yaml.safe_dump(document, sort_keys=False, allow_unicode=True))
