"""Every input the program gives a resource, at any depth, is a property the provider SDK declares.

Mocks accept anything, so this walk over both stacks is what stands between a misspelt key in a raw dict
(a nested block, a Kubernetes manifest, Helm repository options) and a failed ``pulumi up``. Custom
resources have no SDK types: the Dask kinds are checked against their CRD schemas in ``test_manifests_schema``;
the Prometheus Operator kinds have no schema offline (no installed package ships their CRDs).
"""

from __future__ import annotations

import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pytest

from components.review.plan import STACKS, Plan
from tests.components.infra import stack_classes, stack_plan
from tests.components.sdk_inputs import args_class, check, unknown_inputs

CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
# Reads the whole program's plan of each stack (a few seconds of imports and mocks, shared with the other tests).
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stacks() -> dict[str, tuple[Plan, dict[str, type]]]:
    # The committed stacks' plans the other tests read, each with the classes recorded during its render.
    return {stack: (stack_plan(stack), stack_classes(stack)) for stack in STACKS}


@pytest.mark.parametrize("stack", STACKS)
def test_every_recorded_input_is_declared_by_the_sdk(
    stacks: dict[str, tuple[Plan, dict[str, type]]], stack: str
) -> None:
    plan, classes = stacks[stack]
    checked, problems = set(), {}
    for resource in plan.resources:
        if not resource.custom or classes[resource.type] is k8s.apiextensions.CustomResource:
            continue
        if resource.type == CRD:
            continue  # the dask-kubernetes package's own files, applied verbatim (test_dask.py compares them)
        checked.add(resource.type)
        if unknown := unknown_inputs(classes[resource.type], resource.props):
            problems[f"{resource.type} {resource.name}"] = unknown
    assert not problems
    # The walk saw the kinds that matter (so an empty problem list means something).
    assert {
        "gcp:container/cluster:Cluster", "gcp:container/nodePool:NodePool", "gcp:pubsub/subscription:Subscription",
        "gcp:storage/bucket:Bucket", "kubernetes:helm.sh/v3:Release", "kubernetes:apps/v1:Deployment",
        "kubernetes:apps/v1:DaemonSet", "kubernetes:networking.k8s.io/v1:NetworkPolicy", "pulumi:providers:kubernetes",
    } <= checked


def test_misspelt_nested_gcp_key_is_found() -> None:
    props = {
        "cluster": "gpu-scheduler",
        "nodeConfig": {"guestAccelerators": [{"type": "nvidia-tesla-t4", "gpuDriverInstalationConfig": {}}]},
        "autoscaling": {"minNodeCount": 0, "maxNodeCount": 2},
    }
    assert unknown_inputs(gcp.container.NodePool, props) == [
        "NodePool.nodeConfig.guestAccelerators[0].gpuDriverInstalationConfig"
    ]


def test_snake_case_key_in_a_raw_dict_is_found() -> None:
    # A raw dict goes on the wire as written: Python names are not translated to the provider's.
    props = {"topic": "t", "deadLetterPolicy": {"dead_letter_topic": "projects/p/topics/d"}}
    assert unknown_inputs(gcp.pubsub.Subscription, props) == ["Subscription.deadLetterPolicy.dead_letter_topic"]


def test_misspelt_key_deep_in_a_kubernetes_manifest_is_found() -> None:
    container = {"name": "c", "image": "i", "securityContext": {"runAsNonroot": True}}
    props = {"metadata": {"name": "d"}, "spec": {"template": {"spec": {"containers": [container]}}}}
    assert unknown_inputs(k8s.apps.v1.Deployment, props) == [
        "Deployment.spec.template.spec.containers[0].securityContext.runAsNonroot"
    ]


def test_free_form_maps_and_helm_values_are_not_second_guessed() -> None:
    props = {
        "chart": "c",
        "repositoryOpts": {"repo": "https://helm.dask.org"},
        "values": {"anything": {"the": "chart decides"}},
    }
    assert unknown_inputs(k8s.helm.v3.Release, props) == []
    assert unknown_inputs(k8s.helm.v3.Release, {"chart": "c", "repositoryOpts": {"url": "x"}}) == [
        "Release.repositoryOpts.url"
    ]


def test_labels_are_a_map_not_a_type() -> None:
    assert check({"labels": {"part-of": "gpu-runtime"}}, args_class(gcp.pubsub.Topic), "Topic") == []


def test_args_class_names() -> None:
    assert args_class(k8s.core.v1.Secret) is k8s.core.v1.SecretInitArgs
    assert args_class(gcp.storage.Bucket) is gcp.storage.BucketArgs
