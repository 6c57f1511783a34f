"""Deploy by digest: every reference to an image of the stack's registry is found, and one without a digest is
named; the deploy workflow's gate (``gpurt images pinned``) refuses a stack until the pushed digests are set."""

from __future__ import annotations

import shutil
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from components.review.images import references, third_party, unpinned
from components.review.plan import REPO_ROOT, Plan, run_plan
from runtime.manifests.dcgm import DEFAULT_IMAGE as DCGM_IMAGE
from runtime.manifests.helm_values import OPERATOR_IMAGE
from tests.components.infra import committed_plans_served, stack_plan

DIGESTS = {"schedulerDigest": "sha256:" + "a" * 64, "workerDigest": "sha256:" + "b" * 64}
OPERATOR_DIGEST = "sha256:" + "d" * 64


def _rendered(plan: object) -> list[tuple[str, dict]]:
    return [(r.name, r.props) for r in plan.resources if r.custom]  # type: ignore[attr-defined]


def _with_digests(root: Path, stack: str, digests: dict[str, str]) -> Path:
    """A copy of the program whose stack file carries the digests the deploy workflow sets."""
    for name in ("Pulumi.yaml", "__main__.py"):
        shutil.copy(REPO_ROOT / name, root / name)
    document = yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())
    document["config"]["gpu-runtime:images"].update(digests)
    (root / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(document))
    return root


def test_a_committed_stack_references_its_images_by_tag_alone() -> None:
    found = references(_rendered(stack_plan("staging")))
    names = {ref.image.split("/")[-1].split(":")[0] for ref in found}

    assert names == {"gpu-scheduler", "gpu-worker"}
    assert unpinned(_rendered(stack_plan("staging"))) == found  # until the deploy sets the digests


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Plan:
    """Staging with every digest the deploy sets (the pushed images', and the operator's that `gpurt bootstrap`
    sets), rendered once for the tests below: the operator's digest reaches only the operator's chart, the pushed
    ones only the images of the stack's registry, so one render shows each of them."""
    root = _with_digests(tmp_path_factory.mktemp("deployed"), "staging", {**DIGESTS, "operatorDigest": OPERATOR_DIGEST})
    return run_plan("staging", root)


def test_with_the_pushed_digests_every_reference_is_pinned(deployed: Plan) -> None:
    found = references(_rendered(deployed))

    assert found and not unpinned(_rendered(deployed))
    assert {ref.image.rsplit("@", 1)[1] for ref in found} == set(DIGESTS.values())
    # The Deployment, the DaskCluster (scheduler and workers) and every extra worker group are covered.
    assert {"scheduler", "dask"} <= {ref.resource.split("-", 1)[0] for ref in found}


def test_third_party_images_are_pinned_the_operator_by_the_stacks_digest(deployed: Plan) -> None:
    """The DCGM exporter is pinned in its builder; the operator's chart tag only once images.operatorDigest is set,
    which a committed stack (like the project's own digests) leaves to the deploy."""
    committed = {ref.image: ref.pinned for ref in third_party(_rendered(stack_plan("staging")))}
    assert committed == {DCGM_IMAGE: True, f"{OPERATOR_IMAGE}:{version('dask-kubernetes')}": False}

    pinned = third_party(_rendered(deployed))
    operator = f"{OPERATOR_IMAGE}:{version('dask-kubernetes')}@{OPERATOR_DIGEST}"
    assert {ref.image for ref in pinned} == {DCGM_IMAGE, operator}
    assert all(ref.pinned for ref in pinned)


def test_an_image_named_by_tag_or_a_short_digest_is_unpinned() -> None:
    registry = "us-central1-docker.pkg.dev/p/gpu-runtime"
    resources = [("w", {"spec": {"containers": [
        {"image": f"{registry}/gpu-worker:abc"},
        {"image": f"{registry}/gpu-worker:abc@sha256:{'c' * 63}"},
        {"image": f"{registry}/gpu-worker:abc@sha256:{'c' * 64}"},
        {"image": "ghcr.io/dask/dask:2024.8"},  # not the stack's registry: left to its own pin
    ]}})]

    assert [(r.path, r.pinned) for r in references(resources)] == [
        ("spec.containers[0].image", False), ("spec.containers[1].image", False), ("spec.containers[2].image", True)]


@pytest.mark.integration
def test_the_gate_refuses_a_stack_without_digests() -> None:
    from gpurt.cli.app import app

    with committed_plans_served():  # the staging plan the tests above read, not a render of its own
        result = CliRunner().invoke(app, ["images", "pinned", "--stack", "staging"], env={"COLUMNS": "200"})

    assert result.exit_code == 1
    assert "are not pinned by digest: set images.schedulerDigest and images.workerDigest" in result.output
    assert ("set images.operatorDigest (`gpurt bootstrap` does; by hand: `pulumi config set --path "
            'gpu-runtime:images.operatorDigest "$(gpurt images digest)" --stack staging`)') in result.output
