"""The local platform: emulator + gpu-scheduler replicas (each starting a local Dask cluster) as background processes.

``LocalPlatform`` is the one implementation behind ``gpurt local up|status|down``, the demo, the runtime
benchmark, the tests and ``gpurt validate --local``. Everything it starts is recorded in the state file
first, so ``down`` can always clean up, even after a failed ``up``. With ``replicas > 1`` the schedulers
elect their leader on a shared lease file, with the Kubernetes Lease's timing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import sys
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

from runtime.access.control_api import ApiClient, ApiError
from runtime.access.local_state import (
    FIRST_SCHEDULER,
    VERTEX_API,
    LocalState,
    ProcessRecord,
    clear_state,
    default_local_dir,
    load_state,
    save_state,
)
from runtime.access.target import DEFAULT_PROJECT, Target
from runtime.access.transport import PubSubClients, make_clients
from runtime.local import processes
from runtime.local.broker.brokers import Broker
from runtime.local.broker_credentials import CREDENTIALS_FILE, SCHEDULER_TOKEN_FILE, BrokerTokens, write_credentials
from runtime.local.prometheus.config import ScrapeTargets
from runtime.local.status import PlatformStatus, collect_status
from runtime.local.vertex_api import LOCAL_IMAGE
from runtime.protocol.contract import SCHEDULER_PORT, SchedulerEnv
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec, topology
from runtime.protocol.queues import encode as encode_queues
from runtime.scheduler.maintenance import MAINTENANCE_FILE

if TYPE_CHECKING:
    from runtime.local.prometheus.stack import Binaries

EMULATOR: Final = "emulator"
LOCAL_VERTEX_POLL_S: Final = 0.5
SCHEDULER: Final = FIRST_SCHEDULER  # the others are "scheduler-2", "scheduler-3", …
LEASE_FILE: Final = "leader-lease.json"
# The control token for the scheduler replicas, as the Deployment mounts it: a file (0600) whose name they are
# given, never the token in their environment, which their Dask scheduler and workers would inherit.
TOKEN_FILE: Final = "control-token"
# The builtin broker's data directory: what it holds survives its restarts and `down`/`up` (docs/local-platform.md).
BROKER_DIR: Final = "broker"
# The builtin broker's durability option, as `up` starts it: a broker started without it keeps nothing.
BROKER_DATA_DIR_FLAG: Final = "--data-dir"
# The builtin broker's access control, as `up` starts it: a broker started without it answers everyone.
BROKER_CREDENTIALS_FLAG: Final = "--credentials"
# Each process keeps its log under this size (its newest half kept past it): a flood once wrote 44 MB in 96 s.
LOG_MAX_BYTES: Final = 64 * 1024 * 1024
MAX_REPLICAS: Final = 4  # each replica starts its own local Dask cluster: more would swamp one machine
DEFAULT_EMULATOR_PORT: Final = 8085  # the official emulator's default, so habits carry over
# Start-up budget: the scheduler imports Dask and starts its local Dask cluster; on a loaded 2-core box that
# can take most of a minute.
READY_TIMEOUT_S: Final = 180.0
EMULATOR_START_TIMEOUT_S: Final = 60.0
DRAIN_TIMEOUT_S: Final = 120.0  # how long `down` waits for in-flight jobs before stopping anyway
# Prometheus opens its TSDB and loads the rules in a second or two; a loaded machine gets ample slack.
MONITORING_START_TIMEOUT_S: Final = 60.0
MONITORING_DIR: Final = "monitoring"
STOP_GRACE_S: Final = 15.0  # SIGTERM → SIGKILL


def _ensure_topology(state: LocalState) -> list[str]:
    """Create what the platform's topology lacks: the contract's topics and subscriptions and each request queue's
    (``runtime.protocol.queues.topology``); the names created."""
    from runtime.pubsub.admin import ensure_topology

    topics, subscriptions = topology(state.queues)
    clients = make_clients(state.project, state.emulator_host, state.broker_token)
    try:
        return ensure_topology(state.project, clients.publisher, clients.subscriber, topics, subscriptions)
    finally:
        clients.close()


def scheduler_env(cfg: LocalConfig, *, emulator_host: str, result_store: str, token_file: Path,
                  lease_file: Path | None, emulator_admin_url: str | None, vertex_url: str | None = None,
                  broker_token_file: Path | None = None) -> dict[str, str]:
    """The settings every local gpu-scheduler replica gets (``replica_env`` adds each one's own).

    Empty values mean unset to the scheduler (``Settings.from_env``), so an unset option keeps its default.
    ``vertex_url``: the custom-jobs stand-in, to which jobs overflow after ``cfg.spill_after_s``.
    ``broker_token_file``: the scheduler principal's token for the builtin broker.
    """
    overflow = {
        SchedulerEnv.VERTEX_ENDPOINT: vertex_url,
        SchedulerEnv.VERTEX_IMAGE: LOCAL_IMAGE,  # the stand-in runs the job here, with this machine's python
        SchedulerEnv.VERTEX_SPILL_AFTER_S: str(float(cfg.spill_after_s)),  # as the scheduler reads it back
        SchedulerEnv.VERTEX_POLL_S: str(LOCAL_VERTEX_POLL_S),
    } if vertex_url and cfg.spill_after_s else {}
    return {
        **overflow,
        SchedulerEnv.PUBSUB_EMULATOR_HOST: emulator_host,
        SchedulerEnv.PROJECT: cfg.project,
        SchedulerEnv.QUEUES: encode_queues(cfg.queues),
        SchedulerEnv.DASK_SCHEDULER: "",  # empty: the scheduler starts its own local Dask cluster
        # Unset, the scheduler sizes the pool (and picks LocalCUDACluster) itself.
        SchedulerEnv.LOCAL_WORKERS: "" if cfg.workers is None else str(cfg.workers),
        SchedulerEnv.LOCAL_GPUS: "" if cfg.gpus is None else str(cfg.gpus),
        SchedulerEnv.RESULT_STORE: result_store,
        SchedulerEnv.CONTROL_TOKEN_FILE: str(token_file),
        SchedulerEnv.PUBSUB_EMULATOR_TOKEN_FILE: "" if broker_token_file is None else str(broker_token_file),
        SchedulerEnv.HOST: cfg.host,
        SchedulerEnv.POOLS: "local",
        SchedulerEnv.LEADER: "always" if lease_file is None else "file",
        SchedulerEnv.LEASE_FILE: "" if lease_file is None else str(lease_file),
        SchedulerEnv.EMULATOR_ADMIN_URL: emulator_admin_url or "",
        SchedulerEnv.LOG_MAX_BYTES: str(LOG_MAX_BYTES),
        **cfg.scheduler_env,
    }


def replica_env(settings: Mapping[str, str], host: str, name: str, port: int, dashboard_port: int, *,
                probe_port: int, elected: bool) -> dict[str, str]:
    """One replica's settings: the shared ``settings``, its API port, its probes' port, its Dask dashboard (whose
    /metrics is a scrape target) and, where replicas elect a leader, a name that tells it apart on the lease."""
    identity = {SchedulerEnv.LOCAL_POD_NAME: f"local-{name}"} if elected else {}
    return {**settings, SchedulerEnv.PORT: str(port), SchedulerEnv.PROBE_PORT: str(probe_port),
            SchedulerEnv.DASK_DASHBOARD: f"{host}:{dashboard_port}", **identity}


class LocalPlatformError(RuntimeError):
    """The local platform could not be started or reached; the message says why and what to do."""


@dataclass(frozen=True)
class LocalConfig:
    """How to start the local platform. Port 0 picks a free port (tests, parallel runs)."""

    workers: int | None = None  # None: the scheduler's default (one per GPU, else 2)
    gpus: int | None = None  # GPUs the local workers share; None: the scheduler asks nvidia-smi
    port: int = SCHEDULER_PORT
    emulator_port: int = DEFAULT_EMULATOR_PORT
    host: str = "127.0.0.1"
    project: str = DEFAULT_PROJECT
    result_store: str | None = None  # fsspec URL; default: a folder beside the state file
    # Emulator-only: multiplies retry backoffs and retention, so a dead-letter drill (5 deliveries
    # with 10 s+ backoff) takes seconds. 1.0 is real Pub/Sub timing.
    emulator_time_scale: float = 1.0
    broker: Broker = Broker.BUILTIN
    scheduler_env: Mapping[str, str] = field(default_factory=dict)  # extra scheduler settings
    ready_timeout_s: float = READY_TIMEOUT_S
    replicas: int = 1  # scheduler processes; more than one elect a leader on a shared lease file
    monitoring: bool = False  # also run Prometheus, Alertmanager and the alert receiver
    # Multiplies the alert rules' for: windows and range vectors (1: the cloud's timing; drills use less).
    alert_time_scale: float = 1.0
    # Seconds a job waits for a local worker before it overflows to the Vertex AI stand-in; None: never.
    spill_after_s: float | None = None
    # The request queues to run (a stack's: `gpurt local up --stack`), the built-in default and urgent ones included.
    queues: tuple[QueueSpec, ...] = BUILT_IN_QUEUES


@dataclass(frozen=True)
class UpResult:
    """What ``up`` did."""

    state: LocalState
    already_running: bool
    created_topology: list[str]


@dataclass(frozen=True)
class Restarted:
    """One scheduler replica that ``restart_scheduler`` replaced."""

    name: str
    old_pid: int
    new_pid: int
    drained: bool  # False: it was not running, or its jobs outlived the drain (Pub/Sub redelivers them)


@dataclass(frozen=True)
class BrokerRestarted:
    """What ``restart_broker`` did."""

    old_pid: int
    new_pid: int
    durable: bool  # False: the official emulator, which lost every message it held


@dataclass(frozen=True)
class DownResult:
    """What ``down`` did."""

    was_running: bool
    drained: bool
    killed: list[str]


Step = Callable[[str], None]


def _no_step(_: str) -> None:
    """Progress sink for callers that show none."""


class LocalPlatform:
    """Start, inspect and stop the local platform rooted at ``directory`` (default ``./.gpurt/local``)."""

    def __init__(self, directory: Path | None = None, config: LocalConfig | None = None) -> None:
        self.directory = (directory or default_local_dir()).resolve()
        self.config = config or LocalConfig()

    # --- context manager: up on enter, down on exit (also on Ctrl-C and failures) -----------------

    def __enter__(self) -> LocalPlatform:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    # --- lifecycle -----------------------------------------------------------------------------------

    @property
    def state(self) -> LocalState | None:
        """The saved state, or None when not started."""
        return load_state(self.directory)

    def running_state(self) -> LocalState:
        """The state of a running platform; raises ``LocalPlatformError`` when it is not up."""
        state = self.state
        if state is None or not all(processes.is_alive(p) for p in state.processes):
            raise LocalPlatformError(f"the local platform is not running (state: {self.directory}); "
                                     "start it with `gpurt local up`")
        return state

    def recorded_state(self) -> LocalState:
        """The state of a platform that was started and not taken down, whether or not every process still
        runs: what the recovery commands (``restart_broker``, ``restart_scheduler``) start from. Raises
        ``LocalPlatformError`` when there is none."""
        state = self.state
        if state is None:
            raise LocalPlatformError(f"the local platform is not running (state: {self.directory}); "
                                     "start it with `gpurt local up`")
        return state

    def up(self, on_step: Step = _no_step) -> UpResult:
        """Start everything and wait until the scheduler is ready. Idempotent."""
        existing = self.state
        if existing is not None:
            if all(processes.is_alive(p) for p in existing.processes) and _ready(existing):
                if self.config.monitoring and existing.monitoring is None:
                    existing = self.start_monitoring(self.config.alert_time_scale, on_step)
                return UpResult(existing, already_running=True, created_topology=[])
            on_step("cleaning up a previous run that is no longer healthy")
            self._stop_all(existing)
        try:
            return self._start(on_step)
        except BaseException:
            # Ctrl-C or a failed start: leave nothing running.
            self.down(drain_timeout_s=0)
            raise

    def _start(self, on_step: Step) -> UpResult:
        cfg = self.config
        if cfg.workers is not None and cfg.workers < 1:
            raise LocalPlatformError("--workers must be at least 1")
        if cfg.emulator_time_scale <= 0:
            raise LocalPlatformError("the emulator time scale must be positive")
        if cfg.broker is Broker.OFFICIAL and cfg.emulator_time_scale != 1.0:
            raise LocalPlatformError("--emulator-time-scale needs the builtin broker: the official emulator "
                                     "runs in real time")
        if not 1 <= cfg.replicas <= MAX_REPLICAS:
            raise LocalPlatformError(f"--replicas must be between 1 and {MAX_REPLICAS}")
        if not 0 < cfg.alert_time_scale <= 1:
            raise LocalPlatformError("the alert time scale must be in (0, 1]: 1 is the cloud's timing, less is faster")
        if not _is_loopback(cfg.host):
            # The Dask scheduler, Prometheus and the broker's admin port take no credentials, and Google's emulator
            # none at all: the platform's trust model (docs/local-platform.md) holds on loopback only.
            raise LocalPlatformError(f"the local platform listens on loopback only (127.0.0.1, ::1, localhost), "
                                     f"not {cfg.host!r}: some of its ports take no credentials")
        self._check_port(cfg.port, "scheduler")
        self._check_port(cfg.emulator_port, "emulator")
        if cfg.monitoring:
            _monitoring_binaries()  # before starting anything: a missing binary must not leave a half-up platform
        # Every port left to us is picked in one go, so no two of them can be the same; each replica's Dask
        # dashboard gets a known one too (its /metrics is a scrape target), and so do its probes.
        wanted = [cfg.port, cfg.emulator_port, 0, 0, 0] + [0] * (cfg.replicas - 1) + [0] * (2 * cfg.replicas)
        free = iter(processes.free_ports(cfg.host, wanted.count(0)))
        first, emulator_port, admin_port, rest_port, vertex_port, *rest = [port or next(free) for port in wanted]
        ports = [first, *rest[:cfg.replicas - 1]]
        dashboards = rest[cfg.replicas - 1:2 * cfg.replicas - 1]
        probe_ports = rest[2 * cfg.replicas - 1:]
        processes.private_dir(self.directory)  # logs, results and state below are its user's alone
        logs = self.directory / "logs"
        # A fresh store per `up`: job ids (the contract's probe above all) are answered once per store, so a
        # new session must not find the previous session's results. Old sessions stay on disk.
        session = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        result_store = cfg.result_store or (self.directory / "results" / session).as_uri()
        token = secrets.token_urlsafe(32)
        token_file = processes.write_private(self.directory / TOKEN_FILE, token)
        # The broker's principals, fresh each `up` (docs/local-platform.md, "Trust"). Google's emulator takes no
        # credentials: with it the tokens are sent and ignored.
        broker_tokens = BrokerTokens.for_queues(cfg.queues)
        credentials = write_credentials(self.directory / CREDENTIALS_FILE, cfg.project, broker_tokens, cfg.queues)
        broker_token_file = processes.write_private(self.directory / SCHEDULER_TOKEN_FILE, broker_tokens.scheduler)
        emulator_host = f"{cfg.host}:{emulator_port}"
        base_env = _base_env()
        lease_file = self.directory / LEASE_FILE if cfg.replicas > 1 else None
        if lease_file is not None:
            lease_file.unlink(missing_ok=True)  # a lease from an earlier run names holders that are gone
            # A new platform starts in the normal mode, whatever mode the last one was left in.
            lease_file.with_name(MAINTENANCE_FILE).unlink(missing_ok=True)

        on_step(f"starting the Pub/Sub emulator ({cfg.broker}) on {emulator_host}")
        command = _emulator_command(cfg, emulator_port, admin_port, rest_port, self.directory / BROKER_DIR,
                                    credentials)
        emulator = processes.start_process(EMULATOR, command, base_env, logs / "emulator.log")
        # Only the builtin has the admin view; without it the backlog and DLQ-depth metrics stay empty. The
        # official emulator answers REST on its gRPC port, the builtin on a port of its own.
        builtin = cfg.broker is Broker.BUILTIN
        admin_url = f"http://{cfg.host}:{admin_port}" if builtin else None
        rest_url = f"http://{cfg.host}:{rest_port if builtin else emulator_port}/v1"
        state = LocalState(
            project=cfg.project, api_url=_url(cfg.host, ports[0]), emulator_host=emulator_host,
            emulator_admin_url=admin_url, emulator_rest_url=rest_url, control_token=token,
            broker_token=broker_tokens.operator, broker_user_token=broker_tokens.user,
            broker_queue_tokens=broker_tokens.queues, queues=cfg.queues, result_store=result_store,
            workers=cfg.workers, processes=[emulator], lease_file=lease_file)
        save_state(state, self.directory)
        self._wait(lambda: processes.port_in_use(cfg.host, emulator_port), EMULATOR_START_TIMEOUT_S,
                   [emulator], "the emulator did not open its port")

        on_step("creating the contract's topics and subscriptions, and each request queue's")
        created = _ensure_topology(state)

        started = [emulator]
        vertex_url = None
        if cfg.spill_after_s:
            on_step(f"starting the Vertex AI custom-jobs stand-in on {cfg.host}:{vertex_port}")
            vertex = processes.start_process(
                VERTEX_API, [sys.executable, "-m", "runtime.local.vertex_api", "--host", cfg.host, "--port",
                             str(vertex_port), "--log-dir", str(logs / "custom-jobs"), "--result-store",
                             result_store, "--token-file", str(token_file)],
                base_env, logs / "vertex-api.log", cwd=Path.cwd())
            started.append(vertex)
            state = state.model_copy(update={"processes": started})
            save_state(state, self.directory)
            self._wait(lambda: processes.port_in_use(cfg.host, vertex_port), EMULATOR_START_TIMEOUT_S,
                       started, "the Vertex AI stand-in did not open its port")
            vertex_url = _url(cfg.host, vertex_port)

        on_step(f"starting {cfg.replicas} gpu-scheduler replica(s) and their Dask workers on port(s) "
                f"{', '.join(map(str, ports))}")
        settings = scheduler_env(cfg, emulator_host=emulator_host, result_store=result_store, token_file=token_file,
                                 lease_file=lease_file, emulator_admin_url=state.emulator_admin_url,
                                 vertex_url=vertex_url, broker_token_file=broker_token_file)
        schedulers = []
        for index, port in enumerate(ports):
            name = SCHEDULER if index == 0 else f"{SCHEDULER}-{index + 1}"
            env = replica_env(settings, cfg.host, name, port, dashboards[index], probe_port=probe_ports[index],
                              elected=lease_file is not None)
            record = processes.start_process(name, [sys.executable, "-m", "runtime.scheduler"], {**base_env, **env},
                                             logs / f"{name}.log", cwd=Path.cwd())
            schedulers.append(record.model_copy(update={"env": env, "cwd": Path.cwd(),
                                                        "api_url": _url(cfg.host, port)}))
            state = state.model_copy(update={"processes": [*started, *schedulers]})
            save_state(state, self.directory)

        on_step("waiting for the scheduler(s) to become ready")
        self._wait(lambda: _ready(state), cfg.ready_timeout_s, [*started, *schedulers],
                   "the scheduler did not become ready")
        if cfg.monitoring:
            state = self.start_monitoring(cfg.alert_time_scale, on_step)
        return UpResult(state, already_running=False, created_topology=created)

    def start_monitoring(self, alert_time_scale: float, on_step: Step = _no_step) -> LocalState:
        """Start Prometheus, Alertmanager and the alert receiver on the running platform (replacing any).

        The scrape targets are the platform's: every scheduler replica, each replica's Dask dashboard and
        the emulator's admin port. Data stays in ``monitoring/`` across restarts of the stack.
        """
        from runtime.local.prometheus.stack import ready as monitoring_ready
        from runtime.local.prometheus.stack import start_monitoring

        binaries = _monitoring_binaries()
        state = self.stop_monitoring()
        host = self.config.host
        ports = processes.free_ports(host, 3)
        on_step(f"starting Prometheus and Alertmanager (alert time scale {alert_time_scale:g})")
        info, records = start_monitoring(self.directory / MONITORING_DIR, scrape_targets(state), alert_time_scale,
                                         host, (ports[0], ports[1], ports[2]), _base_env(), binaries)
        state = state.model_copy(update={"processes": [*state.processes, *records], "monitoring": info})
        save_state(state, self.directory)
        try:
            self._wait(lambda: monitoring_ready(info), MONITORING_START_TIMEOUT_S, records,
                       "monitoring did not become ready")
        except LocalPlatformError:
            self.stop_monitoring()  # the rest of the platform keeps running, without half a monitoring stack
            raise
        return state

    def stop_monitoring(self, grace_s: float = STOP_GRACE_S) -> LocalState:
        """Stop the monitoring processes of the running platform (if any) and forget them; returns the state."""
        from runtime.local.prometheus.stack import PROCESS_NAMES

        state = self.state  # not running_state(): a dead Prometheus must still be stoppable
        if state is None:
            raise LocalPlatformError(f"the local platform is not running (state: {self.directory})")
        for record in reversed([p for p in state.processes if p.name in PROCESS_NAMES]):
            processes.stop_process(record, grace_s)
        state = state.model_copy(update={"processes": [p for p in state.processes if p.name not in PROCESS_NAMES],
                                         "monitoring": None})
        save_state(state, self.directory)
        return state

    def restart_scheduler(self, on_step: Step = _no_step, drain_timeout_s: float = DRAIN_TIMEOUT_S,
                          grace_s: float = STOP_GRACE_S, names: Collection[str] | None = None) -> list[Restarted]:
        """Replace every scheduler replica in turn (a rolling upgrade) and leave the emulator alone.

        Dead replicas come back first: they consume nothing, so starting them costs no capacity, and a
        live one is stopped only once another replica is ready to take its jobs (with a single replica
        there is none, so its jobs wait in the subscription while it restarts). Each live replica is
        drained (it takes no new job; the others keep consuming), its in-flight jobs finish, it stops,
        and it starts again with the same settings and port; the next one is only touched once this one
        is ready. ``names`` limits the restart to those replicas.
        """
        state = self.recorded_state()
        emulator = state.process(EMULATOR)
        if emulator is None or not processes.is_alive(emulator):
            # A replica cannot become ready without its broker: bring the broker back first.
            raise LocalPlatformError("the Pub/Sub emulator is not running: run `gpurt local restart-broker` first, "
                                     "then `gpurt local restart-scheduler`")
        replicas = [p for p in state.schedulers() if names is None or p.name in names]
        unknown = set(names or ()) - {p.name for p in replicas}
        if unknown:
            raise LocalPlatformError(f"no scheduler replica called {', '.join(sorted(unknown))}")
        if any(not p.env for p in replicas):
            raise LocalPlatformError("this platform was started by an older gpurt that did not record the "
                                     "scheduler's settings; restart it with `gpurt local down` and `gpurt local up`")
        # sorted() is stable: dead replicas first, each group in the platform's order.
        done = []
        for old in sorted(replicas, key=processes.is_alive):
            drained = False
            if processes.is_alive(old):
                self._wait_for_another_ready(state, old, on_step)
                on_step(f"draining {old.name} (pid {old.pid})")
                drained = _drain(old.api_url or state.api_url, state.control_token, drain_timeout_s)
                on_step(f"stopping {old.name}")
                processes.stop_process(old, grace_s)
            on_step(f"starting {old.name} again")
            new = processes.start_process(old.name, old.command, {**_base_env(), **old.env}, old.log_path,
                                          cwd=old.cwd).model_copy(update={"env": old.env, "cwd": old.cwd,
                                                                          "api_url": old.api_url})
            state = state.model_copy(update={"processes": [new if p.name == old.name else p
                                                           for p in state.processes]})
            save_state(state, self.directory)
            self._wait(lambda rec=new, token=state.control_token: _replica_ready(rec, token),
                       self.config.ready_timeout_s, [emulator, new], f"{old.name} did not become ready again")
            done.append(Restarted(old.name, old.pid, new.pid, drained))
        return done

    def _wait_for_another_ready(self, state: LocalState, replica: ProcessRecord, on_step: Step) -> None:
        """Wait until a replica other than ``replica`` is ready, so stopping it leaves a consumer. A platform
        of one replica has no other, and its restart goes ahead."""
        others = [p for p in state.schedulers() if p.name != replica.name]
        if not others:
            return
        on_step(f"waiting for a replica other than {replica.name} to be ready")

        def another_ready() -> bool:
            return any(processes.is_alive(p) and _replica_ready(p, state.control_token) for p in others)

        if not processes.wait_until(another_ready, self.config.ready_timeout_s, interval_s=0.5):
            raise LocalPlatformError(
                f"no replica other than {replica.name} became ready within {self.config.ready_timeout_s:.0f} s, "
                f"so stopping {replica.name} would leave no consumer; {replica.name} was left running. Restart "
                f"the others first: `gpurt local status` shows which")

    def kill_scheduler(self, name: str) -> int:
        """SIGKILL one scheduler replica and its Dask workers, as a crash would (drills). Returns its pid."""
        record = self.running_state().process(name)
        if record is None or record.api_url is None:
            raise LocalPlatformError(f"no scheduler replica called {name!r}")
        processes.kill_process(record, STOP_GRACE_S)
        return record.pid

    def restart_emulator(self, on_step: Step = _no_step) -> int:
        """Stop the Pub/Sub emulator, start it again on its ports and recreate the contract's topology.

        The builtin broker keeps its state on disk, so topics, subscriptions and every unacknowledged
        message (waiting, leased, dead-lettered, results no one had pulled yet) are there again, with their
        delivery attempts; the official emulator keeps everything in memory, so on it all of that is gone
        (docs/local-platform.md). The schedulers reconnect on their own. Returns the new pid.
        """
        state = self.recorded_state()
        old = state.process(EMULATOR)
        if old is None:
            raise LocalPlatformError("the local platform's state names no emulator process")
        on_step(f"stopping the emulator (pid {old.pid})")
        processes.stop_process(old, STOP_GRACE_S)
        on_step("starting the emulator again")
        new = processes.start_process(EMULATOR, old.command, _base_env(), old.log_path)
        state = state.model_copy(update={"processes": [new if p.name == EMULATOR else p for p in state.processes]})
        save_state(state, self.directory)
        host, port = state.emulator_host.rsplit(":", 1)
        self._wait(lambda: processes.port_in_use(host, int(port)), EMULATOR_START_TIMEOUT_S, [new],
                   "the emulator did not open its port again")
        _ensure_topology(state)
        return new.pid

    def broker_checks_credentials(self) -> bool:
        """Whether the running broker refuses a call without a token its principals allow (the builtin, started
        with its credentials file); Google's emulator answers everyone."""
        state = self.state
        record = state.process(EMULATOR) if state is not None else None
        return record is not None and BROKER_CREDENTIALS_FLAG in record.command

    def broker_is_durable(self) -> bool:
        """Whether the running broker keeps its messages across a restart (the builtin, on its data folder)."""
        state = self.state
        record = state.process(EMULATOR) if state is not None else None
        return record is not None and BROKER_DATA_DIR_FLAG in record.command

    @contextlib.contextmanager
    def intake_drained(self, timeout_s: float = DRAIN_TIMEOUT_S, on_step: Step = _no_step) -> Iterator[LocalState]:
        """Every live scheduler replica drained, its jobs finished and its stream closed, while the block runs.

        Intake resumes on every replica afterwards, also when the block fails. Closed streams matter to a
        broker restart: a stream closing while the broker goes away can lose the acknowledgements in it, and
        the jobs they finished run again. Raises ``LocalPlatformError`` when a replica does not get there
        within ``timeout_s`` or does not take intake back.
        """
        # Only live replicas are drained: a dead one consumes nothing (restart_scheduler brings it back).
        state = self.recorded_state()
        replicas = [r for r in state.schedulers() if processes.is_alive(r)]
        try:
            on_step(f"draining {len(replicas)} scheduler replica(s)")
            for record in replicas:
                _set_maintenance(record.api_url or state.api_url, state.control_token, "drain")

            def closed() -> bool:
                return not any(_consuming(r.api_url or state.api_url, state.control_token) for r in replicas)

            if not processes.wait_until(closed, timeout_s, interval_s=0.25):
                raise LocalPlatformError(f"the scheduler replicas did not finish their jobs and stop consuming "
                                         f"within {timeout_s:.0f} s; nothing was restarted")
            yield state
        finally:
            on_step("resuming intake")
            refused = [r.name for r in replicas
                       if not _set_maintenance(r.api_url or state.api_url, state.control_token, "normal")]
            if refused and sys.exc_info()[1] is None:  # else the block's own failure says more
                raise LocalPlatformError(f"could not resume intake on {', '.join(refused)}: run "
                                         "`gpurt local restart-scheduler` to start them afresh")

    def restart_broker(self, on_step: Step = _no_step, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> BrokerRestarted:
        """Restart only the Pub/Sub emulator, losing nothing: intake drained, the emulator restarted, intake resumed.

        The schedulers keep running and reconnect on their own. On the builtin broker every message waiting
        or unpulled is there again after the restart; the official emulator keeps nothing (``broker_is_durable``).
        The broker may have died already (the state it crashed in is what the runbooks recover from): then it
        is simply started again on its ports and data folder.
        """
        state = self.recorded_state()
        old = state.process(EMULATOR)
        if old is None:
            raise LocalPlatformError("the local platform's state names no emulator process")
        durable = self.broker_is_durable()
        with self.intake_drained(drain_timeout_s, on_step):
            new_pid = self.restart_emulator(on_step)
        return BrokerRestarted(old_pid=old.pid, new_pid=new_pid, durable=durable)

    def down(self, drain_timeout_s: float = DRAIN_TIMEOUT_S, grace_s: float = STOP_GRACE_S) -> DownResult:
        """Drain the scheduler (in-flight jobs finish), stop every process, remove the state file."""
        state = self.state
        if state is None:
            return DownResult(was_running=False, drained=False, killed=[])
        live = [p for p in state.schedulers() if processes.is_alive(p)]
        # Drain all replicas first, so a draining one's work is not handed to one about to stop.
        drained = drain_timeout_s > 0 and bool(live)
        if drained:
            for record in live:
                _set_maintenance(record.api_url or state.api_url, state.control_token, "drain")
            drained = all(_drain(r.api_url or state.api_url, state.control_token, drain_timeout_s) for r in live)
        killed = self._stop_all(state, grace_s)
        for secret in (TOKEN_FILE, CREDENTIALS_FILE, SCHEDULER_TOKEN_FILE):
            (self.directory / secret).unlink(missing_ok=True)
        clear_state(self.directory)
        return DownResult(was_running=True, drained=drained, killed=killed)

    def status(self) -> PlatformStatus:
        """Processes, health, readiness, pools and backlog of the platform (works when down, too)."""
        return collect_status(self.state, self.directory)

    # --- clients -------------------------------------------------------------------------------------

    def target(self) -> Target:
        """Endpoints and token of the running platform."""
        state = self.running_state()
        return Target(api_url=state.api_url, project=state.project, token=state.control_token,
                      emulator_host=state.emulator_host, emulator_admin_url=state.emulator_admin_url,
                      source="local state", emulator_token=state.broker_token,
                      emulator_user_token=state.broker_user_token,
                      emulator_queue_tokens=dict(state.broker_queue_tokens))

    def api(self) -> ApiClient:
        """An authenticated API client of the running scheduler (close it, or use ``with``)."""
        state = self.running_state()
        return ApiClient(state.api_url, state.control_token)

    def pubsub(self, as_user: bool = False) -> PubSubClients:
        """Pub/Sub clients bound to the platform's emulator (close them when done), as its operator (everything)
        or, with ``as_user``, as a user (publish requests, read results on subscriptions of its own)."""
        state = self.running_state()
        return make_clients(state.project, state.emulator_host,
                            state.broker_user_token if as_user else state.broker_token)

    # --- helpers -------------------------------------------------------------------------------------

    def _check_port(self, port: int, what: str) -> None:
        if port != 0 and processes.port_in_use(self.config.host, port):
            raise LocalPlatformError(f"port {port} on {self.config.host} is taken, so the {what} cannot use it; "
                                     "stop what holds it or choose another port")

    def _wait(self, predicate: Callable[[], bool], timeout_s: float, watched: list[ProcessRecord],
              failure: str) -> None:
        def done_or_dead() -> bool:
            return predicate() or any(not processes.is_alive(p) for p in watched)

        processes.wait_until(done_or_dead, timeout_s, interval_s=0.25)
        if predicate():
            return
        dead = next((p for p in watched if not processes.is_alive(p)), None)
        culprit = dead or watched[-1]
        reason = f"the {culprit.name} process exited" if dead else f"timed out after {timeout_s:.0f} s"
        raise LocalPlatformError(f"{failure}: {reason}. Last lines of {culprit.log_path}:\n"
                                 f"{processes.log_tail(culprit.log_path)}")

    @staticmethod
    def _stop_all(state: LocalState, grace_s: float = STOP_GRACE_S) -> list[str]:
        # The scheduler first: it must not see its broker vanish while it still finishes jobs.
        killed = []
        for record in reversed(state.processes):
            if processes.stop_process(record, grace_s):
                killed.append(record.name)
        return killed


def _is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url(host: str, port: int) -> str:
    return f"http://{host}:{port}"


def _monitoring_binaries() -> Binaries:
    from runtime.local.prometheus.stack import MonitoringUnavailable, find_binaries

    try:
        return find_binaries()
    except MonitoringUnavailable as exc:
        raise LocalPlatformError(f"monitoring needs Prometheus and Alertmanager: {exc}") from None


def scrape_targets(state: LocalState) -> ScrapeTargets:
    """The platform's ``/metrics`` endpoints: scheduler replicas, their Dask dashboards, the emulator's admin port."""
    replicas = state.schedulers()
    return ScrapeTargets(
        schedulers=tuple(_host_port(r.api_url) for r in replicas if r.api_url),
        dask=tuple(r.env[SchedulerEnv.DASK_DASHBOARD] for r in replicas if r.env.get(SchedulerEnv.DASK_DASHBOARD)),
        emulator=(_host_port(state.emulator_admin_url),) if state.emulator_admin_url else ())


def _host_port(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/")


def _emulator_command(cfg: LocalConfig, port: int, admin_port: int, rest_port: int, data_dir: Path,
                      credentials: Path) -> list[str]:
    """The command line of the configured broker on ``cfg.host:port`` (the builtin durable in ``data_dir``, taking
    calls only with a token of ``credentials``)."""
    if cfg.broker is Broker.BUILTIN:
        return [sys.executable, "-m", "runtime.local.broker", "--host", cfg.host, "--port", str(port),
                "--admin-port", str(admin_port), "--rest-port", str(rest_port),
                "--time-scale", str(cfg.emulator_time_scale), BROKER_DATA_DIR_FLAG, str(data_dir),
                BROKER_CREDENTIALS_FLAG, str(credentials), "--log-max-bytes", str(LOG_MAX_BYTES)]
    from runtime.local.broker.official import OfficialEmulatorError, find_official_emulator

    try:
        official = find_official_emulator()
    except OfficialEmulatorError as error:
        raise LocalPlatformError(str(error)) from error
    if official is None:
        raise LocalPlatformError("--broker official needs the gcloud CLI with its Pub/Sub emulator component and "
                                 "Java; without them use the builtin broker (the default)")
    return official.command(cfg.host, port)


def _base_env() -> dict[str, str]:
    """The caller's environment for a child process, less anything that would point it at another emulator, and
    less a control token of the caller's (another platform's): no process of the platform gets one that way."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in (SchedulerEnv.PUBSUB_EMULATOR_HOST, SchedulerEnv.CONTROL_TOKEN, SchedulerEnv.CONTROL_TOKEN_FILE,
                 SchedulerEnv.PUBSUB_EMULATOR_TOKEN_FILE):
        env.pop(name, None)
    return env


def _ready(state: LocalState) -> bool:
    replicas = state.schedulers()
    return bool(replicas) and all(_replica_ready(record, state.control_token) for record in state.schedulers())


def _replica_ready(record: ProcessRecord, token: str) -> bool:
    with ApiClient(record.api_url or "", token, timeout_s=2.0) as api:
        return api.is_ready()


def _set_maintenance(api_url: str, token: str, mode: Literal["drain", "normal"]) -> bool:
    """Drain or resume the replica at ``api_url`` alone (the platform's own steps), leaving the maintenance mode
    every replica follows as the operator set it; False if it did not answer."""
    with ApiClient(api_url, token, timeout_s=5.0) as api:
        try:
            api.set_maintenance(mode, replica_only=True)
        except ApiError:
            return False
    return True


def _consuming(api_url: str, token: str) -> bool:
    """Whether the replica's consumer still has a stream open (unreachable: False, it consumes nothing)."""
    with ApiClient(api_url, token, timeout_s=5.0) as api:
        try:
            return bool(api.status().get("consuming"))
        except ApiError:
            return False


def _drain(api_url: str, token: str, timeout_s: float) -> bool:
    """Put one scheduler in drain mode and wait until it runs no job; False if it did not get there."""
    if not _set_maintenance(api_url, token, "drain"):
        return False
    with ApiClient(api_url, token, timeout_s=5.0) as api:

        def idle() -> bool:
            try:
                return in_flight(api.status()) == 0
            except ApiError:
                return False

        return processes.wait_until(idle, timeout_s, interval_s=0.5)


def in_flight(status: Mapping[str, object]) -> int:
    """Jobs running now, from a ``GET /status`` body."""
    for key in ("in_flight", "jobs_in_flight"):
        value = status.get(key)
        if isinstance(value, int):
            return value
        if isinstance(value, list):
            return len(value)
    return 0
