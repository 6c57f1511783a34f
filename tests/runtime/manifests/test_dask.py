"""The Dask builders: a CPU-only scheduler, GPU worker groups per pool, the autoscaler, and clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.manifests import dask as d
from runtime.manifests.common import RUN_AS_USER, Resources
from runtime.protocol import contract

A100 = d.WorkerPoolSpec("a100", "nvidia-tesla-a100", 1, 1, 3, d.worker_resources("a2-highgpu-1g", 1))
T4 = d.WorkerPoolSpec("t4", "nvidia-tesla-t4", 2, 0, 6, d.worker_resources("n1-standard-16", 2))
_T4_ONE_GPU = d.worker_resources("n1-standard-4", 1)
SPEC = d.DaskClusterSpec(
    image="registry.example/worker:abc123", scheduler_image="registry.example/scheduler:abc123", pools=(A100, T4))


def _container(pod_spec: dict[str, Any]) -> dict[str, Any]:
    (container,) = pod_spec["containers"]
    return container


def test_scheduler_requests_no_gpu_and_runs_the_current_entry_point() -> None:
    scheduler = d.build_dask_cluster(SPEC)["spec"]["scheduler"]
    container = _container(scheduler["spec"])
    resources = container["resources"]
    assert contract.GPU_RESOURCE not in resources["limits"]
    assert contract.GPU_RESOURCE not in resources["requests"]
    assert resources == d.SCHEDULER_RESOURCES.to_manifest()
    assert container["command"][:2] == ["dask", "scheduler"] and "args" not in container
    assert str(contract.DASK_SCHEDULER_PORT) in container["command"]
    assert "tolerations" not in scheduler["spec"]
    assert contract.DASK_SCHEDULER_LABELS.items() <= scheduler["metadata"]["labels"].items()
    assert container["readinessProbe"]["timeoutSeconds"] <= container["readinessProbe"]["periodSeconds"]


def test_the_dask_scheduler_runs_the_small_cpu_image_and_the_workers_the_gpu_image() -> None:
    cluster = d.build_dask_cluster(SPEC)
    groups = [d.build_worker_group(SPEC, pool)["spec"]["worker"] for pool in SPEC.pools[1:]]
    workers = [cluster["spec"]["worker"], *groups]

    assert _container(cluster["spec"]["scheduler"]["spec"])["image"] == SPEC.scheduler_image != SPEC.image
    assert all(c["image"] == SPEC.image for worker in workers for c in worker["spec"]["containers"])


def test_primary_pool_is_the_clusters_own_gpu_worker_group() -> None:
    cluster = d.build_dask_cluster(SPEC)
    assert cluster["metadata"]["name"] == contract.DASK_CLUSTER_NAME
    assert cluster["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    worker = cluster["spec"]["worker"]
    assert worker["replicas"] == A100.min_workers
    pod = worker["spec"]
    container = _container(pod)
    assert container["image"] == SPEC.image
    assert container["resources"]["limits"][contract.GPU_RESOURCE] == "1"
    assert pod["nodeSelector"] == {"nvidia.com/gpu": "true", d.GKE_ACCELERATOR_LABEL: "nvidia-tesla-a100"}
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert pod["serviceAccountName"] == contract.RUNTIME_SERVICE_ACCOUNT.k8s_service_account
    labels = worker["metadata"]["labels"]
    assert labels[contract.DASK_POOL_LABEL] == "a100"
    assert contract.DASK_WORKER_LABELS.items() <= labels.items()


def test_worker_advertises_one_gpu_resource_and_thread_per_gpu() -> None:
    container = _container(d.build_worker_group(SPEC, T4)["spec"]["worker"]["spec"])
    args = container["args"]
    assert args[args.index("--resources") + 1] == f"{contract.DASK_GPU_RESOURCE}=2"
    assert args[args.index("--nthreads") + 1] == "2"
    assert args[:2] == ["dask", "worker"]
    assert args[args.index("--preload") + 1] == contract.DASK_WORKER_PRELOAD  # kernels warm before it joins
    assert container["resources"]["requests"][contract.GPU_RESOURCE] == "2"


@pytest.mark.parametrize("pod_of", [lambda c: c["spec"]["worker"]["spec"], lambda c: c["spec"]["scheduler"]["spec"]])
def test_every_dask_pod_is_hardened(pod_of: Any) -> None:
    pod = pod_of(d.build_dask_cluster(SPEC))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == RUN_AS_USER
    assert pod["automountServiceAccountToken"] is False
    context = _container(pod)["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"] == {"drop": ["ALL"]}
    mounted = {mount["name"] for mount in _container(pod)["volumeMounts"]}
    assert mounted == {volume["name"] for volume in pod["volumes"]}


def test_extra_pool_becomes_a_labelled_worker_group_of_the_cluster() -> None:
    group = d.build_worker_group(SPEC, T4)
    assert group["kind"] == "DaskWorkerGroup"
    assert group["metadata"]["name"] == f"{contract.DASK_CLUSTER_NAME}-t4"
    assert group["metadata"]["labels"][contract.DASK_POOL_LABEL] == "t4"
    assert group["spec"]["cluster"] == contract.DASK_CLUSTER_NAME
    assert group["spec"]["worker"]["spec"]["nodeSelector"][d.GKE_ACCELERATOR_LABEL] == "nvidia-tesla-t4"


def test_autoscaler_bounds_the_primary_pool() -> None:
    autoscaler = d.build_autoscaler(SPEC)
    assert autoscaler["spec"] == {"cluster": contract.DASK_CLUSTER_NAME, "minimum": 1, "maximum": 3}


def test_worker_group_names() -> None:
    assert d.worker_group_name("gpu-dask", "a100", primary=True) == "gpu-dask-default"
    assert d.worker_group_name("gpu-dask", "t4", primary=False) == "gpu-dask-t4"
    assert d.scheduler_address(contract.DASK_CLUSTER_NAME) == contract.DASK_SCHEDULER_ADDRESS


@pytest.mark.parametrize(
    ("machine", "gpus", "cpu", "memory"),
    [
        ("n1-standard-8", 1, "6000m", "22G"),
        ("a2-highgpu-2g", 2, "18000m", "127G"),
        ("g2-standard-12", 1, "9000m", "36G"),
    ],
)
def test_worker_resources_leave_a_quarter_of_the_node(machine: str, gpus: int, cpu: str, memory: str) -> None:
    assert d.worker_resources(machine, gpus) == Resources(cpu, memory, cpu, memory, gpus)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: d.worker_resources("e2-standard-4", 1), "unknown machine type"),
        (lambda: d.DaskClusterSpec(image="i", scheduler_image="s", pools=()), "at least one GPU pool"),
        (lambda: d.DaskClusterSpec(image="i", scheduler_image="s", pools=(A100, A100)), "repeat"),
        (lambda: d.DaskClusterSpec(image="i", scheduler_image="s", pools=(A100, _pool("default"))), "reserved"),
        (lambda: d.DaskClusterSpec(image="i", scheduler_image="s", pools=(A100, _pool("x" * 40))), "too long"),
        (lambda: d.WorkerPoolSpec("p", "nvidia-tesla-t4", 1, 3, 2, _T4_ONE_GPU), "min_workers"),
        (lambda: d.WorkerPoolSpec("p", "nvidia-tesla-t4", 2, 0, 2, _T4_ONE_GPU), "claim 1"),
    ],
)
def test_bad_specs_fail_with_a_clear_message(build: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def _pool(name: str) -> d.WorkerPoolSpec:
    return d.WorkerPoolSpec(name, "nvidia-tesla-t4", 1, 0, 1, _T4_ONE_GPU)


def test_every_dask_pod_runs_with_the_platforms_dask_settings() -> None:
    """The scheduler and every worker group get the settings as ``DASK_*`` variables that Dask itself reads
    back to the same values (idle CPU and bounded logs matter on the pods as much as locally)."""
    import json
    import os
    import subprocess
    import sys

    from runtime.manifests.dask_settings import DASK_SETTINGS

    cluster = d.build_dask_cluster(SPEC)
    pods = [cluster["spec"]["scheduler"]["spec"], cluster["spec"]["worker"]["spec"],
            d.build_worker_group(SPEC, T4)["spec"]["worker"]["spec"]]
    envs = [{e["name"]: e["value"] for e in _container(pod).get("env", []) if e["name"].startswith("DASK_")}
            for pod in pods]
    assert all(env == envs[0] for env in envs) and len(envs[0]) == len(DASK_SETTINGS)
    read_back = subprocess.run(
        [sys.executable, "-c", "import dask, distributed, json, sys; "
                               "print(json.dumps({k: dask.config.get(k) for k in json.loads(sys.argv[1])}))",
         json.dumps(list(DASK_SETTINGS))],
        env={**os.environ, **envs[0]}, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(read_back.stdout) == dict(DASK_SETTINGS)


def test_the_dask_scheduler_gives_large_freed_blocks_back_to_the_os() -> None:
    """Its pod pins glibc's mmap threshold as the gpu-scheduler does (runtime/scheduler/allocator.py), by name."""
    scheduler = d.build_dask_cluster(SPEC)["spec"]["scheduler"]
    env = {e["name"]: e["value"] for e in _container(scheduler["spec"])["env"]}
    assert env[contract.MALLOC_MMAP_THRESHOLD_ENV] == str(contract.MALLOC_MMAP_THRESHOLD_BYTES)


