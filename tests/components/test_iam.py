"""Identities: exactly the contract's roles, Workload Identity bindings, and never a key."""

from __future__ import annotations

import pytest

from components.iam import WORKLOAD_IDENTITY_ROLE, Identities, IdentitiesArgs, role_suffix
from components.review.plan import Recording
from runtime.protocol import contract
from tests.components.infra import PROJECT, children_of, of_type, run

POOL = f"{PROJECT}.svc.id.goog"
BUCKET = contract.result_bucket(PROJECT)


@pytest.fixture(scope="module")
def recording() -> Recording:
    return run(lambda: Identities("iam", IdentitiesArgs(project=PROJECT, workload_pool=POOL, result_bucket=BUCKET)))


@pytest.fixture(scope="module")
def routing_vertex() -> Recording:
    return run(lambda: Identities("iam", IdentitiesArgs(project=PROJECT, workload_pool=POOL, result_bucket=BUCKET,
                                                        vertex=True)))


def _scoped(account: str, scope: contract.GrantScope) -> set[str]:
    return {g.role for g in contract.scoped_grants(vertex=False) if g.account_id == account and g.scope is scope}


@pytest.mark.parametrize("spec", contract.SERVICE_ACCOUNTS, ids=lambda s: s.account_id)
def test_project_roles_are_the_contract_table_plus_project_scoped_grants(
    recording: Recording, spec: contract.ServiceAccountSpec
) -> None:
    member = f"serviceAccount:{spec.email(PROJECT)}"
    granted = {
        r.props["role"] for r in of_type(recording, "gcp:projects/iAMMember:IAMMember") if r.props["member"] == member
    }
    assert granted == set(spec.roles) | _scoped(spec.account_id, contract.GrantScope.PROJECT)
    assert all(r.props["project"] == PROJECT for r in of_type(recording, "gcp:projects/iAMMember:IAMMember"))


def test_the_scheduler_gets_objects_on_the_result_bucket_only(recording: Recording) -> None:
    bindings = of_type(recording, "gcp:storage/bucketIAMMember:BucketIAMMember")

    assert [(b.props["bucket"], b.props["role"], b.props["member"]) for b in bindings] == [
        (BUCKET, "roles/storage.objectUser", f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(PROJECT)}")
    ]


def test_no_project_wide_storage_role_for_anyone(recording: Recording, routing_vertex: Recording) -> None:
    roles = {r.props["role"] for rec in (recording, routing_vertex)
             for r in of_type(rec, "gcp:projects/iAMMember:IAMMember")}

    assert roles and not {role for role in roles if role.startswith("roles/storage.")}


def test_without_vertex_routing_nobody_may_start_vertex_jobs(recording: Recording) -> None:
    roles = {r.props["role"] for r in recording.resources if r.custom and "role" in r.props}

    assert not {"roles/aiplatform.user", "roles/iam.serviceAccountUser"} & roles


def test_with_vertex_routing_jobs_run_as_gpu_runtime_writing_the_result_bucket_only(routing_vertex: Recording) -> None:
    buckets = {(b.props["bucket"], b.props["role"], b.props["member"])
               for b in of_type(routing_vertex, "gcp:storage/bucketIAMMember:BucketIAMMember")}
    project_roles = {(r.props["role"], r.props["member"])
                     for r in of_type(routing_vertex, "gcp:projects/iAMMember:IAMMember")}

    assert (BUCKET, "roles/storage.objectUser",
            f"serviceAccount:{contract.RUNTIME_SERVICE_ACCOUNT.email(PROJECT)}") in buckets
    scheduler = f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(PROJECT)}"
    assert ("roles/aiplatform.user", scheduler) in project_roles


def test_the_scheduler_may_start_vertex_jobs_as_the_runtime_account_only(routing_vertex: Recording) -> None:
    acting = [
        r for r in of_type(routing_vertex, "gcp:serviceaccount/iAMMember:IAMMember")
        if r.props["role"] == "roles/iam.serviceAccountUser"
    ]

    assert [(r.props["serviceAccountId"].rsplit("/", 1)[-1], r.props["member"]) for r in acting] == [
        (contract.RUNTIME_SERVICE_ACCOUNT.email(PROJECT),
         f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(PROJECT)}")
    ]


@pytest.mark.parametrize("spec", contract.SERVICE_ACCOUNTS, ids=lambda s: s.account_id)
def test_workload_identity_binding(recording: Recording, spec: contract.ServiceAccountSpec) -> None:
    bindings = [
        r for r in of_type(recording, "gcp:serviceaccount/iAMMember:IAMMember")
        if r.props["serviceAccountId"].endswith(spec.email(PROJECT)) and r.props["role"] == WORKLOAD_IDENTITY_ROLE
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


def test_the_scheduler_consumes_every_queue_subscription_and_no_other(recording: Recording) -> None:
    """issue #45: subscriber on each queue's subscription (the built-in ones always, each desk's the stack
    declares), named after it so a desk added or removed leaves the others' grants as they are."""
    desks = run(lambda: Identities("iam", IdentitiesArgs(
        project=PROJECT, workload_pool=POOL, result_bucket=BUCKET,
        queue_subscriptions=(contract.REQUEST_SUBSCRIPTION, "gpu-job-request-rates-desk-sub",
                             contract.URGENT_REQUEST_SUBSCRIPTION))))
    scheduler = f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(PROJECT)}"

    def consumed(rec: Recording) -> dict[str, str]:
        return {r.props["subscription"]: r.name for r in of_type(rec, "gcp:pubsub/subscriptionIAMMember:"
                                                                        "SubscriptionIAMMember")
                if r.props["member"] == scheduler and r.props["role"] == "roles/pubsub.subscriber"}

    built_in = {contract.REQUEST_SUBSCRIPTION, contract.URGENT_REQUEST_SUBSCRIPTION, contract.REQUEST_DLQ_SUBSCRIPTION,
                contract.PROBE_SUBSCRIPTION}
    assert set(consumed(recording)) == built_in
    assert set(consumed(desks)) == built_in | {"gpu-job-request-rates-desk-sub"}
    assert {k: v for k, v in consumed(desks).items() if k in built_in} == consumed(recording)
