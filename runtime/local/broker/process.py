"""The builtin emulator as a process of its own, and the real client pointed at an emulator, from outside.

``gpurt bench emulator`` and the durability tests drive the broker exactly as a user's program would: a
``python -m runtime.local.broker`` process, and google-cloud-pubsub's default clients, which find it through
``PUBSUB_EMULATOR_HOST``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from google.cloud.pubsub_v1 import PublisherClient, SubscriberClient

# Starting the process (imports, the first listen) or stopping it takes seconds; this bounds a wedged one.
PROCESS_TIMEOUT_S: Final = 60.0
_ADDRESS_LINE: Final = "PUBSUB_EMULATOR_HOST="  # what ``python -m runtime.local.broker`` prints once it listens


@contextmanager
def builtin_process(*options: str, port: int = 0) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``python -m runtime.local.broker`` on ``port`` (0: a free one) with ``options`` (``--data-dir DIR``…).

    Yields the process and its address once it accepts connections; stops it after (if a caller killed it,
    only reaps it). Raises ``RuntimeError`` with its exit status if it did not start.
    """
    process = subprocess.Popen([sys.executable, "-m", "runtime.local.broker", "--port", str(port),
                                "--log-level", "WARNING", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline().strip() if process.stdout else ""
        if not line.startswith(_ADDRESS_LINE):
            if line:  # still running, but not the emulator's first line: stopped below
                raise RuntimeError(f"the builtin emulator did not start: it printed {line[:200]!r}")
            # Its stdout closed because it is exiting; the status is known once it has exited.
            raise RuntimeError(f"the builtin emulator did not start (exit status "
                               f"{process.wait(timeout=PROCESS_TIMEOUT_S)})")
        yield process, line.removeprefix(_ADDRESS_LINE)
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=PROCESS_TIMEOUT_S)
        if process.stdout:
            process.stdout.close()


@contextmanager
def default_clients(address: str) -> Iterator[tuple[PublisherClient, SubscriberClient]]:
    """google-cloud-pubsub's default publisher and subscriber on the emulator at ``address``, closed after.

    Created as a user's code creates them, through ``PUBSUB_EMULATOR_HOST``, which is set while they are
    created and used and restored after.
    """
    from google.cloud import pubsub_v1

    previous = os.environ.get("PUBSUB_EMULATOR_HOST")
    os.environ["PUBSUB_EMULATOR_HOST"] = address  # the clients read it when they are created
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    try:
        yield publisher, subscriber
    finally:
        subscriber.close()
        publisher.stop()
        publisher.transport.close()
        if previous is None:
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)
        else:
            os.environ["PUBSUB_EMULATOR_HOST"] = previous
