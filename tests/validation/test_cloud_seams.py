"""Cloud-only checks at their client seams, fed recorded real-format API responses (fixtures/gcp).

The adapters get autospecced GAPIC clients, so a changed client interface breaks these tests, and the
responses are parsed into the real message types the libraries return.
"""

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest
from google.protobuf import json_format

from components.config import VertexConfig
from components.rendered import Resource
from components.review.quotas import QuotaNeed, quota_metric, quota_needs, training_quota_metric
from runtime.protocol import contract
from runtime.protocol.queues import QueueSpec, with_built_ins
from validation.adapters.iam import GoogleResourceIam, ResourceManagerIam
from validation.adapters.pubsub import GooglePubSubAdmin
from validation.adapters.vertex import GoogleVertexQuota
from validation.checks.identity import service_account_roles
from validation.checks.pubsub import service_agent_grants
from validation.checks.quota import quota_capacity
from validation.checks.vertex import vertex_reachable
from validation.report import Status
from validation.runner import run_check

GCP = Path(__file__).parent / "fixtures" / "gcp"
ROOT = Path(__file__).resolve().parents[2]
PROJECT = "impulse-gpu-runtime-staging"


# The recorded policies are those of a stack that routes job types to Vertex AI (vertex.jobTypes); a stack that
# does not lacks exactly the Vertex-only grants (ROUTING_ONLY).
SCHEDULER = f"serviceAccount:{contract.SCHEDULER_SERVICE_ACCOUNT.email(PROJECT)}"
RUNTIME = f"serviceAccount:{contract.RUNTIME_SERVICE_ACCOUNT.email(PROJECT)}"
ROUTING_ONLY = {"roles/aiplatform.user": SCHEDULER, "roles/iam.serviceAccountUser": SCHEDULER,
                "roles/storage.objectUser": RUNTIME}


def _without(document: dict, drop: dict[str, str]) -> dict:
    """``document`` with each ``role: member`` of ``drop`` taken out (a binding left without members goes)."""
    bindings = [{**b, "members": [m for m in b["members"] if drop.get(b["role"]) != m]} for b in document["bindings"]]
    return {**document, "bindings": [b for b in bindings if b["members"]]}


def _policy(name: str, drop_role: str | None = None, drop: dict[str, str] | None = None):
    """A recorded policy without the binding of ``drop_role`` and without each ``role: member`` of ``drop``."""
    from google.iam.v1 import policy_pb2

    document = _without(json.loads((GCP / name).read_text()), drop or {})
    document["bindings"] = [b for b in document["bindings"] if b["role"] != drop_role]
    return json_format.ParseDict(document, policy_pb2.Policy())


def _iam(drop: dict[str, str] | None = None, extra: tuple[str, str] | None = None,
         vertex: bool = True) -> ResourceManagerIam:
    from google.cloud import resourcemanager_v3

    policy = _policy("project_iam_policy.json", drop={**(drop or {}), **({} if vertex else ROUTING_ONLY)})
    if extra:
        policy.bindings.add(role=extra[0], members=[extra[1]])
    client = mock.create_autospec(resourcemanager_v3.ProjectsClient, instance=True)
    client.get_iam_policy.return_value = policy
    client.get_project.return_value = resourcemanager_v3.Project.from_json((GCP / "project.json").read_text())
    return ResourceManagerIam(PROJECT, client)


def _resource_iam(bucket_drop: dict[str, str] | None = None, account_drop: dict[str, str] | None = None,
                  vertex: bool = True, bucket_extra: tuple[str, str] | None = None) -> GoogleResourceIam:
    """The adapter over an autospecced storage client and authorized session, answering from fixtures."""
    import requests
    from google.api_core.iam import Policy
    from google.auth.transport.requests import AuthorizedSession
    from google.cloud import storage

    routing = {} if vertex else ROUTING_ONLY
    document = _without(json.loads((GCP / "result_bucket_iam_policy.json").read_text()),
                        {**(bucket_drop or {}), **routing})
    if bucket_extra:
        document["bindings"].append({"role": bucket_extra[0], "members": [bucket_extra[1]]})
    bucket = mock.create_autospec(storage.Bucket, instance=True)
    bucket.get_iam_policy.return_value = Policy.from_api_repr(document)
    client = mock.create_autospec(storage.Client, instance=True)
    client.bucket.return_value = bucket

    account = _without(json.loads((GCP / "runtime_service_account_iam_policy.json").read_text()),
                       {**(account_drop or {}), **routing})
    response = requests.Response()
    response.status_code, response._content = 200, json.dumps(account).encode()
    session = mock.create_autospec(AuthorizedSession, instance=True)
    session.post.return_value = response
    return GoogleResourceIam(PROJECT, storage=client, session=session)


