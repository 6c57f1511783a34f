"""Start the monitoring processes of the local platform: Prometheus, Alertmanager and the webhook receiver.

The Debian packages ``prometheus`` and ``prometheus-alertmanager`` provide the binaries; this module only
writes their configuration under the platform's folder and starts them on loopback ports with their own
storage, whatever system service the packages may have installed. The caller records the processes in
its state (so ``down`` stops them) and waits for ``ready``.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from runtime.access.alert_notifications import NOTIFICATIONS_FILE
from runtime.access.local_monitoring import MonitoringInfo
from runtime.access.local_state import ProcessRecord
from runtime.local.processes import start_process
from runtime.local.prometheus import config
from runtime.protocol.contract import HEALTH_PATH

PROMETHEUS: Final = "prometheus"
ALERTMANAGER: Final = "alertmanager"
RECEIVER: Final = "alert-receiver"
PROCESS_NAMES: Final = (RECEIVER, ALERTMANAGER, PROMETHEUS)  # start order: each one's sink first
# Debian names Alertmanager's binary prometheus-alertmanager; upstream tarballs call it alertmanager.
ALERTMANAGER_BINARIES: Final = ("prometheus-alertmanager", "alertmanager")
INSTALL_COMMAND: Final = "sudo apt-get install -y prometheus prometheus-alertmanager  (or: make system-deps)"
# Local data is for looking at one session and its drills; a week is plenty and bounds the disk used.
RETENTION: Final = "7d"
READY_PROBE_TIMEOUT_S: Final = 2.0


class MonitoringUnavailable(RuntimeError):
    """Prometheus or Alertmanager is not installed; the message gives the install command."""


@dataclass(frozen=True)
class Binaries:
    """Paths of the two executables."""

    prometheus: str
    alertmanager: str


def find_binaries() -> Binaries:
    """The Prometheus and Alertmanager executables on PATH; ``MonitoringUnavailable`` names what is missing."""
    prometheus = shutil.which(PROMETHEUS)
    alertmanager = next((found for name in ALERTMANAGER_BINARIES if (found := shutil.which(name))), None)
    missing = [name for name, found in (("prometheus", prometheus), ("prometheus-alertmanager", alertmanager))
               if found is None]
    if prometheus is None or alertmanager is None:
        raise MonitoringUnavailable(f"{' and '.join(missing)} not found on PATH; install with: {INSTALL_COMMAND}")
    return Binaries(prometheus, alertmanager)


def start_monitoring(directory: Path, targets: config.ScrapeTargets, time_scale: float, host: str,
                     ports: tuple[int, int, int], env: Mapping[str, str],
                     binaries: Binaries | None = None) -> tuple[MonitoringInfo, list[ProcessRecord]]:
    """Write the configuration into ``directory`` and start receiver, Alertmanager and Prometheus.

    ``ports`` are (Prometheus, Alertmanager, receiver). Returns the monitoring record and the started
    processes in start order; nothing is waited for (see ``ready``).
    """
    found = binaries or find_binaries()
    prometheus_port, alertmanager_port, receiver_port = ports
    info = MonitoringInfo(
        prometheus_url=f"http://{host}:{prometheus_port}", alertmanager_url=f"http://{host}:{alertmanager_port}",
        receiver_url=f"http://{host}:{receiver_port}", directory=directory,
        notifications_file=directory / NOTIFICATIONS_FILE, alert_time_scale=time_scale,
        scrape_interval_s=config.SCRAPE_INTERVAL_S, evaluation_interval_s=config.EVALUATION_INTERVAL_S)
    config.write_yaml(config.build_rules(time_scale), directory / config.RULES_FILE)
    config.write_yaml(config.build_prometheus_config(targets, f"{host}:{alertmanager_port}"),
                      directory / config.PROMETHEUS_FILE)
    config.write_yaml(config.build_alertmanager_config(info.receiver_url), directory / config.ALERTMANAGER_FILE)
    logs = directory / "logs"
    commands = {
        RECEIVER: [sys.executable, "-m", "runtime.local.prometheus.receiver", "--host", host,
                   "--port", str(receiver_port),
                   "--record", str(info.notifications_file)],
        ALERTMANAGER: [found.alertmanager, f"--config.file={directory / config.ALERTMANAGER_FILE}",
                       f"--storage.path={directory / 'alertmanager'}",
                       f"--web.listen-address={host}:{alertmanager_port}",
                       # No gossip cluster: one Alertmanager, and it must not claim port 9094 of the machine.
                       "--cluster.listen-address=", "--log.level=warn"],
        PROMETHEUS: [found.prometheus, f"--config.file={directory / config.PROMETHEUS_FILE}",
                     f"--storage.tsdb.path={directory / 'prometheus'}", f"--storage.tsdb.retention.time={RETENTION}",
                     f"--web.listen-address={host}:{prometheus_port}",
                     f"--rules.alert.resend-delay={config.RESEND_DELAY}",
                     "--web.enable-lifecycle", "--log.level=warn"],
    }
    records = [start_process(name, commands[name], env, logs / f"{name}.log", cwd=directory)
               for name in PROCESS_NAMES]
    return info, records


def ready(info: MonitoringInfo) -> bool:
    """Whether all three answer: Prometheus and Alertmanager ``/-/ready``, the receiver ``/healthz``."""
    urls = (f"{info.prometheus_url}/-/ready", f"{info.alertmanager_url}/-/ready", f"{info.receiver_url}{HEALTH_PATH}")
    try:
        return all(httpx.get(url, timeout=READY_PROBE_TIMEOUT_S).status_code == 200 for url in urls)
    except httpx.HTTPError:
        return False
