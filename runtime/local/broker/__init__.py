"""A Pub/Sub emulator: the broker of the local platform.

A gRPC server speaking ``google.pubsub.v1`` Publisher and Subscriber, so the real google-cloud-pubsub
client works against it through ``PUBSUB_EMULATOR_HOST``. It implements what the runtime relies on:
StreamingPull with flow control, Pull, ack deadlines and ModifyAckDeadline, redelivery with retry
backoff, dead-letter policies with delivery attempts, retention and seek; and what apps declare:
filters, ordering keys, snapshots, DetachSubscription, the publish limits, and a REST port. Google's
official emulator is the second broker (runtime.local.broker.official). See docs/emulator.md.

The public names are loaded on first use, so ``python -m runtime.local.broker`` can set up its JSON logging
before gRPC and the Google libraries are imported.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.local.broker.server import EmulatorHandle, start_emulator
    from runtime.local.broker.stats import EmulatorStats, SubscriptionStats

__all__ = ["EmulatorHandle", "EmulatorStats", "SubscriptionStats", "start_emulator"]

_HOMES = {
    "EmulatorHandle": "runtime.local.broker.server",
    "start_emulator": "runtime.local.broker.server",
    "EmulatorStats": "runtime.local.broker.stats",
    "SubscriptionStats": "runtime.local.broker.stats",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