def test_roles_match_the_contract_table() -> None:
    result = run_check(service_account_roles(_iam(vertex=False), PROJECT))

    assert result.status is Status.PASS, result
    assert result.evidence == "roles match (gpu-scheduler: 2/2, gpu-runtime: 1/1)"


def test_a_routing_stack_also_holds_vertex_ai_on_the_project() -> None:
    result = run_check(service_account_roles(_iam(), PROJECT, vertex=True))

    assert result.status is Status.PASS, result
    assert result.evidence == "roles match (gpu-scheduler: 3/3, gpu-runtime: 1/1)"


def test_scoped_grants_are_read_from_the_bucket_and_the_service_account() -> None:
    resources = _resource_iam()
    result = run_check(service_account_roles(_iam(), PROJECT, resources, vertex=True))

    assert result.status is Status.PASS, result
    assert result.evidence == "roles match (gpu-scheduler: 3/3, gpu-runtime: 1/1); scoped grants: 3/3"
    resources._storage.bucket.assert_called_once_with(contract.result_bucket(PROJECT))
    resources._storage.bucket.return_value.get_iam_policy.assert_called_once_with(requested_policy_version=3)
    url = resources._session.post.call_args.args[0]
    assert url == (f"https://iam.googleapis.com/v1/projects/{PROJECT}/serviceAccounts/"
                   f"{contract.RUNTIME_SERVICE_ACCOUNT.email(PROJECT)}:getIamPolicy")


def test_a_stack_routing_nothing_to_vertex_needs_only_the_schedulers_bucket_grant() -> None:
    result = run_check(service_account_roles(_iam(vertex=False), PROJECT, _resource_iam(vertex=False)))

    assert result.status is Status.PASS, result
    assert result.evidence == "roles match (gpu-scheduler: 2/2, gpu-runtime: 1/1); scoped grants: 1/1"


def test_vertex_grants_left_in_a_stack_routing_nothing_there_fail() -> None:
    result = run_check(service_account_roles(_iam(vertex=False), PROJECT, _resource_iam(vertex=True)))

    assert result.status is Status.FAIL
    assert result.evidence == (
        f"gpu-runtime also holds roles/storage.objectUser on bucket {contract.result_bucket(PROJECT)}, which the "
        "contract does not grant; gpu-scheduler also holds roles/iam.serviceAccountUser on service account "
        "gpu-runtime, which the contract does not grant")


def test_a_wider_role_on_the_bucket_fails() -> None:
    resources = _resource_iam(vertex=False, bucket_extra=("roles/storage.objectAdmin", RUNTIME))
    result = run_check(service_account_roles(_iam(vertex=False), PROJECT, resources))

    assert result.status is Status.FAIL
    assert result.evidence == (f"gpu-runtime also holds roles/storage.objectAdmin on bucket "
                               f"{contract.result_bucket(PROJECT)}, which the contract does not grant")


def test_object_admin_on_the_whole_project_fails() -> None:
    result = run_check(service_account_roles(_iam(vertex=False, extra=("roles/storage.objectAdmin", RUNTIME)),
                                             PROJECT))

    assert result.status is Status.FAIL
    assert result.evidence == ("gpu-runtime holds roles/storage.objectAdmin on the whole project: grant it on the "
                               "result bucket only")


def test_a_missing_bucket_binding_fails_and_says_what_it_is_for() -> None:
    resources = _resource_iam(bucket_drop={"roles/storage.objectUser": SCHEDULER})
    result = run_check(service_account_roles(_iam(), PROJECT, resources, vertex=True))

    assert result.status is Status.FAIL
    assert result.evidence.startswith(
        f"gpu-scheduler lacks roles/storage.objectUser on bucket {contract.result_bucket(PROJECT)} (reads and writes")


def test_a_missing_act_as_grant_fails() -> None:
    resources = _resource_iam(account_drop={"roles/iam.serviceAccountUser": SCHEDULER})
    result = run_check(service_account_roles(_iam(), PROJECT, resources, vertex=True))

    assert result.status is Status.FAIL
    assert "gpu-scheduler lacks roles/iam.serviceAccountUser on service account gpu-runtime" in result.evidence


