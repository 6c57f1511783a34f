"""Fixtures of the validation tests: a real Pub/Sub emulator with the contract's topology."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from components import contract
from validation.clients.pubsub import GooglePubSubAdmin

PROJECT = "gpurt-validation-test"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def emulator() -> Iterator[object]:
    """The project's emulator on a free port, stopped afterwards."""
    from runtime.emulator import start_emulator

    handle = start_emulator(port=0)
    yield handle
    handle.stop()


@pytest.fixture
def pubsub(emulator) -> GooglePubSubAdmin:
    """A ``GooglePubSubAdmin`` on the emulator, with the contract's topics and subscriptions created."""
    from runtime.pubsub.admin import ensure_topology

    admin = GooglePubSubAdmin.for_emulator(emulator.address, PROJECT)
    ensure_topology(PROJECT, admin._publisher, admin._subscriber)
    return admin


def request_subscription_path() -> str:
    """Full path of the request subscription in the test project."""
    return f"projects/{PROJECT}/subscriptions/{contract.REQUEST_SUBSCRIPTION}"
