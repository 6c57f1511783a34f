"""The contract holds the platform's fixed values (docs/architecture.md, the contract)."""

from runtime.local.broker.filters import compile_filter
from runtime.protocol import contract


def test_request_subscription_matches_seed_000() -> None:
    spec = contract.REQUEST_SUBSCRIPTION_SPEC
    assert (spec.topic, spec.ack_deadline_s, spec.retention_s) == ("gpu-job-request", 600, 604800)
    assert (spec.dead_letter_topic, spec.max_delivery_attempts) == ("gpu-job-request-dlq", 5)


def test_every_dead_letter_topic_has_a_subscription() -> None:
    subscribed = {s.topic for s in contract.SUBSCRIPTIONS}
    for topic in contract.TOPICS:
        if topic.is_dead_letter:
            assert topic.name in subscribed


def test_service_account_project_roles_hold_nothing_only_some_stacks_or_one_bucket_need() -> None:
    # issue #35: no Pub/Sub role on the project, where a publisher could publish to the dead-letter topic
    assert set(contract.SCHEDULER_SERVICE_ACCOUNT.roles) == {"roles/logging.logWriter"}
    pubsub = {(g.role, g.scope, g.target) for g in contract.SCOPED_GRANTS if g.role.startswith("roles/pubsub.")}
    assert pubsub == {
        ("roles/pubsub.publisher", contract.GrantScope.TOPIC, contract.RESULT_TOPIC),
        ("roles/pubsub.subscriber", contract.GrantScope.SUBSCRIPTION, contract.REQUEST_SUBSCRIPTION),
        ("roles/pubsub.subscriber", contract.GrantScope.SUBSCRIPTION, contract.URGENT_REQUEST_SUBSCRIPTION),
        ("roles/pubsub.subscriber", contract.GrantScope.SUBSCRIPTION, contract.REQUEST_DLQ_SUBSCRIPTION),
        ("roles/pubsub.subscriber", contract.GrantScope.SUBSCRIPTION, contract.PROBE_SUBSCRIPTION),
    }
    assert set(contract.RUNTIME_SERVICE_ACCOUNT.roles) == {"roles/artifactregistry.reader"}
    # Vertex AI's roles, and gpu-runtime's objects on the result bucket (the only bucket it writes), are granted
    # only by a stack that routes jobs to Vertex AI.
    vertex_only = {(g.account_id, g.role, g.scope) for g in contract.SCOPED_GRANTS if g.vertex_only}
    assert vertex_only == {
        ("gpu-scheduler", "roles/aiplatform.user", contract.GrantScope.PROJECT),
        ("gpu-scheduler", "roles/iam.serviceAccountUser", contract.GrantScope.SERVICE_ACCOUNT),
        ("gpu-runtime", "roles/storage.objectUser", contract.GrantScope.RESULT_BUCKET),
    }
    assert not set(contract.scoped_grants(vertex=False)) & {g for g in contract.SCOPED_GRANTS if g.vertex_only}
    assert contract.SCHEDULER_SERVICE_ACCOUNT.email("p") == "gpu-scheduler@p.iam.gserviceaccount.com"


def test_the_urgent_queue_and_the_probe_subscription_are_in_the_contract_lists() -> None:
    """issue #45: every platform (the stacks' Pub/Sub component, the local broker's topology) creates them."""
    assert contract.TopicSpec(contract.URGENT_REQUEST_TOPIC) in contract.TOPICS
    assert contract.URGENT_REQUEST_SUBSCRIPTION_SPEC in contract.SUBSCRIPTIONS
    assert contract.PROBE_SUBSCRIPTION_SPEC.topic == contract.URGENT_REQUEST_TOPIC


def test_the_probe_reaches_the_probe_subscription_alone() -> None:
    """issue #45: the probe as validation publishes it (urgent topic, probe attribute) is delivered by the probe
    subscription only, so it is answered once; an ordinary urgent request by the urgent subscription only. The
    local broker's filter evaluator decides, with Pub/Sub's grammar (runtime/local/broker/filters.py)."""
    probe = {"job_id": "deploy-probe-1", "type": "noop", contract.PROBE_ATTRIBUTE: "true"}
    ordinary = {"job_id": "j", "type": "noop"}

    def receivers(topic: str, attributes: dict[str, str]) -> set[str]:
        return {spec.name for spec in contract.SUBSCRIPTIONS
                if spec.topic == topic and (not spec.filter or compile_filter(spec.filter)(attributes))}

    assert receivers(contract.URGENT_REQUEST_TOPIC, probe) == {contract.PROBE_SUBSCRIPTION}
    assert receivers(contract.URGENT_REQUEST_TOPIC, ordinary) == {contract.URGENT_REQUEST_SUBSCRIPTION}


def test_the_scheduler_consumes_every_queue_subscription_a_stack_declares() -> None:
    grants = contract.scoped_grants(False, ("gpu-job-request-rates-sub", contract.REQUEST_SUBSCRIPTION))
    consumed = [g.target for g in grants if g.role == "roles/pubsub.subscriber"]
    assert consumed.count(contract.REQUEST_SUBSCRIPTION) == 1  # the built-in queues' grants are not doubled
    assert {contract.URGENT_REQUEST_SUBSCRIPTION, "gpu-job-request-rates-sub"} <= set(consumed)
