"""Kubernetes-backed checks and the scheduler rollout undo, through the official client against recorded API JSON."""

from __future__ import annotations

import copy
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from runtime.protocol import contract
from tests.validation.recorded_kube import RecordedKubeApi
from validation.adapters.dask_info import KubeServiceDask
from validation.adapters.kube import ForwardError, KubernetesApi
from validation.checks.alerts import rules_in_cluster
from validation.checks.dask import gpu_workers
from validation.checks.scheduler import POD_POLL_INTERVAL_S, health_pods, pods_running
from validation.report import Status
from validation.rollback import kubernetes as rollout
from validation.runner import run_check

pytestmark = pytest.mark.timeout(60)
K8S = Path(__file__).parent / "fixtures" / "kubernetes"
NS = contract.RUNTIME_NAMESPACE
PODS = f"/api/v1/namespaces/{NS}/pods"


def _load(name: str) -> dict:
    return json.loads((K8S / name).read_text())


@pytest.fixture
def server() -> Iterator[RecordedKubeApi]:
    recorded = RecordedKubeApi({})
    yield recorded
    recorded.close()


def _kube(server: RecordedKubeApi) -> KubernetesApi:
    return KubernetesApi(server.api_client())


def test_pods_running_passes_and_sends_the_label_selector(server) -> None:
    server.routes[("GET", PODS)] = _load("scheduler_pods.json")

    result = run_check(pods_running(_kube(server), timeout_s=0))

    assert result.status is Status.PASS, result
    assert result.evidence.startswith("2 pod(s) Running and ready")
    assert server.requests[0].query["labelSelector"] == ["app=gpu-scheduler"]


