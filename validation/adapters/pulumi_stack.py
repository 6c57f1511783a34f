"""Pulumi stack seam and its adapter over ``pulumi.automation`` (which drives the ``pulumi`` CLI).

Rollback and state tools only see ``PulumiStack``. The adapter is the one place that knows the automation
API; tests run it against a recording stand-in for the CLI, so the real parsing code is exercised.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

SECRET_MASK = "[secret]"

OnOutput = Callable[[str], None]


@dataclass(frozen=True)
class UpdateRecord:
    """One entry of a stack's history: what ran, how it ended, from which commit, with which config."""

    version: int
    kind: str
    result: str
    start_time: datetime
    message: str = ""
    commit: str | None = None
    dirty: bool = False
    config: Mapping[str, str] = field(default_factory=dict)
    secret_keys: frozenset[str] = frozenset()
    # The structure of each object or array value (``config`` holds its JSON text): what restores its type.
    object_values: Mapping[str, Any] = field(default_factory=dict)


class PulumiStack(Protocol):
    """The stack operations rollback, state tools and cloud validation need."""

    name: str

    def outputs(self) -> dict[str, Any]:
        """Stack outputs, secrets revealed."""
        ...

    def history(self) -> list[UpdateRecord]:
        """All history entries, newest first."""
        ...

    def export(self, version: int | None = None) -> dict[str, Any]:
        """The deployment (``{version, deployment}``), current or of history ``version`` (Pulumi Cloud)."""
        ...

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Replace the stack's state with ``state`` (``{version, deployment}``)."""
        ...

    def refresh(self, on_output: OnOutput | None = None) -> str:
        """Reconcile the state with the cloud; returns the result."""
        ...

    def set_config(self, update: UpdateRecord) -> None:
        """Set the configuration ``update`` ran with on the stack (in its working directory), types included."""
        ...

    def up(self, on_output: OnOutput | None = None, policy_packs: Sequence[Path] = ()) -> str:
        """Deploy the program of the stack's working directory under ``policy_packs``; returns the result."""
        ...


# `pulumi stack history --json`'s time format (pkg/cmd/pulumi/stack/stack_history.go, cmd.FormatTime).
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def update_record(entry: Mapping[str, Any]) -> UpdateRecord:
    """One entry of ``pulumi stack history --json --show-secrets`` as an ``UpdateRecord``.

    The commit comes from ``environment['git.head']``. Each config value is ``{value, secret, objectValue}``
    (pkg/cmd/pulumi/stack/stack_history.go, ``configValueJSON``): ``objectValue`` is there only for an object
    or array value, and is what tells ``{"a": 1}`` the object from ``{"a": 1}`` the string.
    """
    env = entry.get("environment") or {}
    config = entry.get("config") or {}
    return UpdateRecord(
        version=int(entry.get("version") or 0), kind=entry["kind"], result=entry.get("result", ""),
        start_time=datetime.strptime(entry["startTime"], _TIME_FORMAT), message=entry.get("message") or "",
        commit=env.get("git.head"), dirty=str(env.get("git.dirty", "false")).lower() == "true",
        config={key: str(value.get("value", SECRET_MASK)) for key, value in config.items()},
        secret_keys=frozenset(key for key, value in config.items() if value.get("secret")),
        object_values={key: value["objectValue"] for key, value in config.items() if "objectValue" in value})


def config_json(update: UpdateRecord) -> str:
    """``update``'s config in the form ``pulumi config set-all --json`` reads (that of ``pulumi config --json``).

    pkg/cmd/pulumi/config/config.go ``newConfigSetAllCmd``: an entry with ``objectValue`` is stored as an object
    value, so an array or object key comes back with the type ``Pulumi.yaml`` declares for it; ``--plaintext
    key=value`` would store its JSON as a string, which ``pulumi up`` then refuses ("must be of type
    'array<string>'").
    """
    entries: dict[str, dict[str, Any]] = {}
    for key, value in update.config.items():
        entries[key] = {"value": value, "secret": key in update.secret_keys}
        if key in update.object_values:
            entries[key]["objectValue"] = update.object_values[key]
    return json.dumps(entries)


class AutomationStack:
    """``PulumiStack`` over ``pulumi.automation.Stack`` for a program directory."""

    def __init__(self, stack: Any) -> None:
        self._stack = stack
        self.name = stack.name

    @classmethod
    def select(cls, stack_name: str, work_dir: Path, pulumi_root: Path | None = None,
               env: Mapping[str, str] | None = None) -> AutomationStack:
        """Select ``stack_name`` for the program in ``work_dir``; ``pulumi_root`` holds ``bin/pulumi``."""
        from pulumi import automation as auto

        command = auto.PulumiCommand(root=str(pulumi_root)) if pulumi_root else None
        options = auto.LocalWorkspaceOptions(work_dir=str(work_dir), pulumi_command=command,
                                             env_vars=dict(env or {}))
        return cls(auto.select_stack(stack_name, work_dir=str(work_dir), opts=options))

    def outputs(self) -> dict[str, Any]:
        """Stack outputs, secrets revealed."""
        return {key: output.value for key, output in self._stack.outputs().items()}

    def history(self) -> list[UpdateRecord]:
        """All history entries, newest first.

        Read from the CLI's JSON, not ``Stack.history()``: automation's ``UpdateSummary`` drops ``objectValue``,
        and with it the type of every object and array value.
        """
        return [update_record(entry) for entry in json.loads(
            self._run(["stack", "history", "--json", "--show-secrets", "--stack", self.name]) or "[]")]

    def _run(self, args: list[str]) -> str:
        # what automation's own commands run with (LocalWorkspace._run_pulumi_cmd_sync)
        workspace = self._stack.workspace
        env = {**({"PULUMI_HOME": workspace.pulumi_home} if workspace.pulumi_home else {}), **workspace.env_vars}
        return str(workspace.pulumi_command.run(args, workspace.work_dir, env).stdout)

    def export(self, version: int | None = None) -> dict[str, Any]:
        """The current deployment, or (Pulumi Cloud) the one recorded at history ``version``."""
        if version is None:
            deployment = self._stack.export_stack()
            return {"version": deployment.version, "deployment": deployment.deployment}
        return dict(json.loads(self._run(
            ["stack", "export", "--version", str(version), "--show-secrets", "--stack", self.name])))

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Replace the stack's state with ``state``."""
        from pulumi import automation as auto

        self._stack.import_stack(auto.Deployment(version=state["version"], deployment=state["deployment"]))

    def refresh(self, on_output: OnOutput | None = None) -> str:
        """Reconcile the state with the cloud."""
        return self._stack.refresh(on_output=on_output).summary.result

    def set_config(self, update: UpdateRecord) -> None:
        """Set the configuration ``update`` ran with, each object and array value as one (``config_json``)."""
        self._stack.set_all_config_json(config_json(update))

    def up(self, on_output: OnOutput | None = None, policy_packs: Sequence[Path] = ()) -> str:
        """Deploy the program of the stack's working directory; a policy pack's violation stops it."""
        packs = [str(pack) for pack in policy_packs] or None
        return self._stack.up(on_output=on_output, policy_packs=packs).summary.result
