"""Policy rules: each has a compliant and a violating case; the pulumi-policy pack reports the same."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
    StackValidationPolicy,
)

from components.policy import rules
from components.policy.pack import build_policies
from components.rendered import Resource
from runtime.protocol import contract

SUB = rules.SUBSCRIPTION


def _subject(type_: str, props: dict[str, Any], name: str = "r") -> Resource:
    return Resource(type_, name, props)


def _pull_sub(**overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "topic": "gpu-job-request",
        "ackDeadlineSeconds": 600,
        "deadLetterPolicy": {"deadLetterTopic": "projects/p/topics/gpu-job-request-dlq", "maxDeliveryAttempts": 5.0},
    }
    props.update(overrides)
    return props


# --- pubsub-dead-letter ------------------------------------------------------------------------------


def test_dead_letter_policy_in_range_passes() -> None:
    assert rules.check_subscription_dead_letter(_subject(SUB, _pull_sub())) == []
    exempt = {"topic": "gpu-job-request-dlq", "labels": dict([contract.NO_DEAD_LETTER_LABEL])}
    assert rules.check_subscription_dead_letter(_subject(SUB, exempt)) == []
    push = {"topic": "t", "pushConfig": {"pushEndpoint": "https://example.com"}}
    assert rules.check_subscription_dead_letter(_subject(SUB, push)) == []


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"topic": "gpu-job-request"}, "no dead-letter policy"),
        (_pull_sub(deadLetterPolicy={"deadLetterTopic": "projects/p/topics/d", "maxDeliveryAttempts": 4}), "outside"),
        (_pull_sub(deadLetterPolicy={"deadLetterTopic": "projects/p/topics/d", "maxDeliveryAttempts": 101}), "outside"),
        (_pull_sub(deadLetterPolicy={"maxDeliveryAttempts": 5}), "no deadLetterTopic"),
    ],
)
def test_dead_letter_policy_violations(props: dict[str, Any], message: str) -> None:
    [problem] = rules.check_subscription_dead_letter(_subject(SUB, props))
    assert message in problem


# --- dead-letter-topics-subscribed (stack rule) ------------------------------------------------------


def test_dead_letter_topic_with_subscription_passes() -> None:
    subjects = [_subject(SUB, _pull_sub(), "main"), _subject(SUB, {"topic": "gpu-job-request-dlq"}, "dlq")]
    assert rules.check_dead_letter_topics_subscribed(subjects) == []


def test_dead_letter_topic_without_subscription_fails() -> None:
    violations = rules.check_dead_letter_topics_subscribed([_subject(SUB, _pull_sub(), "main")])
    assert violations == [("main", "dead-letter topic gpu-job-request-dlq has no subscription")]


# --- no-service-account-keys -------------------------------------------------------------------------


def test_service_account_keys_are_forbidden() -> None:
    assert rules.check_no_service_account_keys(_subject(rules.SERVICE_ACCOUNT_KEY, {"serviceAccountId": "x"}))
    assert rules.check_no_service_account_keys(_subject("gcp:serviceaccount/account:Account", {})) == []


# --- gpu-pools-autoscale-tainted ---------------------------------------------------------------------

GPU_POOL: dict[str, Any] = {
    "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4},
    "nodeConfig": {
        "guestAccelerators": [{"type": "nvidia-tesla-t4", "count": 1}],
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
    },
}


def test_gpu_pool_with_autoscaling_and_taint_passes() -> None:
    assert rules.check_gpu_pool_autoscaling_and_taint(_subject(rules.NODE_POOL, GPU_POOL)) == []
    cpu_pool = {"nodeConfig": {"machineType": "e2-standard-4"}}  # not a GPU pool: out of scope
    assert rules.check_gpu_pool_autoscaling_and_taint(_subject(rules.NODE_POOL, cpu_pool)) == []


def test_gpu_pool_without_autoscaling_or_taint_fails() -> None:
    pool = copy.deepcopy(GPU_POOL)
    del pool["autoscaling"]
    pool["nodeConfig"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "PREFER_NO_SCHEDULE"}]
    problems = rules.check_gpu_pool_autoscaling_and_taint(_subject(rules.NODE_POOL, pool))
    assert len(problems) == 2
    assert "does not autoscale" in problems[0] and "lacks the taint" in problems[1]


# --- gke-private-workload-identity -------------------------------------------------------------------

CLUSTER: dict[str, Any] = {
    "privateClusterConfig": {"enablePrivateNodes": True},
    "workloadIdentityConfig": {"workloadPool": "p.svc.id.goog"},
}


def test_private_cluster_with_workload_identity_passes() -> None:
    assert rules.check_private_nodes_and_workload_identity(_subject(rules.CLUSTER, CLUSTER)) == []
    assert rules.check_private_nodes_and_workload_identity(_subject(rules.NODE_POOL, GPU_POOL)) == []


def test_public_nodes_or_missing_workload_identity_fail() -> None:
    cluster = {"privateClusterConfig": {"enablePrivateNodes": False}}
    assert len(rules.check_private_nodes_and_workload_identity(_subject(rules.CLUSTER, cluster))) == 2
    pool = copy.deepcopy(GPU_POOL)
    pool["nodeConfig"]["workloadMetadataConfig"] = {"mode": "GCE_METADATA"}
    [problem] = rules.check_private_nodes_and_workload_identity(_subject(rules.NODE_POOL, pool))
    assert "GCE_METADATA" in problem


# --- containers-resource-limits / containers-non-root ------------------------------------------------


def _deployment(container: dict[str, Any], pod_security: dict[str, Any] | None = None,
                annotations: dict[str, str] | None = None) -> Resource:
    template: dict[str, Any] = {"spec": {"containers": [container]}}
    if pod_security is not None:
        template["spec"]["securityContext"] = pod_security
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return _subject("kubernetes:apps/v1:Deployment", {"spec": {"template": template}}, "gpu-scheduler")


HARDENED = {
    "name": "app",
    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001},
}


def test_limited_non_root_container_passes() -> None:
    assert rules.check_container_limits(_deployment(HARDENED)) == []
    assert rules.check_container_non_root(_deployment(HARDENED)) == []
    # Non-root may also come from the pod's security context.
    inherits = {"name": "app", "resources": HARDENED["resources"]}
    assert rules.check_container_non_root(_deployment(inherits, pod_security={"runAsNonRoot": True})) == []


def test_container_without_limits_fails() -> None:
    container = {**HARDENED, "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}
    assert rules.check_container_limits(_deployment(container)) == [
        "container spec.template/app has no memory limit",
    ]


@pytest.mark.parametrize(
    ("security", "pod_security"),
    [({}, None), ({"runAsNonRoot": True, "runAsUser": 0}, None), ({"runAsNonRoot": False}, {"runAsNonRoot": True})],
)
def test_root_container_fails(security: dict[str, Any], pod_security: dict[str, Any] | None) -> None:
    container = {**HARDENED, "securityContext": security}
    [problem] = rules.check_container_non_root(_deployment(container, pod_security))
    assert "may run as root" in problem


def test_policy_exception_annotation_exempts_only_the_named_rule() -> None:
    root = {"name": "dcgm", "securityContext": {"runAsUser": 0}}
    annotations = {contract.POLICY_EXCEPTION_ANNOTATION: "containers-non-root: reads GPU counters as root"}
    subject = _deployment(root, annotations=annotations)
    assert rules.check_container_non_root(subject) == []
    assert rules.check_container_limits(subject)  # still needs limits


def test_dask_cluster_pod_specs_are_checked() -> None:
    worker = {"spec": {"containers": [HARDENED]}}
    scheduler = {"spec": {"containers": [{"name": "scheduler"}]}}
    subject = _subject(rules.DASK_CLUSTER, {"spec": {"worker": worker, "scheduler": scheduler}})
    assert rules.check_container_limits(subject) == ["container spec.scheduler/scheduler has no cpu or memory limit"]


# --- dask-scheduler-no-gpu ---------------------------------------------------------------------------


def _dask_cluster(scheduler_resources: dict[str, Any]) -> Resource:
    scheduler = {"spec": {"containers": [{"name": "scheduler", "resources": scheduler_resources}]}}
    return _subject(rules.DASK_CLUSTER, {"spec": {"scheduler": scheduler, "worker": {"spec": {"containers": []}}}})


def test_cpu_only_dask_scheduler_passes() -> None:
    assert rules.check_dask_scheduler_no_gpu(_dask_cluster({"limits": {"cpu": "1", "memory": "2Gi"}})) == []


def test_dask_scheduler_with_gpu_fails() -> None:
    subject = _dask_cluster({"limits": {"cpu": "1", "nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}})
    assert len(rules.check_dask_scheduler_no_gpu(subject)) == 2


# --- the pulumi-policy pack --------------------------------------------------------------------------


def test_pack_has_one_mandatory_policy_per_rule() -> None:
    policies = build_policies()
    assert [p.name for p in policies] == [r.id for r in (*rules.RESOURCE_RULES, *rules.STACK_RULES)]
    assert all(p.enforcement_level.value == "mandatory" for p in policies)


def _validate_resource(policy: Any, type_: str, props: dict[str, Any]) -> list[str]:
    reported: list[str] = []
    args = ResourceValidationArgs(type_, props, urn="urn:pulumi:s::p::t::n", name="n", opts=None, provider=None)
    policy.validate(args, lambda message, urn=None: reported.append(message))
    return reported


def test_pack_reports_resource_violations() -> None:
    by_name = {p.name: p for p in build_policies()}
    assert _validate_resource(by_name["no-service-account-keys"], rules.SERVICE_ACCOUNT_KEY, {}) == [
        "service-account keys are forbidden; use Workload Identity",
    ]
    assert _validate_resource(by_name["pubsub-dead-letter"], SUB, _pull_sub()) == []


def test_pack_reports_stack_violations_with_urn() -> None:
    [policy] = [p for p in build_policies() if p.name == "dead-letter-topics-subscribed"]
    assert isinstance(policy, StackValidationPolicy)
    resource = PolicyResource(SUB, _pull_sub(), "urn:main", "main", None, None, None, [], {})
    reported: list[tuple[str, str | None]] = []
    policy.validate(StackValidationArgs([resource]), lambda message, urn=None: reported.append((message, urn)))
    assert reported == [("main: dead-letter topic gpu-job-request-dlq has no subscription", "urn:main")]


def test_pack_reads_protect_from_the_engines_resource_options() -> None:
    """gpu-pools-protected in the pack: the engine's options carry protect; an unprotected GPU pool is refused."""
    [policy] = [p for p in build_policies() if p.name == "gpu-pools-protected"]
    cluster = PolicyResource(rules.CLUSTER, {"deletionProtection": True}, "urn:c", "c", _opts(True), None, None,
                             [], {})
    pool_props = {"name": "gpu-a100", "nodeConfig": {"guestAccelerators": [{"type": "nvidia-tesla-a100"}]}}

    def reported(protect: bool) -> list[str]:
        pool = PolicyResource(rules.NODE_POOL, pool_props, "urn:p", "p", _opts(protect), None, None, [], {})
        found: list[str] = []
        policy.validate(StackValidationArgs([cluster, pool]), lambda message, urn=None: found.append(message))
        return found

    assert reported(protect=True) == []
    assert reported(protect=False)[0].startswith("p: GPU node pool gpu-a100 is not protected")


def _opts(protect: bool) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])