def test_a_pending_pod_fails_after_the_deadline(server) -> None:
    pods = _load("scheduler_pods.json")
    pods["items"][1]["status"] = {"phase": "Pending", "containerStatuses": [
        {"name": "gpu-scheduler", "ready": False, "restartCount": 0, "image": "x", "imageID": "",
         "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
    server.routes[("GET", PODS)] = pods
    looks: list[float] = []  # the check's sleeps, on a clock of their own: no real waiting, however slow a GET

    result = run_check(pods_running(_kube(server), timeout_s=POD_POLL_INTERVAL_S * 2.5, sleep=looks.append,
                                    clock=lambda: sum(looks)))

    assert result.status is Status.FAIL
    assert "gpu-scheduler-6c9d8f7b5-9qvzr=Pending (not ready)" in result.evidence
    assert "gpurt rollback --kubernetes" in result.fix
    assert looks == [POD_POLL_INTERVAL_S] * 3  # it polled again until the deadline, then gave up
    assert sum(1 for r in server.requests if r.path == PODS) == 4


class _Forwards:
    """``kubernetes.stream.portforward`` stand-in: each call opens a socket pair whose far end answers one HTTP
    request the way a pod would (``answers`` maps pod name to status and body); calls are recorded."""

    def __init__(self, answers: dict[str, tuple[int, str]]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, str, str, str]] = []
        self.requests: list[bytes] = []
        self._threads: list[threading.Thread] = []

    def __call__(self, method: Any, pod: str, namespace: str, *, ports: str) -> Any:
        self.calls.append((method.__name__, pod, namespace, ports))
        near, far = socket.socketpair()
        status, body = self.answers[pod]
        thread = threading.Thread(target=self._serve, args=(far, status, body), daemon=True)
        thread.start()
        self._threads.append(thread)
        forwards = self

        class Forward:
            def socket(self, port: int) -> socket.socket:
                assert str(port) == ports
                return near

            def close(self) -> None:
                near.close()
                forwards.join()

        return Forward()

    def _serve(self, far: socket.socket, status: int, body: str) -> None:
        with far:
            request = b""
            while b"\r\n\r\n" not in request:
                request += far.recv(4096)
            self.requests.append(request)
            far.sendall(f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
                        f"content-length: {len(body)}\r\n\r\n{body}".encode())

    def join(self) -> None:
        for thread in self._threads:
            thread.join(timeout=5)


def test_healthz_through_a_port_forward_not_the_api_server_proxy(server) -> None:
    """A private cluster's control plane reaches the kubelet (10250), not port 8080: the check port-forwards."""
    server.routes[("GET", PODS)] = _load("scheduler_pods.json")
    pods = ("gpu-scheduler-6c9d8f7b5-2xk4p", "gpu-scheduler-6c9d8f7b5-9qvzr")
    forwards = _Forwards({pod: (200, '{"status":"ok"}') for pod in pods})
    kube = KubernetesApi(server.api_client(), portforward=forwards)

    result = run_check(health_pods(kube))

    assert result.status is Status.PASS, result
    assert forwards.calls == [("connect_get_namespaced_pod_portforward", pod, NS, "8080") for pod in pods]
    assert all(r.startswith(b"GET /healthz HTTP/1.0\r\n") for r in forwards.requests)
    assert not [r for r in server.requests if "proxy" in r.path]  # never the API server's proxy


def test_an_unhealthy_or_failing_pod_is_named(server) -> None:
    server.routes[("GET", PODS)] = _load("scheduler_pods.json")
    forwards = _Forwards({"gpu-scheduler-6c9d8f7b5-2xk4p": (200, '{"status":"ok"}'),
                          "gpu-scheduler-6c9d8f7b5-9qvzr": (200, '{"status":"degraded"}')})
    result = run_check(health_pods(KubernetesApi(server.api_client(), portforward=forwards)))
    assert result.status is Status.FAIL
    assert result.evidence.startswith("pod gpu-scheduler-6c9d8f7b5-9qvzr returned")

    forwards = _Forwards({"gpu-scheduler-6c9d8f7b5-2xk4p": (503, "starting")})
    kube = KubernetesApi(server.api_client(), portforward=forwards)
    with pytest.raises(ForwardError, match="GET /healthz on pod gpu-runtime/gpu-scheduler-6c9d8f7b5-2xk4p port "
                                           "8080 answered HTTP 503: 'starting'"):
        kube.pod_get(NS, "gpu-scheduler-6c9d8f7b5-2xk4p", 8080, "/healthz")


def _rules(*names: str) -> str:
    return yaml.safe_dump({"groups": [{"name": "g", "rules": [{"alert": n, "expr": "1"} for n in names]}]})


def test_cluster_rules_present_or_named_missing(server) -> None:
    server.routes[("GET", "/apis/monitoring.googleapis.com/v1/clusterrules")] = _load("clusterrules.json")

    ok = run_check(rules_in_cluster(_kube(server), render=lambda: _rules("GpuNodeDown", "GpuHighTemperature")))
    missing = run_check(rules_in_cluster(_kube(server), render=lambda: _rules("GpuNodeDown", "DlqGrowth")))

    assert ok.status is Status.PASS, ok
    assert missing.status is Status.FAIL
    assert missing.evidence == "1 alert(s) not loaded as ClusterRules: DlqGrowth"


DASK_POD = "gpu-dask-scheduler-7d9f8c6b5-x2k4p"


def _dask(server: RecordedKubeApi, identity: dict) -> tuple[KubeServiceDask, _Forwards]:
    """The Dask scheduler pod listed in compute (real pod JSON, renamed) and its dashboard behind a forward."""
    pods = _load("scheduler_pods.json")
    pod = copy.deepcopy(pods["items"][0])
    pod["metadata"].update(name=DASK_POD, namespace=contract.COMPUTE_NAMESPACE,
                           labels=dict(contract.DASK_SCHEDULER_LABELS))
    server.routes[("GET", f"/api/v1/namespaces/{contract.COMPUTE_NAMESPACE}/pods")] = {**pods, "items": [pod]}
    forwards = _Forwards({DASK_POD: (200, json.dumps(identity))})
    return KubeServiceDask(KubernetesApi(server.api_client(), portforward=forwards)), forwards


def test_dask_gpu_workers_from_the_dashboard_identity_through_a_port_forward(server) -> None:
    identity = _load("dask_identity.json")
    dask, forwards = _dask(server, identity)

    assert run_check(gpu_workers(dask, gpu_expected=True)).evidence == "2 GPU worker(s), 2 GPU in all"
    assert forwards.calls == [("connect_get_namespaced_pod_portforward", DASK_POD, "compute", "8787")]
    assert forwards.requests[0].startswith(b"GET /json/identity.json HTTP/1.0\r\n")
    assert server.requests[0].query["labelSelector"] == ["component=scheduler"]
    assert not [r for r in server.requests if "proxy" in r.path]  # never the API server's service proxy

    cpu_only = copy.deepcopy(identity)
    cpu_only["workers"]["tcp://10.12.5.2:42817"]["resources"] = {}
    result = run_check(gpu_workers(_dask(server, cpu_only)[0], gpu_expected=True))
    assert result.status is Status.FAIL
    assert result.evidence == "1 of 2 worker(s) lack the GPU resource: tcp://10.12.5.2:42817"


def test_zero_workers_on_scale_from_zero_pools_is_a_skip_with_the_next_step(server) -> None:
    dask, _ = _dask(server, {**_load("dask_identity.json"), "workers": {}})

    result = run_check(gpu_workers(dask, gpu_expected=True, scales_from_zero=True))

    assert result.status is Status.SKIP and "gpurt pools scale" in result.evidence


DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/{contract.SCHEDULER_DEPLOYMENT}"


def test_rollout_undo_patches_the_previous_template_and_waits(server) -> None:
    deployment = _load("deployment.json")
    server.routes[("GET", f"/apis/apps/v1/namespaces/{NS}/replicasets")] = _load("replicasets.json")
    reads = {"n": 0}

    def read(_: object) -> tuple[int, dict]:
        # After the patch the controller needs one more look before the new generation is rolled out.
        reads["n"] += 1
        current = copy.deepcopy(deployment)
        if reads["n"] == 2:
            current["metadata"]["generation"] = 8
        return 200, current

    server.routes[("GET", DEPLOYMENT)] = read
    server.routes[("PATCH", DEPLOYMENT)] = lambda body: (200, deployment)
    sleeps: list[float] = []

    plan = rollout.undo(rollout.KubernetesDeploymentApi(server.api_client()), sleep=sleeps.append)

    assert (plan.current_revision, plan.target_revision) == (5, 4)
    assert plan.target_images[0].endswith("/gpu-runtime/scheduler:9a1b2c3")
    patch = next(r for r in server.requests if r.method == "PATCH")
    assert patch.body[0]["op"] == "replace" and patch.body[0]["path"] == "/spec/template"
    assert patch.body[0]["value"]["metadata"]["labels"] == {"app": "gpu-scheduler"}
    assert len(sleeps) == 1  # one wait while generation 8 was not yet observed


def test_rollout_undo_to_an_unknown_revision_names_the_known_ones() -> None:
    with pytest.raises(rollout.RolloutError, match=r"revision 9 not found; known: \[3, 4\]"):
        rollout.plan_undo(_load("deployment.json"), _load("replicasets.json")["items"], to_revision=9)


def test_without_a_context_the_stacks_own_kubeconfig_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from validation.adapters.kube import api_client

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # not in a pod
    kubeconfig = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "gke",
        "clusters": [{"name": "gke", "cluster": {"server": "https://gke-1234.us-central1.gke.goog"}}],
        "contexts": [{"name": "gke", "context": {"cluster": "gke", "user": "ci"}}],
        "users": [{"name": "ci", "user": {"token": "t"}}],
    })

    assert api_client(None, kubeconfig).configuration.host == "https://gke-1234.us-central1.gke.goog"


