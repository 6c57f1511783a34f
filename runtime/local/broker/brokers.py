"""The two Pub/Sub brokers the local platform can run (docs/emulator.md compares them).

A module of its own, with no imports beyond the standard library, so the CLI can offer the choice
without loading the emulator or the local platform.
"""

from __future__ import annotations

from enum import StrEnum


class Broker(StrEnum):
    """Which Pub/Sub emulator serves ``PUBSUB_EMULATOR_HOST``."""

    BUILTIN = "builtin"  # the project's own: time scaling for drills, an admin view for backlog and DLQ depth
    OFFICIAL = "official"  # Google's, a gcloud component (Java): real time only, no admin view
