"""Who may use the local broker: one token per principal and the Pub/Sub roles each holds, as the cloud grants them.

Google Pub/Sub lets no one read the request subscription or publish results without an IAM role: users are
granted ``roles/pubsub.publisher`` on the request topic alone (``components/pubsub.py``). The local broker gets
the same boundary from a credentials file (``runtime/local/broker/access.py``) that ``gpurt local up`` writes
each time it starts the platform:

- ``scheduler`` (the replicas, by a token file): consumes every request queue's subscription, the probe and
  dead-letter subscriptions, publishes results, reads every resource's settings;
- ``user`` (the job commands, the Python client and benchmarks that only submit and collect): publishes to the
  request topic, attaches its own result subscriptions (named ``gpu-job-result-cli-…``/``gpu-job-result-client-…``)
  to the result topic and consumes them; it cannot read a request, nor publish a result;
- ``queue-<name>``, one per request queue besides ``default`` (``runtime.protocol.queues``: a desk, and ``urgent`` for
  on-call): what ``user`` may, but publishing to its own queue's topic only. A desk's identity is the topic it may
  publish to (docs/scheduler.md, "Queues"), so its token cannot pass its jobs off as another desk's;
- ``operator`` (``gpurt`` on the account that ran ``up``: topology, drills, dead-letter replay): everything,
  as ``roles/pubsub.admin`` on the project.

A caller without a token is refused everything (UNAUTHENTICATED).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runtime.access.transport import TEMP_SUBSCRIPTION_PREFIX
from runtime.local.processes import write_private
from runtime.protocol import contract
from runtime.protocol.queues import BUILT_IN_QUEUES, DEFAULT_QUEUE, QueueSpec

SCHEDULER: Final = "scheduler"
USER: Final = "user"
OPERATOR: Final = "operator"
QUEUE_PRINCIPAL_PREFIX: Final = "queue-"
# The Python client's private result subscriptions (gpurt.client.session.SUBSCRIPTION_PREFIX: the runtime does not
# import the users' package, and a test keeps the two equal).
CLIENT_SUBSCRIPTION_PREFIX: Final = "gpu-job-result-client-"
CREDENTIALS_FILE: Final = "broker-credentials.json"
SCHEDULER_TOKEN_FILE: Final = "broker-token"


def _token() -> str:
    return secrets.token_urlsafe(32)


def _queue_tokens(queues: Sequence[QueueSpec]) -> dict[str, str]:
    return {queue.name: _token() for queue in queues if queue.name != DEFAULT_QUEUE}


@dataclass(frozen=True)
class BrokerTokens:
    """One fresh random token per principal; ``queues``: one per request queue besides ``default``, by name."""

    scheduler: str = field(default_factory=_token, repr=False)
    user: str = field(default_factory=_token, repr=False)
    operator: str = field(default_factory=_token, repr=False)
    queues: dict[str, str] = field(default_factory=lambda: _queue_tokens(BUILT_IN_QUEUES), repr=False)

    @classmethod
    def for_queues(cls, queues: Sequence[QueueSpec]) -> BrokerTokens:
        """Fresh tokens, with one for each of ``queues`` but ``default`` (whose publishers are ``user``)."""
        return cls(queues=_queue_tokens(queues))


def queue_principal(queue: str) -> str:
    """The principal that may publish to ``queue``'s topic alone."""
    return f"{QUEUE_PRINCIPAL_PREFIX}{queue}"


def broker_policy(project: str, tokens: BrokerTokens,
                  queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> dict[str, Any]:
    """The credentials file's content for ``project`` with request ``queues``: tokens by principal, and each
    principal's role bindings. Every queue of ``queues`` but ``default`` needs its token in ``tokens.queues``."""
    root = f"projects/{project}"

    def topic(name: str) -> str:
        return f"{root}/topics/{name}"

    def subscription(name: str) -> str:
        return f"{root}/subscriptions/{name}"

    def bind(role: str, member: str, resource: str) -> dict[str, Any]:
        return {"role": role, "members": [member], "resource": resource}

    def submitter(member: str, request_topic: str) -> list[dict[str, Any]]:
        """Publish to ``request_topic`` alone, and read results on subscriptions of one's own."""
        return [
            bind("roles/pubsub.viewer", member, root),
            bind(contract.REQUEST_PUBLISHER_ROLE, member, topic(request_topic)),
            bind("roles/pubsub.subscriber", member, topic(contract.RESULT_TOPIC)),  # attach a subscription to it
            # Its own subscriptions only, by name, as an IAM condition on resource.name would grant them.
            bind("roles/pubsub.editor", member, subscription(TEMP_SUBSCRIPTION_PREFIX) + "*"),
            bind("roles/pubsub.editor", member, subscription(CLIENT_SUBSCRIPTION_PREFIX) + "*"),
        ]
    desks = [queue for queue in queues if queue.name != DEFAULT_QUEUE]
    missing = [queue.name for queue in desks if queue.name not in tokens.queues]
    if missing:
        raise ValueError(f"no broker token for the queue(s) {', '.join(missing)}")
    return {
        "principals": {tokens.scheduler: SCHEDULER, tokens.user: USER, tokens.operator: OPERATOR,
                       **{tokens.queues[queue.name]: queue_principal(queue.name) for queue in desks}},
        "bindings": [
            bind("roles/pubsub.admin", OPERATOR, root),
            bind("roles/pubsub.viewer", SCHEDULER, root),
            *(bind("roles/pubsub.subscriber", SCHEDULER, subscription(queue.subscription)) for queue in queues),
            bind("roles/pubsub.subscriber", SCHEDULER, subscription(contract.REQUEST_DLQ_SUBSCRIPTION)),
            # The deploy probe's own subscription (contract.PROBE_SUBSCRIPTION_SPEC), as the stack grants it.
            bind("roles/pubsub.subscriber", SCHEDULER, subscription(contract.PROBE_SUBSCRIPTION)),
            bind("roles/pubsub.publisher", SCHEDULER, topic(contract.RESULT_TOPIC)),
            *submitter(USER, contract.REQUEST_TOPIC),
            *(binding for queue in desks for binding in submitter(queue_principal(queue.name), queue.topic)),
        ],
    }


def write_credentials(path: Path, project: str, tokens: BrokerTokens,
                      queues: Sequence[QueueSpec] = BUILT_IN_QUEUES) -> Path:
    """Write the credentials file readable by its owner only (it holds every token); returns ``path``."""
    return write_private(path, json.dumps(broker_policy(project, tokens, queues), indent=1))
