"""Tests of the local Pub/Sub broker, beside Google's official emulator."""

import pytest

# The modules whose tests run against both brokers (``pubsub`` in conftest.py) name this xdist group: the
# official emulator, a JVM, is one per package and worker, so they share one worker (tests/conftest.py).
ON_THE_OFFICIAL_EMULATOR = pytest.mark.xdist_group("tests/runtime/local/broker/conftest.py::official_emulator")
