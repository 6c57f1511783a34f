"""The gpu-scheduler builders: contract names and settings, hardening, probes, RBAC, and a preStop hook that
really drains (run against a loopback HTTP server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from runtime.manifests import scheduler
from runtime.manifests.common import RUN_AS_USER
from runtime.protocol import contract

SPEC = scheduler.SchedulerSpec(
    project="impulse-gpu-runtime",
    image="registry.example/scheduler:abc123",
    result_store="gs://impulse-results/results",
    extra_env={"GPURT_LOG_LEVEL": "debug", "GPURT_POOLS": "kubernetes"},
)


def _pod(deployment: dict[str, Any]) -> dict[str, Any]:
    return deployment["spec"]["template"]["spec"]


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = _pod(deployment)["containers"]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


def test_deployment_names_labels_and_port_follow_the_contract() -> None:
    deployment = scheduler.build_deployment(SPEC)
    assert deployment["metadata"]["name"] == contract.SCHEDULER_DEPLOYMENT
    assert deployment["metadata"]["namespace"] == contract.RUNTIME_NAMESPACE
    assert deployment["spec"]["selector"]["matchLabels"] == contract.SCHEDULER_LABELS
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert contract.SCHEDULER_LABELS.items() <= pod_labels.items()
    assert contract.COMMON_LABELS.items() <= pod_labels.items()
    container = _container(deployment)
    assert container["command"] == ["python", "-m", "runtime.scheduler"]
    assert container["ports"][0]["containerPort"] == contract.SCHEDULER_PORT
    assert _pod(deployment)["serviceAccountName"] == contract.SCHEDULER_SERVICE_ACCOUNT.k8s_service_account


def test_probes_hit_health_and_readiness_and_startup_fits_the_two_minute_budget() -> None:
    container = _container(scheduler.build_deployment(SPEC))
    assert container["livenessProbe"]["httpGet"]["path"] == contract.HEALTH_PATH
    assert container["readinessProbe"]["httpGet"]["path"] == contract.READY_PATH
    # On the probes' own listener, outside the API's connection cap; the Service exposes only the API.
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert ports == {scheduler.PORT_NAME: contract.SCHEDULER_PORT,
                     scheduler.PROBE_PORT_NAME: contract.SCHEDULER_PROBE_PORT}
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[kind]["httpGet"]["port"] == scheduler.PROBE_PORT_NAME
    assert _env(container)["GPURT_PROBE_PORT"] == str(contract.SCHEDULER_PROBE_PORT)
    assert [port["port"] for port in scheduler.build_service()["spec"]["ports"]] == [contract.SCHEDULER_PORT]
    startup = container["startupProbe"]
    assert startup["httpGet"]["path"] == contract.HEALTH_PATH
    assert startup["periodSeconds"] * startup["failureThreshold"] == contract.POD_READY_TIMEOUT_S


def test_environment_points_at_dask_store_token_and_pod_identity() -> None:
    env = _env(_container(scheduler.build_deployment(SPEC)))
    assert env["GPURT_PROJECT"] == SPEC.project
    assert env["GPURT_DASK_SCHEDULER"] == contract.DASK_SCHEDULER_ADDRESS
    assert env["GPURT_RESULT_STORE"] == SPEC.result_store
    assert env["GPURT_POOLS"] == env["GPURT_LEADER"] == "kubernetes"
    assert env["GPURT_PORT"] == str(contract.SCHEDULER_PORT)
    assert env["GPURT_LOG_LEVEL"] == "debug"
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env[contract.SchedulerEnv.CONTROL_TOKEN_FILE] == scheduler.TOKEN_FILE


def test_the_control_token_is_a_mounted_secret_file_and_in_no_environment_variable() -> None:
    deployment = scheduler.build_deployment(SPEC)
    pod, container = _pod(deployment), _container(deployment)
    assert not any("secretKeyRef" in item.get("valueFrom", {}) for item in container["env"])
    assert contract.SchedulerEnv.CONTROL_TOKEN not in _env(container)
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == scheduler.TOKEN_VOLUME]
    assert mount["readOnly"] is True and scheduler.TOKEN_FILE.startswith(mount["mountPath"] + "/")
    (volume,) = [v for v in pod["volumes"] if v["name"] == scheduler.TOKEN_VOLUME]
    assert volume["secret"]["secretName"] == contract.CONTROL_TOKEN_SECRET
    file_name = scheduler.TOKEN_FILE.removeprefix(mount["mountPath"] + "/")
    assert volume["secret"]["items"] == [{"key": contract.CONTROL_TOKEN_SECRET_KEY, "path": file_name}]
    assert volume["secret"]["defaultMode"] & 0o007 == 0  # not readable by others
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]  # the group may read it


def test_extra_env_overrides_instead_of_duplicating() -> None:
    names = [item["name"] for item in _container(scheduler.build_deployment(SPEC))["env"]]
    assert len(names) == len(set(names))


def test_pod_is_hardened_and_limited() -> None:
    deployment = scheduler.build_deployment(SPEC)
    pod, container = _pod(deployment), _container(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == RUN_AS_USER
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    (tmp,) = [m for m in container["volumeMounts"] if m["name"] != scheduler.TOKEN_VOLUME]
    assert tmp["mountPath"] == "/tmp"
    assert {"name": tmp["name"], "emptyDir": {"sizeLimit": scheduler.TMP_SIZE}} in pod["volumes"]


def test_rollout_keeps_capacity_spreads_zones_and_drains_within_the_ack_deadline() -> None:
    deployment = scheduler.build_deployment(SPEC)
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = _pod(deployment)
    keys = {constraint["topologyKey"] for constraint in pod["topologySpreadConstraints"]}
    assert "topology.kubernetes.io/zone" in keys
    assert 0 < pod["terminationGracePeriodSeconds"] < contract.ACK_DEADLINE_S
    assert _container(deployment)["lifecycle"]["preStop"]["exec"]["command"] == scheduler.drain_command()


class _Recorder(BaseHTTPRequestHandler):
    requests: ClassVar[list[tuple[str, str, str | None, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.requests.append((self.command, self.path, self.headers.get("Authorization"), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def control_api() -> Iterator[ThreadingHTTPServer]:
    _Recorder.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.mark.timeout(30)
def test_prestop_command_switches_the_replica_to_drain(control_api: ThreadingHTTPServer, tmp_path: Path) -> None:
    command = scheduler.drain_command(port=control_api.server_address[1])
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    env = {**os.environ, contract.SchedulerEnv.CONTROL_TOKEN_FILE: str(token_file)}
    subprocess.run([sys.executable, *command[1:]], env=env, check=True, timeout=20)
    ((method, path, auth, body),) = _Recorder.requests
    assert (method, path, auth) == ("POST", "/control/maintenance", "Bearer s3cret")
    assert json.loads(body) == {"mode": "drain"}


def test_service_and_disruption_budget_select_the_scheduler_pods() -> None:
    service = scheduler.build_service()
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == contract.SCHEDULER_LABELS
    (port,) = service["spec"]["ports"]
    assert port["port"] == contract.SCHEDULER_PORT
    assert contract.SCHEDULER_URL.startswith(f"http://{service['metadata']['name']}.{contract.RUNTIME_NAMESPACE}.")
    pdb = scheduler.build_pod_disruption_budget()
    assert pdb["spec"]["selector"]["matchLabels"] == contract.SCHEDULER_LABELS
    assert pdb["spec"]["maxUnavailable"] == 1


def test_service_account_is_bound_to_its_google_account() -> None:
    account = scheduler.build_service_account("gpu-scheduler@impulse.iam.gserviceaccount.com")
    assert account["metadata"]["name"] == contract.SCHEDULER_SERVICE_ACCOUNT.k8s_service_account
    assert account["metadata"]["namespace"] == contract.SCHEDULER_SERVICE_ACCOUNT.k8s_namespace
    assert account["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "gpu-scheduler@impulse.iam.gserviceaccount.com"
    }


def test_token_secret_holds_the_token_under_the_contract_key() -> None:
    secret = scheduler.build_control_token_secret("tok")
    assert secret["metadata"]["name"] == contract.CONTROL_TOKEN_SECRET
    assert secret["stringData"] == {contract.CONTROL_TOKEN_SECRET_KEY: "tok"}


def test_rbac_grants_only_the_leader_lease_and_worker_group_scaling() -> None:
    objects = {(o["kind"], o["metadata"]["namespace"]): o for o in scheduler.build_rbac()}
    lease_rules = objects[("Role", contract.RUNTIME_NAMESPACE)]["rules"]
    named = [rule for rule in lease_rules if "resourceNames" in rule]
    assert named == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [contract.LEADER_LEASE_NAME],
            "verbs": ["get", "update"],
        },
        # The maintenance mode every replica follows: read and patched by name, never created (the deploy does).
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [contract.MAINTENANCE_CONFIGMAP],
         "verbs": ["get", "patch"]},
    ]
    assert all(rule["resources"] == ["leases"] for rule in lease_rules if "resourceNames" not in rule)
    pool_rule, autoscaler_rule, cluster_rule, deployment_rule = objects[("Role", contract.COMPUTE_NAMESPACE)]["rules"]
    assert pool_rule == {
        "apiGroups": ["kubernetes.dask.org"],
        "resources": ["daskworkergroups"],
        "verbs": ["list", "patch"],
    }
    assert autoscaler_rule == {
        "apiGroups": ["kubernetes.dask.org"],
        "resources": ["daskautoscalers"],
        "resourceNames": ["gpu-dask-autoscaler"],
        "verbs": ["patch"],
    }
    # Rolling workers onto a new template: the cluster's worker template is read, old workers' Deployments go.
    assert cluster_rule == {"apiGroups": ["kubernetes.dask.org"], "resources": ["daskclusters"], "verbs": ["list"]}
    assert deployment_rule == {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list", "delete"]}
    for namespace in (contract.RUNTIME_NAMESPACE, contract.COMPUTE_NAMESPACE):
        binding = objects[("RoleBinding", namespace)]
        assert binding["roleRef"]["name"] == objects[("Role", namespace)]["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "gpu-scheduler", "namespace": contract.RUNTIME_NAMESPACE}
        ]
