"""What every command shares: the consoles, option types, finding the platform, and one-line errors.

Errors a user can cause or fix (bad input, platform down, API refusal) print one clear line and exit
non-zero; only real bugs keep their traceback.
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, ParamSpec, TypeVar

import typer
from rich.console import Console

from runtime.protocol.queues import DEFAULT_QUEUE

# The clients, pydantic and the local platform are imported where they are used: `gpurt --help` imports every
# command module, and must not pay for them (tests/gpurt/test_cli_import.py).
if TYPE_CHECKING:
    from gpurt.client import Client
    from runtime.access.control_api import ApiClient
    from runtime.access.target import Target
    from runtime.access.transport import PubSubClients

# google-api-core warns on every import that Python 3.11 support ends in 2027: noise for a CLI user.
warnings.filterwarnings("ignore", message="You are using a Python version", category=FutureWarning)

console = Console()
err_console = Console(stderr=True)

EXIT_FAILED: Final = 1  # the operation ran and failed (job failed/rejected, API refused)
EXIT_USAGE: Final = 2  # bad input (Typer's own convention)
EXIT_TIMEOUT: Final = 3  # gave up waiting; the operation may still complete
EXIT_NO_CAPACITY: Final = 4  # `gpurt validate`: the platform works, but a quota is below the stack's need

ApiUrlOption = Annotated[str | None, typer.Option("--api-url", help="Scheduler API URL "
                         "(default: $GPURT_API_URL, the local platform's state, http://127.0.0.1:8080).")]
LocalDirOption = Annotated[Path | None, typer.Option("--local-dir", help="Local platform state folder.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]

P = ParamSpec("P")
R = TypeVar("R")


class UserError(Exception):
    """Input the user must fix; printed without a traceback, exit code 2."""


class NoPlatform(Exception):
    """Nothing to talk to: no local platform and no cloud settings; exit code 1."""


def friendly_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn the errors a user can act on into a one-line message and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            err_console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(130) from None
        except Exception as exc:
            from gpurt.client.errors import ClientError
            from runtime.access.control_api import ApiError
            from runtime.access.local_state import StateError
            from runtime.local.platform import LocalPlatformError

            if isinstance(exc, ApiError | ClientError | LocalPlatformError | StateError | NoPlatform):
                err_console.print(f"[red]error:[/] {exc}")
                raise typer.Exit(EXIT_FAILED) from None
            from google.api_core.exceptions import GoogleAPICallError
            from google.auth.exceptions import GoogleAuthError

            if isinstance(exc, GoogleAPICallError):
                err_console.print(f"[red]error:[/] Pub/Sub refused the call: {exc.message}")
                raise typer.Exit(EXIT_FAILED) from None
            if isinstance(exc, GoogleAuthError):
                err_console.print(f"[red]error:[/] no usable Google credentials ({exc}); run "
                                  "`gcloud auth application-default login`, or use `gpurt local up`")
                raise typer.Exit(EXIT_FAILED) from None
            raise

    return wrapper


def target(api_url: str | None) -> Target:
    """The platform this command talks to."""
    from runtime.access.target import resolve_target

    return resolve_target(api_url=api_url)


def pubsub_clients(api_url: str | None, operator: bool = False) -> PubSubClients:
    """Pub/Sub clients for the target platform; a clear error when none is configured.

    On the local platform they carry the user's broker token (submit and collect), or with ``operator`` the
    operator's (everything: the dead-letter tools)."""
    from runtime.access.target import NO_PLATFORM, PROJECT_ENV
    from runtime.access.transport import make_clients

    resolved = target(api_url)
    if resolved.emulator_host is None and not os.environ.get(PROJECT_ENV):
        raise NoPlatform(NO_PLATFORM)
    token = resolved.emulator_token if operator else resolved.emulator_user_token
    return make_clients(resolved.project, resolved.emulator_host, token)


def python_client(api_url: str | None, queue: str = DEFAULT_QUEUE) -> Client:
    """The Python API's ``Client`` on the target platform, publishing to ``queue``: the CLI submits and waits as a
    notebook does. A name no queue can have is bad input (exit 2); no platform to talk to is ``PlatformNotRunning``.
    """
    from gpurt.client import Client
    from runtime.protocol.queues import QueueError

    try:
        return Client(api_url=api_url, queue=queue)
    except QueueError as exc:
        raise UserError(str(exc)) from None


def api_client(api_url: str | None) -> ApiClient:
    """An authenticated client of the scheduler API."""
    from runtime.access.control_api import ApiClient

    resolved = target(api_url)
    return ApiClient(resolved.api_url, resolved.token)


def print_json(value: Any) -> None:
    """Print ``value`` (models included) as JSON on stdout."""
    # Plain echo, not rich: JSON must never be wrapped or coloured for the program reading it.
    typer.echo(json.dumps(_plain(value), indent=2, default=str))


def print_answer(answer: Any, as_json: bool, message: str) -> None:
    """The outcome of a control call: the API's answer as JSON, or one line for a person."""
    if as_json:
        print_json(answer)
    else:
        console.print(message)


def _plain(value: Any) -> Any:
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value
