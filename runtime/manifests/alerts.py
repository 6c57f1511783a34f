"""Alert rules of the platform as Prometheus rule groups, a ClusterRules object, and a promtool-ready file.

Each rule names its priority (P0/P1/P2 of the on-call runbooks, mapped to the ``severity`` routing label)
and its runbook (``docs/runbooks/<runbook>.md``). Scheduler series come from ``contract.METRICS``; GPU
series from the DCGM exporter (``DCGM_FI_*``).

Where the textbook query for an alert does not fit this platform it is restated, and the rule says why:
- job failure rate: the usual query divides ``dask_jobs_*`` series nobody exports; here it is failed over
  finished jobs of ``gpu_runtime_jobs_total{status}`` (``rejected`` is bad client input, ``cancelled`` a
  user's choice: neither is a platform failure);
- all Dask workers down: pools scale to zero when idle by design, so zero workers is an incident only
  while work is waiting; it is measured from the scheduler's pool gauge, not a ``dask-worker`` job;
- queue wait: the SLO (queue wait p95 under 5 minutes, docs/runbooks/queue-backlog.md) holds for each desk's
  queue on its own, so the p95 is taken per ``queue`` label: one starved desk must page even while the
  platform-wide p95, dominated by a busier desk, looks fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Final

import yaml

from runtime.manifests.common import Manifest, metadata
from runtime.protocol import contract

M = contract.METRICS

# Where the runbooks live; the Monitoring component may point this at a rendered docs site instead.
DEFAULT_RUNBOOK_BASE: Final = "docs/runbooks"
# Name of the rules object in the cluster (kept from when it was a PrometheusRule, so dashboards and
# runbooks that name it stay right).
PROMETHEUS_RULE_NAME: Final = "gpu-runtime-alerts"
GMP_API_VERSION: Final = "monitoring.googleapis.com/v1"


class Priority(Enum):
    """Seed priorities and the Alertmanager severity each one routes as."""

    P0 = "critical"
    P1 = "warning"
    P2 = "info"

    @property
    def severity(self) -> str:
        """The ``severity`` label value."""
        return self.value


@dataclass(frozen=True)
class AlertRule:
    """One alerting rule and what an on-call engineer needs with it."""

    alert: str
    """Alert name (CamelCase, Prometheus convention)."""
    priority: Priority
    """Seed priority; drives the severity label."""
    expr: str
    """PromQL condition."""
    for_: str
    """How long the condition must hold before the alert fires."""
    runbook: str
    """Runbook file name under ``docs/runbooks/`` without ``.md``."""
    summary: str
    """One line, with label templates."""
    description: str
    """What it means and the first thing to do."""

    def to_rule(self, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Manifest:
        """The rule in Prometheus' rule-file format."""
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.priority.severity, "priority": self.priority.name},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{runbook_base.rstrip('/')}/{self.runbook}.md",
            },
        }


# Per pool, the largest value any scheduler replica reports (replicas report the same pools), then summed.
_WORKERS: Final = f"sum(max by (pool) ({M.pool_workers}))"
# Every replica may measure the subscription; they agree, so take the largest.
_BACKLOG: Final = f"max({M.backlog_messages})"
_FINISHED: Final = f'{M.jobs_total}{{status=~"succeeded|failed"}}'
_FAILED: Final = f'{M.jobs_total}{{status="failed"}}'
_DCGM_UP: Final = f'up{{job="{contract.DCGM_EXPORTER_JOB}"}}'
# The runbook SLO: a request waits under 5 minutes (p95) from its publish to its start, in every queue.
QUEUE_WAIT_SLO_S: Final = 300
_QUEUE_WAIT_P95: Final = (f"histogram_quantile(0.95, sum by (queue, le) "
                          f"(rate({M.queue_wait_seconds}_bucket[10m])))")