def test_missing_monitoring_read_fails() -> None:
    result = run_check(service_account_roles(_iam({"roles/monitoring.viewer": SCHEDULER}, vertex=False), PROJECT))

    assert result.status is Status.FAIL
    assert result.evidence == "gpu-scheduler lacks roles/monitoring.viewer"


def test_a_missing_role_fails_and_names_account_and_role() -> None:
    result = run_check(service_account_roles(_iam({"roles/aiplatform.user": SCHEDULER}), PROJECT, vertex=True))

    assert result.status is Status.FAIL
    assert result.evidence == "gpu-scheduler lacks roles/aiplatform.user"


def test_an_extra_role_is_reported_but_passes() -> None:
    result = run_check(service_account_roles(_iam(extra=("roles/editor", RUNTIME), vertex=False), PROJECT))

    assert result.status is Status.PASS
    assert "extra (least privilege: review): gpu-runtime also has roles/editor" in result.evidence


def _pubsub(topic_policy: str, subscription_policy: str, drop_role: str | None = None) -> GooglePubSubAdmin:
    from google import pubsub_v1

    publisher = mock.create_autospec(pubsub_v1.PublisherClient, instance=True)
    subscriber = mock.create_autospec(pubsub_v1.SubscriberClient, instance=True)
    publisher.get_iam_policy.return_value = _policy(topic_policy, drop_role)
    subscriber.get_iam_policy.return_value = _policy(subscription_policy, drop_role)
    return GooglePubSubAdmin(PROJECT, publisher, subscriber)


def test_service_agent_grants_pass_with_both_roles() -> None:
    admin = _pubsub("dlq_topic_iam_policy.json", "request_subscription_iam_policy.json")

    result = run_check(service_agent_grants(admin, _iam().project_number))

    assert result.status is Status.PASS, result
    assert "service-284716533902@gcp-sa-pubsub.iam.gserviceaccount.com" in result.evidence
    admin._publisher.get_iam_policy.assert_called_once_with(
        request={"resource": f"projects/{PROJECT}/topics/{contract.REQUEST_DLQ_TOPIC}"})
    # Each source subscription once: the request subscription and the urgent queue's (issue #45)
    assert admin._subscriber.get_iam_policy.call_args_list == [
        mock.call(request={"resource": f"projects/{PROJECT}/subscriptions/{name}"})
        for name in (contract.REQUEST_SUBSCRIPTION, contract.URGENT_REQUEST_SUBSCRIPTION)]


def test_service_agent_grants_are_checked_on_every_queue_the_stack_declares() -> None:
    admin = _pubsub("dlq_topic_iam_policy.json", "request_subscription_iam_policy.json")

    result = run_check(service_agent_grants(admin, _iam().project_number,
                                            with_built_ins([QueueSpec("rates-desk")])))

    assert result.status is Status.PASS, result
    read = [c.kwargs["request"]["resource"] for c in admin._subscriber.get_iam_policy.call_args_list]
    assert f"projects/{PROJECT}/subscriptions/gpu-job-request-rates-desk-sub" in read
    admin._publisher.get_iam_policy.assert_called_once()  # one dead-letter topic, read once


def test_missing_publisher_grant_on_the_dlq_topic_fails() -> None:
    admin = _pubsub("dlq_topic_iam_policy.json", "request_subscription_iam_policy.json",
                    drop_role="roles/pubsub.publisher")

    result = run_check(service_agent_grants(admin, _iam().project_number))

    assert result.status is Status.FAIL
    assert result.evidence.endswith(f"lacks roles/pubsub.publisher on topic {contract.REQUEST_DLQ_TOPIC}")
    assert "silently does nothing" in result.fix


def _vertex(jobs_error: Exception | None = None, region: dict | None = None,
            project: dict | None = None) -> GoogleVertexQuota:
    """The adapter over autospecced clients answering Compute's ``regions.get`` and ``projects.get`` (their
    ``quotas[]`` of {metric, limit, usage}: https://cloud.google.com/compute/docs/reference/rest/v1/regions/get,
    .../projects/get) and Vertex AI's custom-job list with the recorded fixtures, or with ``region``/``project``."""
    from google.cloud import compute_v1

    from runtime.vertex.rest import RestCustomJobs

    jobs = mock.create_autospec(RestCustomJobs, instance=True)
    if jobs_error:
        jobs.list.side_effect = jobs_error
    else:
        jobs.list.return_value = json.loads((GCP / "custom_jobs.json").read_text())["customJobs"]
    regions = mock.create_autospec(compute_v1.RegionsClient, instance=True)
    regions.get.return_value = compute_v1.Region.from_json(
        json.dumps(region or json.loads((GCP / "region_us-central1.json").read_text())), ignore_unknown_fields=True)
    projects = mock.create_autospec(compute_v1.ProjectsClient, instance=True)
    projects.get.return_value = compute_v1.Project.from_json(
        json.dumps(project or json.loads((GCP / "compute_project.json").read_text())), ignore_unknown_fields=True)
    return GoogleVertexQuota(PROJECT, "us-central1", jobs, regions, projects=projects)


