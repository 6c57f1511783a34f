"""A Pub/Sub emulator: the broker of the local platform.

A gRPC server speaking ``google.pubsub.v1`` Publisher and Subscriber, so the real google-cloud-pubsub
client works against it through ``PUBSUB_EMULATOR_HOST``. It implements what the runtime relies on:
StreamingPull with flow control, Pull, ack deadlines and ModifyAckDeadline, redelivery with retry
backoff, dead-letter policies with delivery attempts, retention and seek by time. See docs/emulator.md.
"""

from __future__ import annotations

from runtime.emulator.server import EmulatorHandle, start_emulator
from runtime.emulator.state import EmulatorStats, SubscriptionStats

__all__ = ["EmulatorHandle", "EmulatorStats", "SubscriptionStats", "start_emulator"]
