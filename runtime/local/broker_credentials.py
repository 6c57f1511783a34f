"""Who may use the local broker: one token per principal and the Pub/Sub roles each holds, as the cloud grants them.

Google Pub/Sub lets no one read the request subscription or publish results without an IAM role: users are
granted ``roles/pubsub.publisher`` on the request topic alone (``components/pubsub.py``). The local broker gets
the same boundary from a credentials file (``runtime/local/broker/access.py``) that ``gpurt local up`` writes
each time it starts the platform:

- ``scheduler`` (the replicas, by a token file): consumes the request, probe and dead-letter subscriptions, publishes
  results, reads every resource's settings;
- ``user`` (the job commands, the Python client and benchmarks that only submit and collect): publishes to the
  request topic, attaches its own result subscriptions (named ``gpu-job-result-cli-…``/``gpu-job-result-client-…``)
  to the result topic and consumes them; it cannot read a request, nor publish a result;
- ``operator`` (``gpurt`` on the account that ran ``up``: topology, drills, dead-letter replay): everything,
  as ``roles/pubsub.admin`` on the project.

A caller without a token is refused everything (UNAUTHENTICATED).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runtime.access.transport import TEMP_SUBSCRIPTION_PREFIX
from runtime.local.processes import write_private
from runtime.protocol import contract

SCHEDULER: Final = "scheduler"
USER: Final = "user"
OPERATOR: Final = "operator"
# The Python client's private result subscriptions (gpurt.client.session.SUBSCRIPTION_PREFIX: the runtime does not
# import the users' package, and a test keeps the two equal).
CLIENT_SUBSCRIPTION_PREFIX: Final = "gpu-job-result-client-"
CREDENTIALS_FILE: Final = "broker-credentials.json"
SCHEDULER_TOKEN_FILE: Final = "broker-token"


@dataclass(frozen=True)
class BrokerTokens:
    """One fresh random token per principal."""

    scheduler: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    user: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    operator: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)


def broker_policy(project: str, tokens: BrokerTokens) -> dict[str, Any]:
    """The credentials file's content for ``project``: tokens by principal, and each principal's role bindings."""
    root = f"projects/{project}"

    def topic(name: str) -> str:
        return f"{root}/topics/{name}"

    def subscription(name: str) -> str:
        return f"{root}/subscriptions/{name}"

    def bind(role: str, member: str, resource: str) -> dict[str, Any]:
        return {"role": role, "members": [member], "resource": resource}

    return {
        "principals": {tokens.scheduler: SCHEDULER, tokens.user: USER, tokens.operator: OPERATOR},
        "bindings": [
            bind("roles/pubsub.admin", OPERATOR, root),
            bind("roles/pubsub.viewer", SCHEDULER, root),
            bind("roles/pubsub.subscriber", SCHEDULER, subscription(contract.REQUEST_SUBSCRIPTION)),
            bind("roles/pubsub.subscriber", SCHEDULER, subscription(contract.REQUEST_DLQ_SUBSCRIPTION)),
            # The deploy probe's own subscription (contract.PROBE_SUBSCRIPTION_SPEC), as the stack grants it.
            bind("roles/pubsub.subscriber", SCHEDULER, subscription(contract.PROBE_SUBSCRIPTION)),
            bind("roles/pubsub.publisher", SCHEDULER, topic(contract.RESULT_TOPIC)),
            bind("roles/pubsub.viewer", USER, root),
            bind(contract.REQUEST_PUBLISHER_ROLE, USER, topic(contract.REQUEST_TOPIC)),
            bind("roles/pubsub.subscriber", USER, topic(contract.RESULT_TOPIC)),  # attach a subscription to it
            # Its own subscriptions only, by name, as an IAM condition on resource.name would grant them.
            bind("roles/pubsub.editor", USER, subscription(TEMP_SUBSCRIPTION_PREFIX) + "*"),
            bind("roles/pubsub.editor", USER, subscription(CLIENT_SUBSCRIPTION_PREFIX) + "*"),
        ],
    }


def write_credentials(path: Path, project: str, tokens: BrokerTokens) -> Path:
    """Write the credentials file readable by its owner only (it holds every token); returns ``path``."""
    return write_private(path, json.dumps(broker_policy(project, tokens), indent=1))