GPU_RULES: Final = (
    AlertRule(
        alert="GpuNodeDown",
        priority=Priority.P0,
        expr=f"{_DCGM_UP} == 0",
        for_="2m",
        runbook="gpu-node-down",
        summary="GPU node {{ $labels.instance }} is not answering",
        description="The DCGM exporter on a GPU node has been unreachable for 2 minutes: the node is down or "
        "its GPU stack failed. Drain its workloads and investigate the hardware.",
    ),
    AlertRule(
        alert="GpuEccErrors",
        priority=Priority.P0,
        expr="increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]) > 0",
        for_="0m",
        runbook="gpu-ecc-errors",
        summary="Uncorrectable ECC errors on GPU {{ $labels.gpu }} of {{ $labels.Hostname }}",
        description="Double-bit (uncorrectable) memory errors appeared in the last hour; results computed on "
        "this GPU are suspect. Cordon the node and run diagnostics.",
    ),
    AlertRule(
        alert="GpuUtilizationLow",
        priority=Priority.P1,
        expr="avg_over_time(DCGM_FI_DEV_GPU_UTIL[5m]) < 20",
        for_="30m",
        runbook="low-gpu-utilization",
        summary="GPU {{ $labels.gpu }} of {{ $labels.Hostname }} below 20% utilization for 30 minutes",
        description="A provisioned GPU is mostly idle: check job scheduling, worker resources and pool sizes.",
    ),
    AlertRule(
        alert="GpuTemperatureHigh",
        priority=Priority.P2,
        expr="DCGM_FI_DEV_GPU_TEMP > 85",
        for_="5m",
        runbook="high-gpu-temperature",
        summary="GPU {{ $labels.gpu }} of {{ $labels.Hostname }} at {{ $value }} °C",
        description="GPU temperature above 85 °C for 5 minutes risks throttling: check cooling, reduce load.",
    ),
    AlertRule(
        alert="GpuMemoryPressure",
        priority=Priority.P1,
        expr="DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.85",
        for_="10m",
        runbook="gpu-memory-pressure",
        summary="GPU {{ $labels.gpu }} of {{ $labels.Hostname }} memory above 85%",
        description="Framebuffer use above 85% for 10 minutes: CUDA out-of-memory failures are near. Find the "
        "pool using it and evict it if it runs away.",
    ),
)

DASK_RULES: Final = (
    AlertRule(
        alert="DaskWorkersAllDown",
        priority=Priority.P0,
        expr=f"{_WORKERS} == 0 and on() ({_BACKLOG} + sum({M.jobs_in_flight})) > 0",
        # Scale-up from zero (node provisioning plus GPU driver install) takes several minutes.
        for_="10m",
        runbook="dask-workers-down",
        summary="No Dask worker is running while jobs wait",
        description="Every GPU pool has zero workers although the queue holds work, for 10 minutes. Check the "
        "worker pods, the Dask scheduler and GPU node provisioning.",
    ),
)

JOB_RULES: Final = (
    AlertRule(
        alert="JobFailureRateHigh",
        priority=Priority.P1,
        expr=f"sum(rate({_FAILED}[5m])) / sum(rate({_FINISHED}[5m])) > 0.05",
        for_="5m",
        runbook="high-job-failure-rate",
        summary="{{ $value | humanizePercentage }} of finished jobs failed",
        description="More than 5% of finished jobs failed over 5 minutes (the SLO is 98% success). Check "
        "CUDA errors and GPU memory on the workers.",
    ),
    AlertRule(
        alert="JobQueueBacklog",
        priority=Priority.P2,
        expr=f"{_BACKLOG} > 100",
        for_="10m",
        runbook="queue-backlog",
        summary="{{ $value }} job requests waiting",
        description="More than 100 undelivered requests on the request subscription for 10 minutes: scale up "
        "GPU pools or look for a stuck consumer.",
    ),
    AlertRule(
        alert="JobQueueGrowing",
        priority=Priority.P2,
        expr=f"{_BACKLOG} - max({M.backlog_messages} offset 15m) > 50",
        for_="5m",
        runbook="queue-backlog",
        summary="Job backlog grew by {{ $value }} in 15 minutes",
        description="Requests arrive faster than the platform completes them.",
    ),
    AlertRule(
        alert="QueueWaitSLOBreached",
        priority=Priority.P1,
        # The histogram has a bucket bound at the SLO (runtime/scheduler/metrics.py), so the p95 crosses it
        # exactly when more than 5% of the window's starts waited longer.
        expr=f"{_QUEUE_WAIT_P95} > {QUEUE_WAIT_SLO_S}",
        for_="10m",
        runbook="queue-backlog",
        summary="Queue {{ $labels.queue }}: wait p95 {{ $value | humanize }}s, over the 5-minute SLO",
        description="Jobs of this queue waited more than 5 minutes from publish to start (p95 over 10 minutes), "
        "for 10 minutes: the queue's share of the slots or its cap is too small for its load, or every slot is "
        "taken. Compare the queues on the dashboard (depth, wait, share of starts by queue).",
    ),
    AlertRule(
        alert="DeadLetterQueueGrowing",
        priority=Priority.P1,
        expr=f"max(delta({M.dlq_messages}[15m])) > 0",
        for_="5m",
        runbook="dlq-growth",
        summary="The dead-letter queue grew by {{ $value }} messages",
        description="Jobs are being dead-lettered after exhausting their delivery attempts. Stop intake, inspect "
        "a sample with `gpurt dlq inspect`, fix the cause, then replay.",
    ),
    AlertRule(
        alert="VertexOverflowHigh",
        priority=Priority.P2,
        expr=f"sum(rate({M.job_spills_total}[30m])) / sum(rate({_FINISHED}[30m])) > 0.2",
        for_="30m",
        runbook="vertex-overflow",
        summary="{{ $value | humanizePercentage }} of finished jobs spilled to Vertex AI",
        description="More than one job in five waited past the overflow budget for a GKE GPU and ran as a Vertex "
        "AI custom job, for 30 minutes: the GPU pools are too small or cannot scale (stockout, quota).",
    ),
    AlertRule(
        alert="JobRetriesElevated",
        priority=Priority.P2,
        expr=f"sum(rate({M.job_retries_total}[10m])) / sum(rate({M.jobs_total}[10m])) > 0.1",
        for_="15m",
        runbook="elevated-retries",
        summary="{{ $value | humanizePercentage }} of deliveries are retries",
        description="More than one redelivery per ten finished jobs: transient failures (lost workers, CUDA "
        "OOM, timeouts) are frequent.",
    ),
)