DASK_OBJECTS = "/apis/kubernetes.dask.org/v1/namespaces/compute"


def _deployed_dask(stack: str = "production") -> tuple[Any, dict, list]:
    """What the deploy renders for the stack, and its DaskAutoscaler and worker groups as the cluster holds them
    (the operator's own ``-default`` group carries the primary pool's label on its worker template)."""
    from tests.components.infra import stack_config
    from validation.build import rendered_dask

    expected = rendered_dask(stack_config(stack))
    default = {"metadata": {"name": f"{contract.DASK_CLUSTER_NAME}-default"},
               "spec": {"cluster": contract.DASK_CLUSTER_NAME, "worker": {
                   "metadata": {"labels": {contract.DASK_POOL_LABEL: expected.primary_pool}}}}}
    groups = [default, *copy.deepcopy(list(expected.worker_groups.values()))]
    return expected, copy.deepcopy(expected.autoscaler), groups


def _bounds_check(server: RecordedKubeApi, autoscaler: dict, groups: list, expected: list) -> Any:
    from validation.checks.dask import autoscaler_bounds

    server.routes[("GET", f"{DASK_OBJECTS}/daskautoscalers")] = {"items": [autoscaler]}
    server.routes[("GET", f"{DASK_OBJECTS}/daskworkergroups")] = {"items": groups}
    return run_check(autoscaler_bounds(_kube(server), expected))


