"""Identities: exactly the contract's roles, Workload Identity bindings, and never a key."""

from __future__ import annotations

import pytest

from components import contract
from components.iam import Identities, IdentitiesArgs, role_suffix
from components.plan import Recording
from tests.components.infra import PROJECT, children_of, of_type, run

POOL = f"{PROJECT}.svc.id.goog"


@pytest.fixture(scope="module")
def recording() -> Recording:
    return run(lambda: Identities("iam", IdentitiesArgs(project=PROJECT, workload_pool=POOL)))


@pytest.mark.parametrize("spec", contract.SERVICE_ACCOUNTS, ids=lambda s: s.account_id)
def test_roles_are_exactly_the_contracts(recording: Recording, spec: contract.ServiceAccountSpec) -> None:
    member = f"serviceAccount:{spec.email(PROJECT)}"
    granted = {
        r.props["role"] for r in of_type(recording, "gcp:projects/iAMMember:IAMMember") if r.props["member"] == member
    }
    assert granted == set(spec.roles)
    assert all(r.props["project"] == PROJECT for r in of_type(recording, "gcp:projects/iAMMember:IAMMember"))


@pytest.mark.parametrize("spec", contract.SERVICE_ACCOUNTS, ids=lambda s: s.account_id)
def test_workload_identity_binding(recording: Recording, spec: contract.ServiceAccountSpec) -> None:
    bindings = [
        r for r in of_type(recording, "gcp:serviceaccount/iAMMember:IAMMember")
        if r.props["serviceAccountId"].endswith(spec.email(PROJECT))
    ]
    assert [(b.props["role"], b.props["member"]) for b in bindings] == [(
        "roles/iam.workloadIdentityUser",
        f"serviceAccount:{POOL}[{spec.k8s_namespace}/{spec.k8s_service_account}]",
    )]


def test_accounts_without_keys(recording: Recording) -> None:
    ids = {a.props["accountId"] for a in of_type(recording, "gcp:serviceaccount/account:Account")}
    assert ids == {"gpu-scheduler", "gpu-runtime"}
    assert not of_type(recording, "gcp:serviceaccount/key:Key")
    assert len(children_of(recording, "iam")) == len([r for r in recording.resources if r.custom])


def test_role_suffix_is_name_safe() -> None:
    assert role_suffix("roles/stackdriver.resourceMetadata.writer") == "stackdriver-resourcemetadata-writer"