class QuotaInfos:
    """An authorized session answering the Cloud Quotas API's quotaInfos list with ``infos``."""

    def __init__(self, infos: list[dict]) -> None:
        self.infos = infos
        self.urls: list[str] = []

    def get(self, url: str, **_kwargs: object) -> mock.Mock:
        self.urls.append(url)
        return mock.Mock(json=lambda: {"quotaInfos": self.infos}, raise_for_status=lambda: None)


T4_TRAINING = "aiplatform.googleapis.com/custom_model_training_nvidia_t4_gpus"


def _t4_training_quota(default: str, in_region: str | None) -> QuotaInfos:
    by_region = ([] if in_region is None
                 else [{"dimensions": {"region": "us-central1"}, "details": {"value": in_region}}])
    return QuotaInfos([{"metric": T4_TRAINING, "quotaId": "CustomModelTrainingNvidiaT4GPUsPerProjectPerRegion",
                        "dimensionsInfos": [*by_region, {"dimensions": {}, "details": {"value": default}}]}])


def _staging_needs(vertex: bool = False) -> tuple[QuotaNeed, ...]:
    """What the staging stack's deployed pools (the recorded state) reach, and one T4 overflow job if ``vertex``."""
    state = json.loads((ROOT / "tests" / "fixtures" / "pulumi" / "stack_export_current.json").read_text())
    pools = [Resource.from_state(r) for r in state["deployment"]["resources"]]
    overflow = VertexConfig(machine_type="n1-standard-8", accelerator_type="NVIDIA_TESLA_T4") if vertex else None
    return quota_needs(pools, "us-central1", overflow)


def _with_quota(document: str, metric: str, limit: float) -> dict:
    fixture = json.loads((GCP / document).read_text())
    fixture["quotas"] = [{**q, "limit": limit} if q["metric"] == metric else q for q in fixture["quotas"]]
    return fixture


def test_training_quota_metric_names_follow_vertex_ai() -> None:
    assert training_quota_metric("NVIDIA_TESLA_T4") == T4_TRAINING
    prefix = "aiplatform.googleapis.com/custom_model_training_nvidia"
    assert training_quota_metric("NVIDIA_TESLA_A100") == f"{prefix}_a100_gpus"
    assert training_quota_metric("NVIDIA_L4") == f"{prefix}_l4_gpus"


def test_quota_metric_names_follow_compute_engine() -> None:
    assert quota_metric("nvidia-tesla-t4") == "NVIDIA_T4_GPUS"
    assert quota_metric("nvidia-tesla-t4", spot=True) == "PREEMPTIBLE_NVIDIA_T4_GPUS"
    assert quota_metric("nvidia-a100-80gb") == "NVIDIA_A100_80GB_GPUS"


def test_vertex_reachable() -> None:
    result = run_check(vertex_reachable(_vertex(), "us-central1"))

    assert result.status is Status.PASS, result
    assert result.evidence == "Vertex AI reachable in us-central1 (1 recent gpu-runtime job(s))"


def test_vertex_api_error_fails_with_the_reason() -> None:
    from runtime.vertex.rest import VertexApiError

    vertex = _vertex(VertexApiError("Vertex AI GET projects/p/locations/us-central1/customJobs failed with "
                                    "PERMISSION_DENIED: Vertex AI API has not been used in project 284716533902"))
    result = run_check(vertex_reachable(vertex, "us-central1"))

    assert result.status is Status.FAIL
    assert "PERMISSION_DENIED" in result.evidence and "aiplatform.googleapis.com" in result.fix