@pytest.mark.integration  # a real `dask scheduler`, as the DaskCluster's scheduler pod runs it
def test_the_operator_reads_the_adaptive_target_from_the_rendered_scheduler(tmp_path: Any) -> None:
    """The dask-kubernetes operator scales a worker group by what ``GET /api/v1/adaptive_target`` on the
    scheduler's dashboard port answers, and retires workers through ``POST /api/v1/retire_workers``: both
    answer on a scheduler started with the pod's own command and environment."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    from tests.runtime.scheduler.platform import wait_for

    container = _container(d.build_dask_cluster(SPEC)["spec"]["scheduler"]["spec"])
    env = {e["name"]: e["value"] for e in container["env"]}

    def free_port() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    rpc_port, http_port = free_port(), free_port()
    command = list(container["command"])
    command[command.index("--host") + 1] = "127.0.0.1"
    command[command.index("--port") + 1] = str(rpc_port)
    command[command.index("--dashboard-address") + 1] = f"127.0.0.1:{http_port}"
    command[0] = str(Path(sys.executable).with_name(command[0]))
    scheduler = subprocess.Popen(command, env={**os.environ, **env}, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        api = f"http://127.0.0.1:{http_port}/api/v1"

        def target() -> httpx.Response | None:
            try:
                return httpx.get(f"{api}/adaptive_target", timeout=2)
            except httpx.HTTPError:
                return None

        answer = wait_for(target, 60, "the Dask scheduler's HTTP API")
        assert answer.status_code == 200 and answer.json() == {"workers": 0}
        retired = httpx.post(f"{api}/retire_workers", json={"n": 0}, timeout=10)
        assert retired.status_code == 200 and retired.json() == {}
    finally:
        os.killpg(scheduler.pid, signal.SIGKILL)
        scheduler.wait(timeout=30)


def test_the_single_dask_scheduler_has_a_budget_refusing_its_eviction_while_healthy() -> None:
    """The budget selects the pod the operator makes from the cluster's scheduler template (its own builder, with
    its labels), and allows no eviction of it unless it is unready."""
    from dask_kubernetes.operator.controller.controller import build_scheduler_deployment_spec

    scheduler = d.build_dask_cluster(SPEC)["spec"]["scheduler"]
    deployment = build_scheduler_deployment_spec(SPEC.name, scheduler["spec"], {}, scheduler["metadata"]["labels"])
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = d.build_scheduler_disruption_budget(SPEC)
    assert budget["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert deployment["spec"]["replicas"] == 1
    # One replica: maxUnavailable 0 (minAvailable 1 alike) refuses every voluntary eviction; 1 would refuse none.
    assert budget["spec"]["maxUnavailable"] == 0 and "minAvailable" not in budget["spec"]
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