def test_deployed_autoscaler_bounds_are_compared_with_the_stacks(server) -> None:
    expected, autoscaler, groups = _deployed_dask()
    assert _bounds_check(server, autoscaler, groups, expected).status is Status.PASS

    drifted = copy.deepcopy(groups)
    drifted[1]["metadata"]["annotations"][contract.DASK_MAX_WORKERS_ANNOTATION] = "64"
    result = _bounds_check(server, autoscaler, drifted, expected)
    assert result.status is Status.FAIL
    assert result.evidence == ("DaskWorkerGroup gpu-dask-t4-spot allows 64 workers (gpu-runtime.dev/max-workers), "
                               "the stack says 32 (pool t4-spot)")

    wider = copy.deepcopy(autoscaler)
    wider["spec"]["maximum"] = 40
    result = _bounds_check(server, wider, groups, expected)
    assert result.status is Status.FAIL
    assert result.evidence == "DaskAutoscaler gpu-dask-autoscaler bounds 0..40, the stack says 0..16 (pool a100)"


def test_the_expected_bounds_follow_the_builders_rendering(server, monkeypatch) -> None:
    """No rule is restated in the check: a change to what the deploy's builders render moves what it expects."""
    from runtime.manifests import dask as manifests

    _, autoscaler, groups = _deployed_dask()  # the cluster as today's builders deployed it
    render_autoscaler, render_group = manifests.build_autoscaler, manifests.build_worker_group

    def wider_autoscaler(spec: manifests.DaskClusterSpec) -> dict:  # a planted change of the builder
        rendered = render_autoscaler(spec)
        rendered["spec"]["maximum"] += 2
        return rendered

    def wider_group(spec: manifests.DaskClusterSpec, pool: manifests.WorkerPoolSpec) -> dict:
        rendered = render_group(spec, pool)
        rendered["metadata"]["annotations"][contract.DASK_MAX_WORKERS_ANNOTATION] = str(pool.max_workers + 1)
        return rendered

    monkeypatch.setattr(manifests, "build_autoscaler", wider_autoscaler)
    monkeypatch.setattr(manifests, "build_worker_group", wider_group)
    changed, redeployed_autoscaler, redeployed_groups = _deployed_dask()

    result = _bounds_check(server, autoscaler, groups, changed)
    assert result.status is Status.FAIL
    assert result.evidence == ("DaskAutoscaler gpu-dask-autoscaler bounds 0..16, the stack says 0..18 (pool a100); "
                               "DaskWorkerGroup gpu-dask-t4-spot allows 32 workers (gpu-runtime.dev/max-workers), "
                               "the stack says 33 (pool t4-spot); DaskWorkerGroup gpu-dask-v100 allows 8 workers "
                               "(gpu-runtime.dev/max-workers), the stack says 9 (pool v100)")
    assert _bounds_check(server, redeployed_autoscaler, redeployed_groups, changed).status is Status.PASS


def test_bounds_an_operator_pinned_with_pools_scale_are_not_drift(server) -> None:
    from runtime.manifests.worker_group import DESIRED_ANNOTATION

    expected, autoscaler, groups = _deployed_dask()
    pinned = copy.deepcopy(autoscaler)
    pinned["spec"].update(minimum=3, maximum=3)
    scaled = copy.deepcopy(groups)
    scaled[0]["metadata"]["annotations"] = {DESIRED_ANNOTATION: "3"}

    assert _bounds_check(server, pinned, scaled, expected).status is Status.PASS