def test_pools_busy_up_to_their_quota_pass() -> None:
    """issue #42: the spot T4 pool runs 4 of its 4 GPUs (usage == limit) and GPUS_ALL_REGIONS is used up by the
    same nodes: the capacity the stack needs exists, which is all a deploy's validation may ask."""
    vertex = _vertex()
    vertex._session = _t4_training_quota(default="0", in_region="4")
    result = run_check(quota_capacity(vertex, PROJECT, "us-central1", _staging_needs(vertex=True)))

    assert result.status is Status.PASS, result
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS need 4 GPUs, limit 4" in result.evidence
    assert "GPUS_ALL_REGIONS (global) need 4 GPUs, limit 4" in result.evidence
    assert f"{T4_TRAINING} need 1 GPUs, limit 4" in result.evidence
    assert vertex._session.urls == ["https://cloudquotas.googleapis.com/v1/projects/impulse-gpu-runtime-staging/"
                                    "locations/global/services/aiplatform.googleapis.com/quotaInfos"]


@pytest.mark.parametrize(("document", "metric", "request_flags"), [
    ("compute_project.json", "GPUS_ALL_REGIONS", "--quota-id=GPUS-ALL-REGIONS-per-project --preferred-value=4`"),
    ("region_us-central1.json", "CPUS",
     "--quota-id=CPUS-per-project-region --preferred-value=40 --dimensions=region=us-central1`"),
    ("region_us-central1.json", "SSD_TOTAL_GB",
     "--quota-id=SSD-TOTAL-GB-per-project-region --preferred-value=500 --dimensions=region=us-central1`"),
])
def test_a_quota_below_the_stacks_need_is_no_capacity_naming_the_request(document: str, metric: str,
                                                                         request_flags: str) -> None:
    """A new project's GPUS_ALL_REGIONS is 0: the platform runs (nothing to roll back), but cannot scale."""
    fixture = _with_quota(document, metric, 0)
    vertex = _vertex(project=fixture) if document == "compute_project.json" else _vertex(region=fixture)
    result = run_check(quota_capacity(vertex, PROJECT, "us-central1", _staging_needs()))

    assert result.status is Status.NO_CAPACITY, result
    assert result.evidence.startswith(f"below the stack's need: {metric}")
    assert "limit 0" in result.evidence
    assert f"`gcloud quotas preferences create --project={PROJECT} --service=compute.googleapis.com " \
           f"{request_flags}" in result.fix
    assert f"iam-admin/quotas?project={PROJECT}" in result.fix


@pytest.mark.parametrize("quota", [_t4_training_quota(default="8", in_region="0"), QuotaInfos([])],
                         ids=["zero-in-region", "absent"])
def test_a_zero_vertex_ai_quota_is_no_capacity_naming_it(quota: QuotaInfos) -> None:
    vertex = _vertex()
    vertex._session = quota
    result = run_check(quota_capacity(vertex, PROJECT, "us-central1", _staging_needs(vertex=True)))

    assert result.status is Status.NO_CAPACITY
    assert f"{T4_TRAINING} need 1 GPUs, limit" in result.evidence
    assert "--quota-id=CustomModelTrainingNvidiaT4GPUsPerProjectPerRegion" in result.fix


def test_quotas_that_cannot_be_read_are_a_failure() -> None:
    from google.api_core.exceptions import Forbidden

    vertex = _vertex()
    vertex._projects.get.side_effect = Forbidden("Required 'compute.projects.get' permission for "
                                                 "'projects/impulse-gpu-runtime-staging'")
    result = run_check(quota_capacity(vertex, PROJECT, "us-central1", _staging_needs()))

    assert result.status is Status.FAIL
    assert "compute.projects.get" in result.evidence and "roles/compute.networkViewer" in result.fix


def test_a_project_wide_pubsub_role_of_the_scheduler_fails() -> None:
    # issue #35: with pubsub.publisher on the project the scheduler could publish to the dead-letter topic
    result = run_check(service_account_roles(_iam(extra=("roles/pubsub.publisher", SCHEDULER), vertex=False),
                                             PROJECT))

    assert result.status is Status.FAIL
    assert "gpu-scheduler holds roles/pubsub.publisher on the whole project: grant it on its topic or " \
           "subscription only" in result.evidence


def test_anyone_but_the_service_agent_publishing_to_the_dlq_topic_fails() -> None:
    admin = _pubsub("dlq_topic_iam_policy.json", "request_subscription_iam_policy.json")
    policy = admin._publisher.get_iam_policy.return_value
    policy.bindings[0].members.append("group:risk-desk@example.com")

    result = run_check(service_agent_grants(admin, _iam().project_number))

    assert result.status is Status.FAIL
    assert result.evidence.startswith("group:risk-desk@example.com may publish to gpu-job-request-dlq")
