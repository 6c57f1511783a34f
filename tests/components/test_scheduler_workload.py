"""The SchedulerWorkload component under the plan's realistic mocks: every object parented, contract values,
the token kept secret, and the pack's container rules satisfied."""

from __future__ import annotations

import pulumi
import pytest

from components.policy.rules import check_container_limits, check_container_non_root
from components.rendered import Resource
from components.review.plan import Recording
from components.scheduler_workload import TYPE, SchedulerWorkload, SchedulerWorkloadArgs
from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, QueueSpec, decode, with_built_ins
from tests.components.infra import PROJECT, children_of, of_type, run

EMAIL = f"gpu-scheduler@{PROJECT}.iam.gserviceaccount.com"
TOKEN = "offline-test-token"


def _workload() -> SchedulerWorkload:
    return SchedulerWorkload(
        "scheduler",
        SchedulerWorkloadArgs(
            project=PROJECT,
            image="registry/scheduler:v1",
            result_store="gs://bucket/results",
            scheduler_service_account_email=EMAIL,
            control_token=pulumi.Output.secret(TOKEN),
            replicas=3,
        ),
    )


@pytest.fixture(scope="module")
def recording() -> Recording:
    return run(_workload)


def _one(recording: Recording, kind: str) -> dict:
    (resource,) = of_type(recording, f"kubernetes:{kind}")
    return resource.props


def test_every_resource_is_a_child_of_the_component(recording: Recording) -> None:
    (component,) = [r for r in recording.resources if r.type == TYPE]
    custom = [r for r in recording.resources if r.custom]
    # namespace, account, secret, 2 roles + 2 bindings, 2 policies, maintenance ConfigMap, deployment, service, PDB
    assert len(custom) == 13
    assert children_of(recording, component.name) == custom


def test_the_maintenance_configmap_is_created_empty_and_a_deploy_never_resets_its_mode(recording: Recording) -> None:
    """The replicas write the mode and their reports into it (runtime.scheduler.maintenance); their RBAC cannot
    create it, so the deploy does, before the Deployment, and ignores its data ever after."""
    (config_map,) = of_type(recording, "kubernetes:core/v1:ConfigMap")
    assert config_map.props["metadata"]["name"] == contract.MAINTENANCE_CONFIGMAP
    assert config_map.props["metadata"]["namespace"] == contract.RUNTIME_NAMESPACE
    assert "data" not in config_map.props and config_map.ignore_changes == ("data",)
    (deployment,) = of_type(recording, "kubernetes:apps/v1:Deployment")
    assert config_map.urn in deployment.dependencies


def test_deployment_runs_the_contract_service(recording: Recording) -> None:
    deployment = _one(recording, "apps/v1:Deployment")
    assert deployment["metadata"] == {
        "name": contract.SCHEDULER_DEPLOYMENT,
        "namespace": contract.RUNTIME_NAMESPACE,
        "labels": {**contract.COMMON_LABELS, **contract.SCHEDULER_LABELS},
    }
    assert deployment["spec"]["replicas"] == 3
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry/scheduler:v1"
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["GPURT_PROJECT"] == PROJECT
    assert env["GPURT_RESULT_STORE"] == "gs://bucket/results"
    assert env["GPURT_DASK_SCHEDULER"] == contract.DASK_SCHEDULER_ADDRESS


def test_deployment_passes_the_policy_packs_container_rules(recording: Recording) -> None:
    (deployment,) = of_type(recording, "kubernetes:apps/v1:Deployment")
    subject = Resource(deployment.type, deployment.name, deployment.props)
    assert check_container_limits(subject) == []
    assert check_container_non_root(subject) == []


def test_token_secret_is_a_pulumi_secret(recording: Recording) -> None:
    (secret,) = of_type(recording, "kubernetes:core/v1:Secret")
    assert secret.props["metadata"]["name"] == contract.CONTROL_TOKEN_SECRET
    assert secret.props["stringData"] == {contract.CONTROL_TOKEN_SECRET_KEY: TOKEN}
    assert TOKEN not in repr(secret.shown)


def test_service_account_rbac_and_policies(recording: Recording) -> None:
    account = _one(recording, "core/v1:ServiceAccount")
    assert account["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": EMAIL}
    roles = of_type(recording, "kubernetes:rbac.authorization.k8s.io/v1:Role")
    assert {r.props["metadata"]["namespace"] for r in roles} == {contract.RUNTIME_NAMESPACE, contract.COMPUTE_NAMESPACE}
    policies = of_type(recording, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    assert {p.props["metadata"]["namespace"] for p in policies} == {contract.RUNTIME_NAMESPACE}
    service = _one(recording, "core/v1:Service")
    assert service["spec"]["ports"][0]["port"] == contract.SCHEDULER_PORT
    pdb = _one(recording, "policy/v1:PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == contract.SCHEDULER_LABELS


def test_outputs() -> None:
    outputs: dict[str, str] = {}

    def program() -> None:
        workload = _workload()
        workload.service_url.apply(lambda value: outputs.setdefault("url", value))
        workload.deployment_name.apply(lambda value: outputs.setdefault("deployment", value))

    run(program)
    assert outputs == {"url": contract.SCHEDULER_URL, "deployment": contract.SCHEDULER_DEPLOYMENT}


def test_the_scheduler_is_told_the_stacks_queues() -> None:
    """issue #45: GPURT_QUEUES carries the stack's queues, weights and caps, as the scheduler decodes them."""
    desks = with_built_ins([QueueSpec("rates-desk", weight=2), QueueSpec("credit-desk", max_slots=8)])
    recording = run(lambda: SchedulerWorkload("scheduler", SchedulerWorkloadArgs(
        project=PROJECT, image="registry/scheduler:v1", result_store="gs://bucket/results",
        scheduler_service_account_email=EMAIL, control_token=pulumi.Output.secret(TOKEN), queues=desks)))
    (container,) = _one(recording, "apps/v1:Deployment")["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}

    assert decode(env[contract.SchedulerEnv.QUEUES]) == desks


def test_without_declared_queues_the_scheduler_is_told_the_built_in_ones(recording: Recording) -> None:
    (container,) = _one(recording, "apps/v1:Deployment")["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert decode(env[contract.SchedulerEnv.QUEUES]) == BUILT_IN_QUEUES