CONTROL_RULES: Final = (
    AlertRule(
        alert="PoolEvictionsIncreasing",
        priority=Priority.P1,
        expr=f"sum by (pool) (increase({M.pool_evictions_total}[15m])) > 0",
        for_="0m",
        runbook="pool-evictions",
        summary="Worker pool {{ $labels.pool }} had evictions",
        description="Workers of this pool were evicted in the last 15 minutes (resource pressure or an operator "
        "stop).",
    ),
    AlertRule(
        alert="LeaderElectionFailures",
        priority=Priority.P1,
        expr=f"sum(increase({M.leader_election_failures_total}[10m])) > 3",
        for_="0m",
        runbook="leader-election",
        summary="{{ $value }} leader-election failures in 10 minutes",
        description="Scheduler replicas fail to acquire or renew the leader Lease: check API-server access "
        "and the Lease object.",
    ),
    AlertRule(
        alert="SchedulerLeaderMissing",
        priority=Priority.P1,
        expr=f"max({M.leader}) < 1",
        for_="5m",
        runbook="leader-election",
        summary="No gpu-scheduler replica holds the leader Lease",
        description="Without a leader, pool reconciliation and the DLQ reclaimer do not run.",
    ),
    AlertRule(
        alert="ReclaimerErrors",
        priority=Priority.P1,
        expr=f"sum(increase({M.reclaimer_errors_total}[15m])) > 0",
        for_="0m",
        runbook="reclaimer-errors",
        summary="The DLQ reclaimer failed {{ $value }} times in 15 minutes",
        description="Dead-lettered jobs may be left without a terminal result.",
    ),
)

RULE_GROUPS: Final = (
    ("gpu-nodes", GPU_RULES),
    ("dask-workers", DASK_RULES),
    ("gpu-runtime-jobs", JOB_RULES),
    ("gpu-runtime-control", CONTROL_RULES),
)
ALL_RULES: Final = tuple(rule for _, rules in RULE_GROUPS for rule in rules)
# How often Prometheus evaluates the groups.
EVALUATION_INTERVAL: Final = "30s"


def build_rule_groups(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> list[Manifest]:
    """The rule groups in Prometheus' format (the ``groups`` of a rules file or a PrometheusRule spec)."""
    return [
        {"name": name, "interval": EVALUATION_INTERVAL, "rules": [rule.to_rule(runbook_base) for rule in rules]}
        for name, rules in RULE_GROUPS
    ]


def build_cluster_rules(runbook_base: str = DEFAULT_RUNBOOK_BASE) -> Manifest:
    """The ClusterRules object (Managed Service for Prometheus) carrying every group.

    Cluster-scoped on purpose: a namespaced ``Rules`` object only sees series of its own namespace, and these
    rules join the scheduler's (``gpu-runtime``) with the DCGM exporter's (``monitoring``).
    """
    return {
        "apiVersion": GMP_API_VERSION,
        "kind": "ClusterRules",
        "metadata": metadata(PROMETHEUS_RULE_NAME),
        "spec": {"groups": build_rule_groups(runbook_base)},
    }


def render_rules_yaml(path: str | Path | None = None, runbook_base: str = DEFAULT_RUNBOOK_BASE) -> str:
    """The rules as a Prometheus rules file (what ``promtool check rules`` reads); also written to ``path``."""
    text = yaml.safe_dump({"groups": build_rule_groups(runbook_base)}, sort_keys=False, allow_unicode=True)
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
