"""The contract holds the platform's fixed values (docs/architecture.md, the contract)."""

from components import contract


def test_request_subscription_matches_seed_000() -> None:
    spec = contract.REQUEST_SUBSCRIPTION_SPEC
    assert (spec.topic, spec.ack_deadline_s, spec.retention_s) == ("gpu-job-request", 600, 604800)
    assert (spec.dead_letter_topic, spec.max_delivery_attempts) == ("gpu-job-request-dlq", 5)


def test_every_dead_letter_topic_has_a_subscription() -> None:
    subscribed = {s.topic for s in contract.SUBSCRIPTIONS}
    for topic in contract.TOPICS:
        if topic.is_dead_letter:
            assert topic.name in subscribed


def test_service_account_roles_match_seed_table() -> None:
    assert set(contract.SCHEDULER_SERVICE_ACCOUNT.roles) == {
        "roles/pubsub.subscriber", "roles/pubsub.publisher", "roles/aiplatform.user", "roles/logging.logWriter",
    }
    assert set(contract.RUNTIME_SERVICE_ACCOUNT.roles) == {
        "roles/storage.objectAdmin", "roles/artifactregistry.reader",
    }
    assert contract.SCHEDULER_SERVICE_ACCOUNT.email("p") == "gpu-scheduler@p.iam.gserviceaccount.com"
