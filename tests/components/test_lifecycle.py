"""Resource options of the rendered stacks: protected state, delete-first for fixed names, pools, providers."""

from __future__ import annotations

import pytest
import yaml

from components.lifecycle import FIXED_NAME_TYPES, STATEFUL_TYPES
from components.rendered import Resource
from components.review.plan import REPO_ROOT
from runtime.protocol import contract
from tests.components.infra import stack_plan

STACKS = ("staging", "production")
# Inputs that fix a GCP resource's physical name (an IAM member is fixed by its role and member).
NAME_INPUTS = ("name", "accountId", "repositoryId", "member")


def _custom(stack: str) -> list[Resource]:
    return [r for r in stack_plan(stack).resources if r.custom]


def test_production_protects_exactly_its_state() -> None:
    resources = _custom("production")
    protected = {(r.type, r.name) for r in resources if r.protect}

    gpu_pools = {(r.type, r.name) for r in resources
                 if r.type == "gcp:container/nodePool:NodePool" and "guestAccelerators" in r.props["nodeConfig"]}
    # State by type, and the GPU pools (components/gke.py), whose replacement must be acknowledged; not the deploy
    # probe's subscription, which holds disposable probes (components/pubsub.py, issue #45).
    probe = ("gcp:pubsub/subscription:Subscription", f"pubsub-{contract.PROBE_SUBSCRIPTION}")
    assert probe in {(r.type, r.name) for r in resources} and probe not in protected
    assert protected == {(r.type, r.name) for r in resources if r.type in STATEFUL_TYPES} - {probe} | gpu_pools
    # Every queue's topic and scheduler subscription, the desks' included.
    assert {name for t, name in protected if t == "gcp:pubsub/topic:Topic"} >= {
        "pubsub-gpu-job-request-urgent", "pubsub-gpu-job-request-rates-desk", "pubsub-gpu-job-request-market-risk"}
    # The registry is the bootstrap's (protected there: tests/components/test_bootstrap.py).
    assert {t for t, _ in protected} == (STATEFUL_TYPES - {"gcp:artifactregistry/repository:Repository"}) | {
        "gcp:container/nodePool:NodePool"}


def test_the_plan_shows_the_options() -> None:
    resources = stack_plan("production").to_json()["resources"]
    cluster = next(r for r in resources if r["type"] == "gcp:container/cluster:Cluster")

    assert (cluster["protect"], cluster["delete_before_replace"]) == (True, True)
    assert all(r["provider"] for r in resources if r["custom"] and r["type"].startswith("kubernetes:"))


def test_a_throw_away_stack_protects_nothing() -> None:
    staging = yaml.safe_load((REPO_ROOT / "Pulumi.staging.yaml").read_text())["config"]

    assert staging["gpu-runtime:deletionProtection"] is False
    assert not [r.name for r in _custom("staging") if r.protect]


@pytest.mark.parametrize("stack", STACKS)
def test_every_fixed_name_is_deleted_before_it_is_replaced(stack: str) -> None:
    gcp = [r for r in _custom(stack) if r.type.startswith("gcp:")]
    named = {r.type for r in gcp if any(key in r.props for key in NAME_INPUTS)}

    assert named <= FIXED_NAME_TYPES, f"add to components/lifecycle.py: {sorted(named - FIXED_NAME_TYPES)}"
    assert [r.name for r in gcp if r.type in FIXED_NAME_TYPES and not r.delete_before_replace] == []


@pytest.mark.parametrize("stack", STACKS)
def test_node_pools_leave_their_size_to_the_autoscaler(stack: str) -> None:
    pools = [r for r in _custom(stack) if r.type == "gcp:container/nodePool:NodePool"]

    # initialNodeCount is replace-on-change and GKE computes it: declaring it could only replace a pool.
    assert pools and [r.name for r in pools if "initialNodeCount" in r.props or r.ignore_changes] == []


def test_production_gpu_pools_are_protected_staging_pools_are_not() -> None:
    """Pulumi refuses to replace or delete a protected resource: a replace-on-change edit stops the deploy."""
    def gpu_pools(stack: str) -> dict[str, bool]:
        return {r.name: r.protect for r in _custom(stack)
                if r.type == "gcp:container/nodePool:NodePool" and "guestAccelerators" in r.props["nodeConfig"]}

    assert gpu_pools("production") and all(gpu_pools("production").values())
    assert gpu_pools("staging") and not any(gpu_pools("staging").values())


@pytest.mark.parametrize("stack", STACKS)
def test_kubernetes_objects_only_reach_the_clusters_own_provider(stack: str) -> None:
    config = yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    resources = stack_plan(stack).resources
    [provider] = [r for r in resources if r.type == "pulumi:providers:kubernetes"]
    kubernetes = [r for r in resources if r.custom and r.type.startswith("kubernetes:")]

    assert "kubernetes" in config["pulumi:disable-default-providers"]
    assert kubernetes and {r.provider.rsplit("::", 1)[0] for r in kubernetes} == {provider.urn}
