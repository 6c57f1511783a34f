"""Wires the gpu-scheduler together: store, Pub/Sub, execution backend, pools, consumer, leader loop.

``Service`` is what the HTTP API talks to. Components are built from ``Settings``; tests pass a
``wrap_backend`` to put a recording or failing layer in front of the real backend.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, Field

from runtime.protocol import contract
from runtime.protocol.messages import JobResult
from runtime.pubsub.admin import subscription_path
from runtime.pubsub.publisher import ResultPublisher
from runtime.scheduler.backends.base import ExecutionBackend
from runtime.scheduler.cancel_watch import CancelWatcher
from runtime.scheduler.consumer import Consumer
from runtime.scheduler.intake import Intake
from runtime.scheduler.maintenance import (
    FOLLOW_PERIOD_S,
    InMemoryModeStore,
    Mode,
    ModeStore,
    ModeStoreError,
    ReplicaReport,
    now,
)
from runtime.scheduler.messaging.depth import DepthSource, MonitoringDepth, NoDepth
from runtime.scheduler.metrics import SchedulerMetrics
from runtime.scheduler.periodic import Periodic
from runtime.scheduler.pools.base import PoolBackend, PoolInfo
from runtime.scheduler.processor import Processor
from runtime.scheduler.reclaimer import DlqReclaimer
from runtime.scheduler.registry import JobRegistry
from runtime.scheduler.settings import ExecutionBackendName, LeaderMode, PoolsBackend, Settings
from runtime.scheduler.singletons import AlwaysLeader, Elector, SingletonLoop
from runtime.scheduler.slot_follow import SlotFollower
from runtime.scheduler.store import ResultStore, StoreError
from runtime.scheduler.store_health import StoreHealth

LOCAL_POOL: Final = "local"
# How often each replica removes the temporaries that failed writes left in a local store (seconds).
STORE_SWEEP_PERIOD_S: Final = 600.0
# Graceful shutdown waits this long for in-flight jobs (Kubernetes' grace period should exceed it).
SHUTDOWN_DRAIN_S: Final = 60.0
# Probes are noops answered in well under a second; one at a time is plenty for a deploy's validation.
PROBE_SLOTS: Final = 1

log = logging.getLogger(__name__)


# A session's job that started and has no result yet, and does not run on this replica.
UNFINISHED: Final = "unfinished"


class JobView(BaseModel):
    """A job as ``GET /jobs/{id}`` and ``GET /jobs?session_id=`` show it."""

    job_id: str
    state: str = Field(description="running, or the terminal status of its stored result; in a session's "
                                   f"listing also {UNFINISHED} (started, no result yet, not running on this replica).")
    attempt: int | None = None
    started_at: datetime | None = None
    cancel_requested: bool = False
    result: JobResult | None = None


class Service:
    """The running scheduler; ``start``/``stop`` are idempotent."""

    def __init__(self, settings: Settings, *, metrics: SchedulerMetrics | None = None,
                 wrap_backend: Callable[[ExecutionBackend], ExecutionBackend] | None = None,
                 elector: Elector | None = None) -> None:
        self.settings = settings
        self.metrics = metrics or SchedulerMetrics()
        self.store = ResultStore(settings.result_store_url())
        self.registry = JobRegistry(on_change=self.metrics.in_flight.set)
        self._wrap_backend = wrap_backend
        self._elector = elector
        self._cluster: Any = None
        self._dask_client: Any = None  # the Dask backend's client, once built
        self.backend: ExecutionBackend | None = None
        self._unwrapped_backend: ExecutionBackend | None = None  # the built one, before any test's wrapper
        self.pools: PoolBackend | None = None
        self.consumer: Intake | None = None  # every request queue's stream
        self.probe_consumer: Consumer | None = None
        self._loop: SingletonLoop | None = None
        self._clients: tuple[Any, Any] | None = None
        self._cancel_watch: CancelWatcher | None = None
        self._slot_follower: SlotFollower | None = None
        self._store_sweep: Periodic | None = None
        # The platform's mode, which every replica follows (runtime.scheduler.maintenance), and this replica's own
        # drain (the local platform stops one replica this way before restarting it).
        self.mode = Mode.NORMAL
        self._replica_drain = False
        self._modes: ModeStore = InMemoryModeStore()
        self._maintenance: Periodic | None = None
        # A follow round's read and an operator's write of the mode apply one at a time: a round that read the
        # record just before a drain was written must not apply the older mode after it.
        self._mode_lock = threading.Lock()
        # Intake is open while the mode is normal and the result store works (docs/scheduler.md#store-outages).
        self.store_health = self._new_store_health()
        self._intake_lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Connect everything and start consuming."""
        if self.consumer is not None:
            return
        from runtime.pubsub.clients import direct_publisher_client, subscriber_client

        s = self.settings
        token = _read_token(s.pubsub_emulator_token_file) if s.pubsub_emulator_token_file else None
        publisher = direct_publisher_client(s.pubsub_emulator_host, token)
        subscriber = subscriber_client(s.pubsub_emulator_host, token)
        self._clients = (publisher, subscriber)
        sink = ResultPublisher(publisher, s.project)
        backend = self._build_backend()
        self._unwrapped_backend = backend
        self.backend = self._wrap_backend(backend) if self._wrap_backend else backend
        self.pools = self._build_pools()
        self._export_eviction_counts()
        slots = self._slots(self.pools, self.backend)
        self.store_health = self._new_store_health()  # a stopped service's breaker is closed for good
        # Jobs wait out a store outage with their message unsettled instead of nacking it.
        job_store = self.store.waiting_out_outages(self.store_health.wait_out)
        processor = Processor(self.backend, job_store, sink, self.registry, self.metrics)
        self.metrics.export_queues(queue.name for queue in s.queues)
        self.consumer = Intake(subscriber, s.project, s.queues, lambda delivery: processor.start([delivery]), slots,
                               finish=processor.finish, pack=processor.start if processor.packs else None,
                               on_held=lambda queue, held: self.metrics.queue_slots.labels(queue).set(held))
        # The deploy probe's own stream and slot: a backlog on the request subscription fills that stream's
        # flow control, never this one (docs/validation.md, "The probe's own path").
        self.probe_consumer = Consumer(subscriber, subscription_path(s.project, contract.PROBE_SUBSCRIPTION),
                                       lambda delivery: processor.start([delivery]), PROBE_SLOTS,
                                       finish=processor.finish)
        reclaimer = DlqReclaimer(subscriber, s.project, self.store, sink, queues=s.queues)
        self._loop = SingletonLoop(self._build_elector(), self.metrics, self._build_depth(),
                                   reconcile=self._reconcile_pools, reclaim=reclaimer.run, queues=s.queues)
        self._cancel_watch = CancelWatcher(self.registry, self.store, self._cancel_here)
        self._slot_follower = SlotFollower(self.follow_slots)
        self._store_sweep = Periodic("gpurt-store-sweep", self._sweep_store, STORE_SWEEP_PERIOD_S)
        self._sweep_store()  # what a crash or a full disk left before this start
        self._modes = self._build_mode_store()
        self._maintenance = Periodic("gpurt-maintenance", self.follow_maintenance, FOLLOW_PERIOD_S)
        try:
            self.follow_maintenance()  # a replica started during a drain (a rolling restart's) starts drained
        except ModeStoreError as exc:  # take no job until the record is read: a drain must survive a restart
            log.warning("could not read the maintenance mode, intake stays stopped until it is read: %s", exc)
            self.mode = Mode.DRAIN
        self._apply_intake()
        self._loop.start()
        self._cancel_watch.start()
        self._slot_follower.start()
        self._store_sweep.start()
        self._maintenance.start()
        log.info("gpu-scheduler started", extra={"slots": slots, "backend": s.backend.value, "project": s.project})

    def stop(self, timeout_s: float = SHUTDOWN_DRAIN_S) -> None:
        """Drain (in-flight jobs finish and are acked), release the lease, close connections."""
        if self._slot_follower is not None:
            self._slot_follower.stop()
            self._slot_follower = None
        if self._maintenance is not None:
            self._maintenance.stop()
            self._maintenance = None
        if self.consumer is not None:
            with self._intake_lock:
                consumer, self.consumer = self.consumer, None  # a store recovery must not reopen intake now
            if not consumer.stop(timeout_s):
                log.warning("in-flight jobs did not finish within %.0f s; Pub/Sub will redeliver them", timeout_s)
        if self.probe_consumer is not None:
            with self._intake_lock:
                probes, self.probe_consumer = self.probe_consumer, None
            probes.stop(timeout_s)
        self.store_health.close()  # jobs still waiting for the store give their message back
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
        if self._cancel_watch is not None:
            self._cancel_watch.stop()
            self._cancel_watch = None
        if self._store_sweep is not None:
            self._store_sweep.stop()
            self._store_sweep = None
        if self.backend is not None:
            self.backend.close()
            self.backend = None
            self._unwrapped_backend = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self._clients is not None:
            publisher, subscriber = self._clients
            publisher.transport.close()
            subscriber.close()
            self._clients = None

    # --- what the API asks -------------------------------------------------------------------------

    def readiness(self) -> list[str]:
        """Reasons the service is not ready; empty when it is."""
        reasons = []
        if self.consumer is None:
            reasons.append("not started")
        elif not self.store_health.available:
            reasons.append(f"the result store is unavailable, intake stopped: {self.store_health.reason}")
        elif self.mode is Mode.NORMAL and not self._replica_drain and not self.consumer.running:
            reasons.append("the Pub/Sub consumer is not running")
        if self.backend is not None and not self.backend.ready():
            reasons.append(f"the {self.backend.name} backend is not reachable")
        return reasons

    def set_mode(self, mode: Mode, *, replica_only: bool = False) -> None:
        """``drain`` stops intake (no nacks, in-flight jobs finish); ``normal`` resumes it (once the store works).

        The mode is the platform's: written to the shared record, which every replica follows within
        ``FOLLOW_PERIOD_S`` and a restarted one reads first. ``replica_only`` drains or resumes this replica alone
        and for its lifetime only (the local platform's step before restarting it).
        """
        if self.consumer is None:
            raise RuntimeError("the service is not started")
        with self._mode_lock:
            if replica_only:
                self._replica_drain = mode is Mode.DRAIN
            else:
                self._modes.set_mode(mode)
                self.mode = mode
            self._apply_intake()

    def follow_maintenance(self) -> None:
        """Follow the platform's mode and report this replica's (one round of the maintenance poller)."""
        with self._mode_lock:
            shared = self._modes.read()
            if shared.mode is not self.mode:
                log.info("maintenance mode %s -> %s (shared)", self.mode.value, shared.mode.value)
                self.mode = shared.mode
                self._apply_intake()
        # Messages it holds count too: a drain lets them start when a slot frees (runtime.scheduler.dispatch).
        pending = self.registry.count() + (self.consumer.waiting if self.consumer else 0)
        self._modes.report(self.settings.pod_name, ReplicaReport(self.mode, pending, now()))

    def maintenance_replicas(self) -> dict[str, dict[str, Any]]:
        """Every live replica's last report (mode and jobs in flight), for ``GET /status``; empty if unreadable."""
        try:
            shared = self._modes.read()
        except ModeStoreError as exc:  # the status still answers
            log.warning("could not read the maintenance record: %s", exc)
            return {}
        return {name: report.to_json() for name, report in sorted(shared.fresh(now()).items())}

    def _build_mode_store(self) -> ModeStore:
        if self.settings.leader is LeaderMode.KUBERNETES:
            from kubernetes import client, config

            from runtime.scheduler.maintenance import ConfigMapModeStore

            config.load_incluster_config()
            return ConfigMapModeStore(client.CoreV1Api(), self.settings.pod_namespace)
        if self.settings.leader is LeaderMode.FILE and self.settings.lease_file is not None:
            from runtime.scheduler.maintenance import MAINTENANCE_FILE, FileModeStore

            return FileModeStore(self.settings.lease_file.with_name(MAINTENANCE_FILE))
        return self._modes  # one replica: nothing to share, and a restart starts normal

    def _sweep_store(self) -> None:
        try:
            removed = self.store.sweep_temporary()
            expired = self.store.sweep_cancel_markers()
        except StoreError as exc:  # the store is down: the next round sweeps
            log.warning("could not sweep the result store's temporary files and cancel markers: %s", exc)
            return
        if removed:
            log.info("removed %d temporary file(s) that failed writes left in the result store", removed)
        if expired:
            log.info("removed %d expired cancel marker(s) from the result store", expired)

    def _new_store_health(self) -> StoreHealth:
        return StoreHealth(lambda: self.store.probe(), on_change=self._apply_intake)

    def _apply_intake(self) -> None:
        """Open intake if the mode is normal and the store works, else stop it as a drain does (nothing nacked)."""
        with self._intake_lock:
            if self.consumer is None:
                return
            intake_open = self.mode is Mode.NORMAL and not self._replica_drain and self.store_health.available
            consumers: tuple[Intake | Consumer | None, ...] = (self.consumer, self.probe_consumer)
            for consumer in consumers:
                if consumer is None:
                    continue
                if intake_open:
                    consumer.resume()
                else:
                    consumer.drain()
            self.metrics.maintenance.set(1 if self.mode is Mode.DRAIN or self._replica_drain else 0)

    def job(self, job_id: str) -> JobView | None:
        """A running job, else its stored result, else ``None``."""
        entry = self.registry.get(job_id)
        if entry is not None:
            return JobView(job_id=job_id, state="running", attempt=entry.attempt, started_at=entry.started_at,
                           cancel_requested=entry.cancel_requested)
        result = self.store.get(job_id)
        if result is None:
            return None
        return JobView(job_id=job_id, state=result.status.value, attempt=result.attempt, result=result)

    def session(self, session_id: str) -> list[JobView]:
        """Every job started for ``session_id`` (the requests' own), by job id: running, finished or unfinished."""
        return [self.job(job_id) or JobView(job_id=job_id, state=UNFINISHED)
                for job_id in self.store.session_jobs(session_id)]

    def cancel(self, job_id: str) -> bool:
        """Request cancellation of ``job_id`` on every replica; True if it runs on this one.

        The marker in the store reaches a job running on another replica (its cancel watcher) and a job
        that has not started yet (it ends ``cancelled`` without running).
        """
        self.store.request_cancel(job_id)
        return self._cancel_here(job_id)

    def _cancel_here(self, job_id: str) -> bool:
        entry = self.registry.mark_cancelled(job_id)
        if entry is None:
            return False
        if self.backend is not None:
            self.backend.cancel(job_id)
        return True

    def status(self) -> dict[str, Any]:
        """A summary for ``GET /status``."""
        return {
            "mode": self.mode.value,
            "replica_drained": self._replica_drain,
            "replicas": self.maintenance_replicas(),
            "consuming": bool(self.consumer and self.consumer.running),
            "result_store_available": self.store_health.available,
            "slots": self.consumer.slots if self.consumer else 0,
            "places": self.consumer.places if self.consumer else 0,
            "in_flight": [e.request.job_id for e in self.registry.snapshot()],
            "waiting": self.consumer.waiting if self.consumer else 0,
            "backend": self.backend.name if self.backend else None,
            "overflow": self._overflow_status(),
            "leader": self.leader_status(),
            "project": self.settings.project,
            "result_store": self.store.url,
            "result_cache": self.metrics.result_cache(),
            "queues": self.queues_status(),
        }

    def queues_status(self) -> list[dict[str, Any]]:
        """Each request queue: weight, cap, messages waiting here, places held, and over the recent window
        (``metrics.RECENT_STARTS_S``) its starts, their publish-to-start wait p95 and its share of all starts."""
        if self.consumer is None:
            return []
        recent = self.metrics.recent_starts.summary()
        return [{**share, **recent.get(share["name"], {"started": 0, "wait_p95_s": None, "share": 0.0})}
                for share in self.consumer.shares()]

    def _overflow_status(self) -> dict[str, Any]:
        """Vertex AI overflow: the budget, the pinned job types and the jobs running as custom jobs now."""
        from runtime.scheduler.backends.overflow import OverflowBackend

        backend = self._unwrapped_backend
        return {
            "spill_after_s": self.settings.vertex_spill_after_s,
            "pinned_types": sorted(self.settings.vertex_types),
            "on_vertex": backend.on_vertex() if isinstance(backend, OverflowBackend) else [],
        }

    def leader_status(self) -> dict[str, Any]:
        """Who leads, and whether it is this replica."""
        elector = self._elector
        return {
            "identity": self.settings.pod_name,
            "is_leader": bool(elector and elector.is_leader),
            "holder": getattr(elector, "holder", None),
            "mode": self.settings.leader.value,
        }

    def scale_pool(self, pool_id: str, workers: int) -> PoolInfo:
        """Resize a pool; flow control follows the new GPU slots at once."""
        info = self._require_pools().scale(pool_id, workers)
        self.follow_slots()
        return info

    def stop_pool(self, pool_id: str) -> PoolInfo:
        """Evict a pool; flow control follows."""
        info = self._require_pools().stop(pool_id)
        self.follow_slots()
        return info

    def stop_all_pools(self) -> list[PoolInfo]:
        """Evict every pool; flow control follows."""
        infos = self._require_pools().stop_all()
        self.follow_slots()
        return infos

    def follow_slots(self) -> None:
        """Resize the consumer's flow control to the GPU slots the pools report now (unless pinned)."""
        if self.consumer is None or self.pools is None or self.backend is None or self.settings.max_in_flight:
            return
        self.consumer.resize(self._slots(self.pools, self.backend))

    def _slots(self, pools: PoolBackend, backend: ExecutionBackend) -> int:
        return self.settings.max_in_flight or max(1, pools.gpu_slots(), backend.gpu_slots())

    def _require_pools(self) -> PoolBackend:
        if self.pools is None:
            raise RuntimeError("the service is not started")
        return self.pools

    def count_eviction(self, pool: str) -> None:
        """Metrics hook for pool backends."""
        self.metrics.evictions.labels(pool).inc()

    def _reconcile_pools(self) -> None:
        if self.pools is None:
            return
        self.pools.reconcile()
        for info in self.pools.list():
            self.metrics.pool_workers.labels(info.id).set(info.workers)
            self.metrics.evictions.labels(info.id)  # a pool created since the start

    def _export_eviction_counts(self) -> None:
        """Export each pool's eviction count at 0 before any eviction, on every replica from its start.

        A counter first seen at 1 has no earlier sample, so Prometheus' ``increase()`` would miss the eviction
        that created it (PoolEvictionsIncreasing). Any replica may serve the stop call, a follower too, and a
        replica may serve it before the leader's first reconcile round.
        """
        try:
            pools = self._require_pools().list()
        except Exception:  # the pool API is away: the leader's reconcile rounds export them once it is back
            log.warning("could not list the pools to export their eviction counts", exc_info=True)
            return
        for info in pools:
            self.metrics.evictions.labels(info.id)

    # --- builders ----------------------------------------------------------------------------------

    def _build_backend(self) -> ExecutionBackend:
        s = self.settings
        dask_backend = self._build_dask()
        if s.backend is ExecutionBackendName.DASK and not s.vertex_types and s.vertex_spill_after_s is None:
            return dask_backend
        from runtime.scheduler.backends.overflow import OverflowBackend
        from runtime.scheduler.backends.vertex import VertexBackend

        vertex = VertexBackend.from_settings(s, self.store)
        if s.backend is ExecutionBackendName.VERTEX:
            return vertex
        return OverflowBackend(dask_backend, vertex, spill_after_s=s.vertex_spill_after_s, pinned=s.vertex_types,
                               on_spill=lambda request, _after: self.metrics.spills.labels(request.type.value).inc())

    def _build_dask(self) -> ExecutionBackend:
        import dask

        from runtime.manifests.dask_settings import DASK_SETTINGS
        from runtime.scheduler.backends.dask import DaskBackend
        from runtime.scheduler.backends.dask_client import PromptClient

        # For the whole process: its client and the nannies; the local Dask scheduler's process inherits it
        # as it starts, and each worker gets it from its nanny.
        # A copy: distributed appends a route to the configured list in place when a scheduler starts without
        # bokeh (distributed.scheduler.Scheduler), which would otherwise change the platform's constant.
        dask.config.set(copy.deepcopy(dict(DASK_SETTINGS)))

        if self.settings.dask_scheduler:
            client = PromptClient(self.settings.dask_scheduler, timeout="30s")
        else:
            from runtime.scheduler.local_cluster import start_local_cluster

            # The Dask scheduler in a process of its own; workers start empty, LocalPools adds them per pool.
            self._cluster = start_local_cluster(self.settings)
            client = PromptClient(self._cluster)
        self._dask_client = client
        return DaskBackend(client, device=self.settings.device, shard_paths=self.settings.shard_paths,
                           require_gpu=self.settings.require_gpu)

    def _build_pools(self) -> PoolBackend:
        if self.settings.pools is PoolsBackend.KUBERNETES:
            from runtime.scheduler.pools.kubernetes import KubernetesPools
            from runtime.scheduler.pools.kubernetes_api import KubernetesClients
            from runtime.scheduler.pools.rollout import ClientWorkers

            # Pools come before the elector; asked later, this says whether this replica leads now.
            return KubernetesPools(KubernetesClients.in_cluster(), cluster=self.settings.dask_cluster_name,
                                   on_evict=self.count_eviction, queued=self.settings.queued_pools,
                                   is_leader=lambda: self._elector is not None and self._elector.is_leader,
                                   dask=None if self._dask_client is None else ClientWorkers(self._dask_client))
        if self.settings.pools is PoolsBackend.EXTERNAL:
            from runtime.scheduler.pools.external import ExternalPools

            return ExternalPools(self._dask_client, self.settings.dask_scheduler)
        if self._cluster is None:
            raise RuntimeError("GPURT_POOLS=local needs the local Dask cluster: leave GPURT_DASK_SCHEDULER empty")
        from runtime.scheduler.pools.local import LocalPools
        from runtime.scheduler.settings import DEFAULT_LOCAL_WORKERS, detect_gpus

        gpus = self.settings.local_gpus if self.settings.local_gpus is not None else detect_gpus()
        workers = self.settings.local_workers or gpus or DEFAULT_LOCAL_WORKERS
        return LocalPools(self._cluster, {LOCAL_POOL: workers}, gpus=gpus, on_evict=self.count_eviction)

    def _build_elector(self) -> Elector:
        from runtime.leases.elector import LeaderElector

        if self._elector is None:
            if self.settings.leader is LeaderMode.KUBERNETES:
                from kubernetes import client, config

                from runtime.leases.kubernetes import KubernetesLeaseStore

                config.load_incluster_config()
                store = KubernetesLeaseStore(client.CoordinationV1Api(), self.settings.pod_namespace)
                self._elector = LeaderElector(store, self.settings.pod_name,
                                              on_error=lambda exc: self.metrics.election_failures.inc())
            elif self.settings.leader is LeaderMode.FILE:
                from runtime.leases.file import FileLeaseStore

                if self.settings.lease_file is None:
                    raise RuntimeError("GPURT_LEADER=file needs GPURT_LEASE_FILE")
                self._elector = LeaderElector(FileLeaseStore(self.settings.lease_file), self.settings.pod_name,
                                              on_error=lambda exc: self.metrics.election_failures.inc())
            else:
                self._elector = AlwaysLeader(self.settings.pod_name)
        return self._elector

    def _build_depth(self) -> DepthSource:
        if self.settings.emulator_admin_url:
            from runtime.scheduler.messaging.emulator_depth import EmulatorDepth

            return EmulatorDepth(self.settings.emulator_admin_url)
        if self.settings.pubsub_emulator_host:
            return NoDepth()
        return MonitoringDepth(self.settings.project)


def _read_token(path: Path) -> str:
    """The emulator token in ``path``; a file that cannot be read or is empty stops the start with its name."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RuntimeError(f"{contract.SchedulerEnv.PUBSUB_EMULATOR_TOKEN_FILE}: cannot read {path}: {exc}") from None
    if not token:
        raise RuntimeError(f"{contract.SchedulerEnv.PUBSUB_EMULATOR_TOKEN_FILE}: {path} is empty")
    return token
