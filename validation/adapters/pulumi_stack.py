"""Pulumi stack seam and its adapter over ``pulumi.automation`` (which drives the ``pulumi`` CLI).

Rollback and state tools only see ``PulumiStack``. The adapter is the one place that knows the automation
API; tests run it against a recording stand-in for the CLI, so the real parsing code is exercised.
"""

from __future__ import annotations

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

    def set_config(self, config: Mapping[str, str], secret_keys: frozenset[str]) -> None:
        """Set these configuration values on the stack (in its working directory)."""
        ...

    def up(self, on_output: OnOutput | None = None, policy_packs: Sequence[Path] = ()) -> str:
        """Deploy the program of the stack's working directory under ``policy_packs``; returns the result."""
        ...


def update_record(summary: Any) -> UpdateRecord:
    """An ``automation.UpdateSummary`` as an ``UpdateRecord`` (commit from ``environment['git.head']``)."""
    env = summary.environment or {}
    config = {key: str(value.value) for key, value in (summary.config or {}).items()}
    secrets = frozenset(key for key, value in (summary.config or {}).items() if value.secret)
    return UpdateRecord(
        version=int(summary.version or 0), kind=summary.kind, result=summary.result,
        start_time=summary.start_time, message=summary.message or "",
        commit=env.get("git.head"), dirty=str(env.get("git.dirty", "false")).lower() == "true",
        config=config, secret_keys=secrets)


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
        """All history entries, newest first."""
        return [update_record(summary) for summary in self._stack.history(show_secrets=True)]

    def export(self, version: int | None = None) -> dict[str, Any]:
        """The current deployment, or (Pulumi Cloud) the one recorded at history ``version``."""
        import json

        if version is None:
            deployment = self._stack.export_stack()
            return {"version": deployment.version, "deployment": deployment.deployment}
        workspace = self._stack.workspace
        result = workspace.pulumi_command.run(
            ["stack", "export", "--version", str(version), "--show-secrets", "--stack", self.name],
            workspace.work_dir, dict(workspace.env_vars))
        return json.loads(result.stdout)

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Replace the stack's state with ``state``."""
        from pulumi import automation as auto

        self._stack.import_stack(auto.Deployment(version=state["version"], deployment=state["deployment"]))

    def refresh(self, on_output: OnOutput | None = None) -> str:
        """Reconcile the state with the cloud."""
        return self._stack.refresh(on_output=on_output).summary.result

    def set_config(self, config: Mapping[str, str], secret_keys: frozenset[str]) -> None:
        """Set these configuration values on the stack."""
        from pulumi import automation as auto

        self._stack.set_all_config(
            {key: auto.ConfigValue(value=value, secret=key in secret_keys) for key, value in config.items()},
            path=False)

    def up(self, on_output: OnOutput | None = None, policy_packs: Sequence[Path] = ()) -> str:
        """Deploy the program of the stack's working directory; a policy pack's violation stops it."""
        packs = [str(pack) for pack in policy_packs] or None
        return self._stack.up(on_output=on_output, policy_packs=packs).summary.result
