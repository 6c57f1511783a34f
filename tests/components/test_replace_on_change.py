"""Replace-on-change node-pool inputs: the recorded list is the provider's, `gpurt plan --diff` marks replacements,
and production refuses to replace a GPU pool it has not acknowledged."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
from typing import Any

import pulumi_gcp as gcp
import pytest
import yaml
from pulumi import _types
from pydantic.alias_generators import to_camel

from components.config import ConfigError, parse_stack_config
from components.gke import GkeCluster, GkeClusterArgs
from components.policy import rules
from components.rendered import Resource
from components.review import replace_on_change
from components.review.plan import REPO_ROOT
from components.review.plan_diff import diff_plans, to_markdown
from tests.components.infra import named, of_type, run, stack_plan
from tests.components.provider_force_new import extract
from tests.components.sdk_inputs import _container, _input_types

NODE_POOL = "gcp:container/nodePool:NodePool"
RECORDED = json.loads(replace_on_change.SCHEMA_FILE.read_text())
ROWS = RECORDED["resources"][NODE_POOL]
# A checkout of terraform-provider-google at the recorded tag re-derives the list (GPURT_TF_PROVIDER_GOOGLE=path).
PROVIDER_SOURCE = os.environ.get("GPURT_TF_PROVIDER_GOOGLE")


def _sdk_type(path: str) -> Any:
    """The SDK annotation at a Pulumi input path of NodePoolArgs (list elements stepped into); KeyError if none."""
    annotation: Any = gcp.container.NodePoolArgs
    for segment in path.split("."):
        names = {n: k for kind in _input_types(annotation) for n, k in _types.input_type_types(kind).items()}
        annotation = names[segment]
        origin, element = _container(annotation)
        if origin is not None and _input_types(element):
            annotation = element
    return annotation


def test_every_recorded_path_is_an_sdk_input_of_the_right_kind() -> None:
    for row in ROWS:
        annotation = _sdk_type(row["path"])
        origin, element = _container(annotation)
        is_block = bool(_input_types(annotation)) or (origin is not None and bool(_input_types(element)))
        assert is_block == row["block"], row


def test_every_pulumi_path_is_the_terraform_name_in_pulumis_spelling() -> None:
    for row in ROWS:
        for tf, pulumi_name in zip(row["terraform"].split("."), row["path"].split("."), strict=True):
            camel = to_camel(tf)
            # Pulumi pluralises list blocks: guest_accelerator -> guestAccelerators, node_affinity -> nodeAffinities.
            assert pulumi_name in (camel, f"{camel}s", f"{camel[:-1]}ies"), row


def test_the_list_holds_what_the_review_named() -> None:
    paths = {row["path"] for row in ROWS}
    assert {"nodeConfig.reservationAffinity", "nodeConfig.spot", "nodeConfig.guestAccelerators",
            "nodeConfig.guestAccelerators.gpuSharingConfig.maxSharedClientsPerGpu",
            "nodeConfig.guestAccelerators.gpuPartitionSize", "placementPolicy", "queuedProvisioning",
            "nodeConfig.metadata", "nodeConfig.oauthScopes", "nodeConfig.flexStart", "initialNodeCount"} <= paths
    # Updated in place by the provider: a new maximum or machine type must not be reported as a replacement.
    assert not paths & {"autoscaling.maxNodeCount", "nodeConfig.machineType", "nodeConfig.diskType",
                        "nodeConfig.gcfsConfig", "nodeLocations", "nodeConfig.labels"}


@pytest.mark.integration
@pytest.mark.skipif(PROVIDER_SOURCE is None, reason="set GPURT_TF_PROVIDER_GOOGLE to a terraform-provider-google "
                    "git checkout to re-derive the list")
def test_the_recorded_list_is_the_providers_own() -> None:
    """Re-derive from the Go source at the recorded commit (what docs/infrastructure.md says to run on an upgrade)."""
    commit = RECORDED["source"].split("(commit ")[1].split(")")[0]

    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(PROVIDER_SOURCE), "show", f"{commit}:{path}"], check=True,
                              capture_output=True, text=True, timeout=60).stdout

    base = "google/services/container/"
    found = extract(show(base + "resource_container_node_pool.go"), show(base + "node_config.go"))
    assert found == [row["terraform"] for row in ROWS]


# --- gpurt plan --diff --------------------------------------------------------------------------------------


def _production() -> dict[str, Any]:
    return stack_plan("production").to_json()


def _pool(document: dict[str, Any], name: str = "gke-gpu-a100") -> dict[str, Any]:
    [pool] = [r for r in document["resources"] if r["type"] == NODE_POOL and r["name"] == name]
    return pool


def test_adding_a_reservation_is_reported_as_a_replacement_of_a_protected_pool() -> None:
    base = _production()
    head = copy.deepcopy(base)
    _pool(head)["inputs"]["nodeConfig"]["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}

    diff = diff_plans(base, head, "main")

    [change] = diff.changed
    replaced = ("nodeConfig.reservationAffinity", "nodeConfig.reservationAffinity.consumeReservationType")
    assert change.replace == replaced and change.protected
    text = to_markdown(diff)
    assert "0 to change, 1 to **replace**" in text
    assert "**replace** (protected: Pulumi refuses it, see docs/runbooks/replace-gpu-pool.md)" in text
    assert diff.to_json()["changed"][0]["replace"] == list(replaced)


def test_a_replacement_the_program_unprotects_in_the_same_update_is_not_refused() -> None:
    """Pulumi refuses to replace a resource only if its new state is protected too (pulumi/pulumi#8873): a pool
    acknowledged in replaceGpuPools, or the deploy probe's subscription moved to the urgent topic (issue #45)."""
    base = _production()
    head = copy.deepcopy(base)
    _pool(head)["inputs"]["nodeConfig"]["reservationAffinity"] = {"consumeReservationType": "ANY_RESERVATION"}
    _pool(head)["protect"] = False

    [change] = diff_plans(base, head, "main").changed

    assert change.replace and not change.protected
    assert "refuses" not in to_markdown(diff_plans(base, head, "main"))


@pytest.mark.parametrize(
    ("edit", "replaced"),
    [
        (lambda p: p["nodeConfig"].update(spot=True), ("nodeConfig.spot",)),
        (lambda p: p["nodeConfig"]["guestAccelerators"][0].update(gpuPartitionSize="1g.5gb"),
         ("nodeConfig.guestAccelerators[0].gpuPartitionSize",)),
        (lambda p: p.update(placementPolicy={"type": "COMPACT"}), ("placementPolicy",)),
        (lambda p: p["nodeConfig"]["metadata"].update(extra="1"), ("nodeConfig.metadata.extra",)),
        (lambda p: p["autoscaling"].update(maxNodeCount=9), ()),
        (lambda p: p["nodeConfig"].update(machineType="a2-highgpu-2g"), ()),
    ],
)
def test_only_the_providers_replace_on_change_inputs_replace(edit: Any, replaced: tuple[str, ...]) -> None:
    base = _production()
    head = copy.deepcopy(base)
    edit(_pool(head)["inputs"])

    [change] = diff_plans(base, head, "main").changed
    assert change.replace == replaced
    assert ("update in place" in to_markdown(diff_plans(base, head, "main"))) is not bool(replaced)


# --- the policy: production GPU pools are protected unless acknowledged ---------------------------------------


def _subjects() -> list[Resource]:
    return list(stack_plan("production").resources)


def test_an_unprotected_production_gpu_pool_is_refused_unless_acknowledged() -> None:
    subjects = _subjects()
    assert rules.check_gpu_pools_protected(subjects) == []

    unprotected = [dataclasses.replace(s, protect=False) if s.name == "gke-gpu-a100" else s for s in subjects]
    [(resource, message)] = rules.check_gpu_pools_protected(unprotected)
    assert resource == "gke-gpu-a100" and "replaceGpuPools" in message

    acknowledged = [dataclasses.replace(s, props={**s.props, "replaceGpuPools": ["gpu-a100"]})
                    if s.type == rules.GKE_COMPONENT else s for s in unprotected]
    assert rules.check_gpu_pools_protected(acknowledged) == []


def test_replace_gpu_pools_lifts_protection_from_that_pool_only() -> None:
    raw = {key.split(":", 1)[1]: value for key, value in _production_values().items()
           if key.startswith("gpu-runtime:")}
    config = parse_stack_config({**raw, "replaceGpuPools": ["a100"]}, "impulse-gpu-runtime", "us-central1")
    recording = run(lambda: GkeCluster("gke", GkeClusterArgs(config=config)), project=config.project)

    protected = {r.name: r.protect for r in of_type(recording, NODE_POOL) if r.name.startswith("gke-gpu-")}
    assert protected == {"gke-gpu-a100": False, "gke-gpu-t4-spot": True, "gke-gpu-v100": True}
    [component] = [r for r in recording.resources if r.type == rules.GKE_COMPONENT]
    assert component.props["replaceGpuPools"] == ["gpu-a100"]
    subjects = list(recording.resources)
    assert rules.check_gpu_pools_protected(subjects) == []
    assert named(recording, NODE_POOL, "gke-gpu-a100").props["nodeConfig"]["gcfsConfig"] == {"enabled": True}


def _production_values() -> dict[str, Any]:
    return yaml.safe_load((REPO_ROOT / "Pulumi.production.yaml").read_text())["config"]


def test_replace_gpu_pools_must_name_gpu_pools() -> None:
    raw = {key.split(":", 1)[1]: value for key, value in _production_values().items()
           if key.startswith("gpu-runtime:")}
    with pytest.raises(ConfigError, match=r"replaceGpuPools names \['h100'\], which are not gpuPools"):
        parse_stack_config({**raw, "replaceGpuPools": ["h100"]}, "impulse-gpu-runtime", "us-central1")
