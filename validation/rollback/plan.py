"""Choosing what to roll back to, from the stack's history, and describing the change. Pure functions."""

from __future__ import annotations

from dataclasses import dataclass

from validation.adapters.pulumi_stack import SECRET_MASK, UpdateRecord


class RollbackError(RuntimeError):
    """No rollback target can be chosen; the message says why and what to do instead."""


class NothingToUndo(RollbackError):
    """No update newer than the one a deploy started from: the deploy changed nothing, so nothing is undone."""


@dataclass(frozen=True)
class ConfigChange:
    """One configuration key that differs between the current and the target update."""

    key: str
    current: str | None
    target: str | None


@dataclass(frozen=True)
class RollbackPlan:
    """Roll back from ``current`` to ``target``: check out ``commit`` and deploy it with the target's config."""

    current: UpdateRecord
    target: UpdateRecord
    commit: str
    config_changes: tuple[ConfigChange, ...]


def _updates(history: list[UpdateRecord]) -> list[UpdateRecord]:
    return [entry for entry in history if entry.kind == "update"]


def choose_target(history: list[UpdateRecord], to_version: int | None = None,
                  since: int | None = None) -> RollbackPlan:
    """The plan: by default the newest succeeded ``update`` older than the newest update, else ``to_version``.

    ``since`` is the stack's newest history version when a deploy began: then only an update newer than it
    (the deploy's own, failed or rejected by validation) is undone, back to the newest update that succeeded
    up to ``since`` (what ran before the deploy). Without a newer update the deploy changed nothing, and
    ``NothingToUndo`` says so: a refusal before or inside ``pulumi up``'s preview must not redeploy an older
    program over a healthy stack.
    """
    updates = sorted(_updates(history), key=lambda e: e.version, reverse=True)
    if since is not None and (not updates or updates[0].version <= since):
        raise NothingToUndo(f"no update newer than version {since}: the deploy changed nothing, nothing to undo")
    if since is not None and to_version is None:
        to_version = next((e.version for e in updates if e.version <= since and e.result == "succeeded"), None)
        if to_version is None:
            raise RollbackError(f"no succeeded update up to version {since}, the one before this deploy; "
                                "restore a state checkpoint instead (`gpurt state restore`)")
    if not updates:
        raise RollbackError("the stack has no update in its history: nothing to roll back to")
    current = updates[0]
    if to_version is not None:
        target = next((e for e in updates if e.version == to_version), None)
        if target is None:
            known = ", ".join(str(e.version) for e in updates[:10])
            raise RollbackError(f"version {to_version} is not an update of this stack (recent updates: {known})")
        if target.version == current.version:
            raise RollbackError(f"version {to_version} is the current update; nothing to roll back")
        if target.result != "succeeded":
            raise RollbackError(f"version {to_version} ended {target.result!r}; roll back to a succeeded update")
    else:
        target = next((e for e in updates[1:] if e.result == "succeeded"), None)
        if target is None:
            raise RollbackError(f"no succeeded update before version {current.version}; "
                                "restore a state checkpoint instead (`gpurt state restore`)")
    if not target.commit:
        raise RollbackError(f"update {target.version} recorded no git commit (it ran outside a git checkout), "
                            "so its program cannot be checked out; use `gpurt state restore` instead")
    return RollbackPlan(current=current, target=target, commit=target.commit,
                        config_changes=config_diff(current, target))


def config_diff(current: UpdateRecord, target: UpdateRecord) -> tuple[ConfigChange, ...]:
    """Keys whose value differs between two updates; secret values are masked."""

    def shown(entry: UpdateRecord, key: str) -> str | None:
        if key not in entry.config:
            return None
        return SECRET_MASK if key in entry.secret_keys else entry.config[key]

    keys = sorted(set(current.config) | set(target.config))
    return tuple(ConfigChange(key, shown(current, key), shown(target, key)) for key in keys
                 if current.config.get(key) != target.config.get(key))
