"""Where a client sends its calls: the scheduler API, its control token, and the Pub/Sub endpoint.

Resolution order, most explicit first: command-line flags, then environment (``GPURT_API_URL``,
``GPURT_CONTROL_TOKEN``, ``PUBSUB_EMULATOR_HOST``, ``GPURT_PROJECT``), then the local platform's state file.
So ``gpurt`` works unconfigured against ``gpurt local up`` and, with two variables set, against a cluster.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from runtime.access.local_state import LocalState, default_local_dir, is_alive, load_state
from runtime.protocol.contract import SCHEDULER_PORT, SchedulerEnv

API_URL_ENV: Final = "GPURT_API_URL"
# A client reads the project, the control token and the emulator from the variables the scheduler reads them from.
PROJECT_ENV: Final = SchedulerEnv.PROJECT
EMULATOR_ENV: Final = SchedulerEnv.PUBSUB_EMULATOR_HOST
DEFAULT_PROJECT: Final = "gpurt-local"
DEFAULT_API_URL: Final = f"http://127.0.0.1:{SCHEDULER_PORT}"
# What a client says when nothing names a platform (the CLI and the Python client alike).
NO_PLATFORM: Final = ("no platform to talk to: start one with `gpurt local up`, or set GPURT_PROJECT (with Google "
                      "credentials) for a cloud project, or PUBSUB_EMULATOR_HOST for an emulator")


@dataclass(frozen=True)
class Target:
    """A resolved platform endpoint set."""

    api_url: str
    project: str
    token: str | None = field(default=None, repr=False)
    emulator_host: str | None = None
    emulator_admin_url: str | None = None
    source: str = "defaults"  # where the settings came from, for `--help`-style diagnostics
    # The local broker's tokens from the state file (operator: everything; user: submit and collect); None
    # for an emulator named by PUBSUB_EMULATOR_HOST or a cloud project.
    emulator_token: str | None = field(default=None, repr=False)
    emulator_user_token: str | None = field(default=None, repr=False)
    # The local broker's publish tokens of the desk queues, by queue name: locally, as in the cloud, a desk may
    # publish to its own queue's topic and no other (docs/python-api.md, "Queues"). A queue without one here is
    # published to with the user token (the built-in queues; a cloud project's ambient credentials).
    emulator_queue_tokens: dict[str, str] = field(default_factory=dict, repr=False)


def resolve_target(api_url: str | None = None, token: str | None = None, project: str | None = None,
                   local_dir: Path | None = None) -> Target:
    """Combine flags, environment and the local state file into a ``Target``."""

    state = load_state(local_dir or default_local_dir())
    env_url = os.environ.get(API_URL_ENV)
    source = "flags/environment" if (api_url or env_url) else ("local state" if state else "defaults")
    return Target(
        api_url=(api_url or env_url or (_live_api(state) if state else DEFAULT_API_URL)).rstrip("/"),
        project=project or os.environ.get(PROJECT_ENV) or (state.project if state else DEFAULT_PROJECT),
        token=token or os.environ.get(SchedulerEnv.CONTROL_TOKEN) or (state.control_token if state else None),
        emulator_host=os.environ.get(EMULATOR_ENV) or (state.emulator_host if state else None),
        emulator_admin_url=state.emulator_admin_url if state else None,
        source=source,
        # Only for the state's own emulator: a token is never sent to one the environment names.
        emulator_token=state.broker_token if state and not os.environ.get(EMULATOR_ENV) else None,
        emulator_user_token=state.broker_user_token if state and not os.environ.get(EMULATOR_ENV) else None,
        emulator_queue_tokens=dict(state.broker_queue_tokens) if state and not os.environ.get(EMULATOR_ENV) else {},
    )


def _live_api(state: LocalState) -> str:
    """The API of the first scheduler replica still running: with replicas, one crash must not cut the CLI off."""

    return next((r.api_url for r in state.schedulers() if r.api_url and is_alive(r)), state.api_url)
