"""The contract holds the platform's fixed values (docs/architecture.md, the contract)."""

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
