"""`gpurt deploy-window`: the deploy window with its explicit override, and GKE's running operations through a
fake gcloud that refuses what the real one refuses."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.components.infra import stack_config
from validation.adapters.gke_operations import GcloudClusterOperations
from validation.deploy_window import ClusterOperation, check

PROJECT = "impulse-gpu-runtime-prod"
TUESDAY_10 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)  # inside production's deploy window
SATURDAY_03 = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)  # inside GKE's maintenance window
CLUSTER_LINK = "https://container.googleapis.com/v1/projects/p/locations/us-central1/clusters/gpu-scheduler"


def _operation(status: str = "RUNNING", kind: str = "UPGRADE_NODES", target: str = f"{CLUSTER_LINK}/nodePools/a100",
               location: str = "us-central1") -> dict[str, Any]:
    return {"name": f"operation-{kind.lower()}-{status.lower()}", "operationType": kind, "status": status,
            "targetLink": target, "startTime": "2026-12-05T02:10:00Z", "location": location,
            "selfLink": f"https://container.googleapis.com/v1/projects/p/locations/{location}/operations/x"}


class FakeGcloud:
    """``gcloud container operations list`` as its reference defines it
    (https://cloud.google.com/sdk/gcloud/reference/container/operations/list): at most one of ``--location``,
    ``--region``, ``--zone``; the list flags ``--filter``, ``--limit``, ``--page-size``, ``--sort-by`` and the
    gcloud-wide ``--project`` and ``--format``; any other flag (``--uri``, which other list commands have) is an
    error, as gcloud's argument parser exits 2 with "unrecognized arguments". It lists the operations of the
    location asked only."""

    ALLOWED = frozenset({"--location", "--region", "--zone", "--filter", "--limit", "--page-size", "--sort-by",
                         "--project", "--format"})

    def __init__(self, operations: Sequence[dict[str, Any]]) -> None:
        self.operations = list(operations)
        self.calls: list[list[str]] = []

    def __call__(self, args: Sequence[str], cwd: Path | None, stdin: str | None) -> str:
        self.calls.append(list(args))
        if list(args[:4]) != ["gcloud", "container", "operations", "list"]:
            raise RuntimeError(f"gcloud: unexpected command {args[:4]}")
        flags: dict[str, str] = {}
        rest = list(args[4:])
        while rest:
            flag = rest.pop(0)
            name, _, value = flag.partition("=")
            if name not in self.ALLOWED:
                raise RuntimeError(f"gcloud container operations failed: ERROR: (gcloud.container.operations.list) "
                                   f"unrecognized arguments: {flag}")
            flags[name] = value or rest.pop(0)
        if len({"--location", "--region", "--zone"} & flags.keys()) > 1:
            raise RuntimeError("gcloud container operations failed: ERROR: argument --location: At most one of "
                               "--location | --region | --zone may be specified.")
        location = flags.get("--location") or flags.get("--region") or flags.get("--zone")
        listed = [op for op in self.operations if location is None or op["location"] == location]
        return json.dumps(listed) if flags.get("--format") == "json" else "NAME  TYPE\n"


def _listed(*operations: dict[str, Any]) -> list[ClusterOperation]:
    return GcloudClusterOperations(FakeGcloud(operations)).listed(PROJECT, "us-central1")


def test_inside_the_deploy_window_with_no_operation_running_the_deploy_may_go() -> None:
    verdict = check(stack_config("production"), TUESDAY_10, _listed(_operation(status="DONE")))
    assert verdict.allowed and "inside the deploy window (TU,WE,TH 09:00 UTC for 5 h)" in verdict.reasons[0]


def test_outside_the_window_only_an_explicit_reason_lets_it_go() -> None:
    refused = check(stack_config("production"), SATURDAY_03, [])
    assert not refused.allowed
    assert "outside the deploy window" in refused.reasons[0] and "outside_window_reason" in refused.reasons[0]
    assert not check(stack_config("production"), SATURDAY_03, [], override_reason="  ").allowed  # blank: no reason
    overridden = check(stack_config("production"), SATURDAY_03, [], override_reason="INC-42 hotfix")
    assert overridden.allowed and "overridden: INC-42 hotfix" in overridden.reasons[0]


def test_a_running_gke_operation_on_the_cluster_refuses_even_an_overridden_deploy() -> None:
    operations = _listed(_operation(), _operation(status="DONE", kind="UPGRADE_MASTER", target=CLUSTER_LINK))
    verdict = check(stack_config("production"), TUESDAY_10, operations, override_reason="urgent")
    assert not verdict.allowed
    assert "UPGRADE_NODES RUNNING" in verdict.reasons[-1] and "UPGRADE_MASTER" not in verdict.reasons[-1]
    upgrading_master = _listed(_operation(status="PENDING", kind="UPGRADE_MASTER", target=CLUSTER_LINK))
    assert not check(stack_config("production"), TUESDAY_10, upgrading_master).allowed


def test_operations_of_another_cluster_or_location_do_not_count() -> None:
    other = _operation(target=CLUSTER_LINK.replace("gpu-scheduler", "gpu-scheduler-old"))
    elsewhere = _operation(location="europe-west4")
    assert check(stack_config("production"), TUESDAY_10, _listed(other, elsewhere)).allowed


def test_the_fake_gcloud_refuses_what_gcloud_refuses() -> None:
    """A lenient fake would have accepted these; the adapter must never send them."""
    fake = FakeGcloud([])
    with pytest.raises(RuntimeError, match="unrecognized arguments: --uri"):
        fake(["gcloud", "container", "operations", "list", "--uri"], None, None)
    with pytest.raises(RuntimeError, match="At most one of"):
        fake(["gcloud", "container", "operations", "list", "--region", "r", "--zone", "z"], None, None)
    GcloudClusterOperations(fake).listed(PROJECT, "us-central1")
    assert fake.calls[-1] == ["gcloud", "container", "operations", "list", "--project", PROJECT, "--location",
                              "us-central1", "--format=json"]


def test_the_command_refuses_a_deploy_while_gke_upgrades_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import validation.adapters.gke_operations as adapter
    from gpurt.cli.app import app

    fake = FakeGcloud([_operation()])
    monkeypatch.setattr(adapter, "GcloudClusterOperations", lambda: GcloudClusterOperations(fake))
    result = CliRunner().invoke(app, ["deploy-window", "--stack", "production", "--override", "test"],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    assert "GKE is running an operation on the cluster" in result.output
    assert fake.calls[0][5:8] == [stack_config("production").project, "--location", "us-central1"]


def test_the_command_names_an_unknown_stack_without_a_traceback() -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["deploy-window", "--stack", "nosuch"], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "Pulumi.nosuch.yaml" in result.output and "Traceback" not in result.output
