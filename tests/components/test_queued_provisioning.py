"""A stack with a queued pool, rendered whole (the real ``__main__.py`` under the plan's mocks): the scheduler is
told which pools are queued, its Role may create, list and delete ProvisioningRequests (and what goes with
them) in ``compute``, and the IAM proof holds, fails without a verb the code needs, and fails on the same
grants in a stack without queued pools."""

from __future__ import annotations

import shutil
from dataclasses import replace
from typing import Any

import pytest
import yaml

from components.rendered import DEPLOYMENT, Resource
from components.review.iam_proof import ROLE, prove
from components.review.plan import REPO_ROOT, Plan, run_plan
from runtime.manifests import gpu_options, scheduler
from runtime.protocol import contract
from tests.components.infra import stack_config, stack_plan

WORKER_GROUP = "kubernetes:kubernetes.dask.org/v1:DaskWorkerGroup"
NODE_POOL = "gcp:container/nodePool:NodePool"
POOLS_ROLE = f"{contract.SCHEDULER_DEPLOYMENT}-pools"
QUEUED_POOL = {
    "name": "a100-flex", "machineType": "a2-highgpu-1g", "acceleratorType": "nvidia-tesla-a100",
    "acceleratorCount": 1, "minNodes": 0, "maxNodes": 8, "spot": False,
    "zones": ["us-central1-a", "us-central1-b"], "diskSizeGb": 200, "daskWorkersMin": 0, "daskWorkersMax": 8,
    "queuedProvisioning": True, "maxRunDurationSeconds": 86400,
}
PROVISIONING_CALLS = {
    ("autoscaling.x-k8s.io", "provisioningrequests"): {"create", "list", "delete"},
    ("", "podtemplates"): {"create", "list", "delete"},
}  # worker Deployments (list, delete) are every stack's: rolling workers onto a new template needs them too


@pytest.fixture(scope="module")
def queued_plan(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Production with a queued A100 pool added, planned from a copy of the program and project file."""
    root = tmp_path_factory.mktemp("queued-stack")
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO_ROOT / name, root / name)
    stack = yaml.safe_load((REPO_ROOT / "Pulumi.production.yaml").read_text())
    stack["config"]["gpu-runtime:gpuPools"].append(QUEUED_POOL)
    (root / "Pulumi.queued.yaml").write_text(yaml.safe_dump(stack))
    return run_plan("queued", root)


def _resources(plan: Plan) -> tuple[list[Resource], str]:
    project = next(r.props["project"] for r in plan.resources if r.type == "gcp:serviceaccount/account:Account")
    # The components too: the proof reads who may publish to each queue from the Pub/Sub component's input.
    return list(plan.resources), project


def _pools_role(resources: list[Resource]) -> Resource:
    [role] = [r for r in resources if r.type == ROLE and r.props["metadata"]["name"] == POOLS_ROLE]
    return role


def _granted(role: Resource) -> dict[tuple[str, str], set[str]]:
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in role.props["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    return granted


def _with_rules(resources: list[Resource], change: Any) -> list[Resource]:
    return [replace(r, props={**r.props, "rules": change(r.props["rules"])})
            if r.type == ROLE and r.props["metadata"]["name"] == POOLS_ROLE else r for r in resources]


def test_the_queued_stack_passes_every_policy_rule_and_the_proof(queued_plan: Plan) -> None:
    failed = {verdict.rule: verdict.violations for verdict in queued_plan.policy if not verdict.passed}
    assert failed == {}


def test_the_scheduler_is_told_which_pools_are_queued(queued_plan: Plan) -> None:
    [deployment] = [r for r in queued_plan.resources if r.type == DEPLOYMENT]
    env = {e["name"]: e.get("value") for e in deployment.props["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[contract.SchedulerEnv.QUEUED_POOLS] == "a100-flex=86400"


@pytest.mark.parametrize("stack", ("staging", "production"))
def test_a_stack_without_queued_pools_tells_and_grants_nothing_about_them(stack: str) -> None:
    resources, _ = _resources(stack_plan(stack))
    [deployment] = [r for r in resources if r.type == DEPLOYMENT]
    env = {e["name"] for e in deployment.props["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert contract.SchedulerEnv.QUEUED_POOLS not in env
    assert not set(_granted(_pools_role(resources))) & set(PROVISIONING_CALLS)


def test_the_queued_stack_grants_exactly_the_provisioning_verbs_in_compute(queued_plan: Plan) -> None:
    resources, _ = _resources(queued_plan)
    role = _pools_role(resources)
    granted = _granted(role)

    assert role.props["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    assert {key: granted[key] for key in PROVISIONING_CALLS} == PROVISIONING_CALLS


def test_the_proof_covers_every_provisioning_call_of_the_queued_stack(queued_plan: Plan) -> None:
    proof = prove(*_resources(queued_plan))

    assert proof.ok, "\n".join(proof.missing + proof.unused)
    assert not [line for line in proof.not_made if contract.SchedulerEnv.QUEUED_POOLS in line]
    proven = [line for line in proof.proven if "provisioningrequests" in line]
    assert len(proven) == 3 and all("via Role gpu-scheduler-pools" in line for line in proven)


def test_the_proof_fails_when_the_role_lacks_a_provisioning_verb(queued_plan: Plan) -> None:
    resources, project = _resources(queued_plan)

    def without_create(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**rule, "verbs": [v for v in rule["verbs"] if v != "create"]}
                if rule["resources"] == ["provisioningrequests"] else rule for rule in rules]

    proof = prove(_with_rules(resources, without_create), project)

    assert proof.missing == (
        f"('{contract.RUNTIME_NAMESPACE}', 'gpu-scheduler') may not create provisioningrequests in "
        f"{contract.COMPUTE_NAMESPACE}, needed by runtime.scheduler.pools.queued:QueuedProvisioner."
        "_request_capacity (create_namespaced_custom_object)",
    )


def test_the_proof_fails_on_provisioning_grants_in_a_stack_without_queued_pools() -> None:
    resources, project = _resources(stack_plan("production"))
    extra = scheduler.PROVISIONING_RULES
    proof = prove(_with_rules(resources, lambda rules: [*rules, *extra]), project)

    assert len(proof.unused) == sum(len(verbs) for verbs in PROVISIONING_CALLS.values())
    assert f"Role {contract.COMPUTE_NAMESPACE}/{POOLS_ROLE} grants create on provisioningrequests " \
           "(autoscaling.x-k8s.io), which no declared call needs" in proof.unused


def test_the_queued_pool_is_a_queued_node_pool_whose_workers_select_it(queued_plan: Plan) -> None:
    [pool] = [r for r in queued_plan.resources if r.type == NODE_POOL and r.props["name"] == "gpu-a100-flex"]
    [group] = [r for r in queued_plan.resources
               if r.type == WORKER_GROUP and r.props["metadata"]["name"] == "gpu-dask-a100-flex"]

    assert pool.props["queuedProvisioning"] == {"enabled": True}
    selector = group.props["spec"]["worker"]["spec"]["nodeSelector"]
    assert selector[gpu_options.NODE_POOL_LABEL] == pool.props["name"]
    assert group.props["spec"]["worker"]["replicas"] == 0


def test_the_setting_lists_queued_pools_with_their_run_duration() -> None:
    config = stack_config("production")
    assert config.queued_pools() == {}
    assert scheduler.queued_pools_setting({"a100-flex": 86400, "h100": None}) == "a100-flex=86400,h100"

