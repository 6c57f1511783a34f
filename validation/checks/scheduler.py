"""gpu-scheduler checks: pods Running within the rollout budget (or the local process alive), and /healthz."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import httpx

from runtime.protocol import contract
from validation.adapters.kube import KubeApi
from validation.runner import Check, CheckFailed

# Between two looks at pods that are still starting (seconds): cheap for the API server, quick to notice.
POD_POLL_INTERVAL_S = 2.0
# Bounds a direct /healthz call (seconds); a healthy scheduler answers in milliseconds.
HEALTH_TIMEOUT_S = 5.0


def pods_running(kube: KubeApi, timeout_s: float = contract.POD_READY_TIMEOUT_S,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> Check:
    """All gpu-scheduler pods are Running and ready within ``timeout_s`` (the contract: two minutes)."""

    def run() -> str:
        deadline = clock() + timeout_s
        while True:
            pods = kube.list_pods(contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS)
            if pods and all(p.phase == "Running" and p.ready for p in pods):
                return f"{len(pods)} pod(s) Running and ready: {', '.join(p.name for p in pods)}"
            if clock() >= deadline:
                break
            sleep(POD_POLL_INTERVAL_S)
        seen = ", ".join(f"{p.name}={p.phase}{'' if p.ready else ' (not ready)'}" for p in pods) or "no pods"
        raise CheckFailed(
            f"after {timeout_s:.0f}s: {seen} in namespace {contract.RUNTIME_NAMESPACE}",
            "read the pod events and logs of deployment gpu-scheduler; if the new revision is at fault run "
            "`gpurt rollback --kubernetes` (docs/rollback.md)")

    return Check("scheduler.pods-running", run)


def process_running(is_running: Callable[[], tuple[bool, str]]) -> Check:
    """The local scheduler process is alive; ``is_running`` returns (alive, description)."""

    def run() -> str:
        alive, description = is_running()
        if not alive:
            raise CheckFailed(description, "start the local platform again with `gpurt local up`")
        return description

    return Check("scheduler.process-running", run)


def _expect_health(body: str, where: str) -> None:
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = body
    if parsed != contract.HEALTH_BODY:
        raise CheckFailed(f"{where} returned {body[:200]!r}, expected {json.dumps(contract.HEALTH_BODY)}",
                          "the scheduler is up but unhealthy: read its log for the failing dependency")


def health_http(base_url: str) -> Check:
    """``GET /healthz`` on ``base_url`` answers ``{"status":"ok"}``."""

    def run() -> str:
        url = base_url.rstrip("/") + contract.HEALTH_PATH
        try:
            response = httpx.get(url, timeout=HEALTH_TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise CheckFailed(f"{url} unreachable: {exc}",
                              "the scheduler API is down: start it (`gpurt local up`) and read its log") from None
        _expect_health(response.text, f"{url} (HTTP {response.status_code})")
        return f"{url} -> {response.text.strip()}"

    return Check("scheduler.healthz", run)


def health_pods(kube: KubeApi) -> Check:
    """``GET /healthz`` through the API server proxy answers ``{"status":"ok"}`` on every scheduler pod."""

    def run() -> str:
        pods = kube.list_pods(contract.RUNTIME_NAMESPACE, contract.SCHEDULER_LABELS)
        if not pods:
            raise CheckFailed(f"no gpu-scheduler pods in {contract.RUNTIME_NAMESPACE}",
                              "deploy the scheduler workload (pulumi up)")
        for pod in pods:
            body = kube.pod_get(contract.RUNTIME_NAMESPACE, pod.name, contract.SCHEDULER_PORT, contract.HEALTH_PATH)
            _expect_health(body, f"pod {pod.name}")
        return f"{len(pods)} pod(s) answer {json.dumps(contract.HEALTH_BODY)}"

    return Check("scheduler.healthz", run)
