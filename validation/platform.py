"""The local platform as validation sees it: what ``gpurt validate --local`` and the drills ask of it.

Validation runs against a platform; it does not start one. So it declares the handle it needs here, and the
CLI (``gpurt/cli``) passes in the real ``runtime.local.platform.LocalPlatform``, which satisfies these
protocols structurally. That keeps ``validation`` off ``runtime.local`` and ``runtime.scheduler`` (an
import-linter contract in ``pyproject.toml``; docs/architecture.md, "Layers"), and lets a test hand a
drill a stand-in.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

from runtime.access.local_state import LocalState
from runtime.access.transport import PubSubClients

Step = Callable[[str], None]


class PlatformView(Protocol):
    """A local platform's saved state, read-only: what the post-deploy checks of ``--local`` need."""

    @property
    def directory(self) -> Path:
        """The platform's state folder."""
        ...

    @property
    def state(self) -> LocalState | None:
        """The saved state, or None when the platform was not started."""
        ...


class RestartedReplica(Protocol):
    """One scheduler replica the platform replaced."""

    @property
    def name(self) -> str:
        """The replica's process name (``scheduler``, ``scheduler-2``, …)."""
        ...

    @property
    def old_pid(self) -> int:
        """The pid it had before."""
        ...

    @property
    def new_pid(self) -> int:
        """The pid it has now."""
        ...

    @property
    def drained(self) -> bool:
        """False when it was not running, or its jobs outlived the drain (Pub/Sub redelivers them)."""
        ...


class DrillPlatform(PlatformView, Protocol):
    """A running local platform the drills may break and mend: restart, kill, drain, monitor."""

    def running_state(self) -> LocalState:
        """The state of the running platform; raises when it is not up."""
        ...

    def pubsub(self, as_user: bool = False) -> PubSubClients:
        """Pub/Sub clients bound to the platform's broker, as its operator or, with ``as_user``, as a user."""
        ...

    def restart_scheduler(self, on_step: Step = ..., drain_timeout_s: float = ..., grace_s: float = ...,
                          names: Collection[str] | None = None) -> Sequence[RestartedReplica]:
        """Replace the named scheduler replicas (default: all) in turn, each drained first."""
        ...

    def kill_scheduler(self, name: str) -> int:
        """SIGKILL one scheduler replica, as a crash would; returns its pid."""
        ...

    def restart_emulator(self, on_step: Step = ...) -> int:
        """Stop the Pub/Sub broker, start it again on its ports; returns its new pid."""
        ...

    def intake_drained(self, timeout_s: float = ...,
                       on_step: Step = ...) -> contextlib.AbstractContextManager[LocalState]:
        """Every live scheduler replica drained while the block runs; intake resumes afterwards."""
        ...

    def start_monitoring(self, alert_time_scale: float, on_step: Step = ...) -> LocalState:
        """Start Prometheus, Alertmanager and the alert receiver (replacing any); returns the state."""
        ...

    def stop_monitoring(self, grace_s: float = ...) -> LocalState:
        """Stop the monitoring processes and forget them; returns the state."""
        ...

    def broker_checks_credentials(self) -> bool:
        """Whether the running broker refuses a call without a token its principals allow."""
        ...

    def broker_is_durable(self) -> bool:
        """Whether the running broker keeps its messages across a restart."""
        ...
