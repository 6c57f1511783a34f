"""The runbooks match the commands: every ``gpurt`` line names an existing command and only its flags."""

from __future__ import annotations

import re
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

RUNBOOKS = Path(__file__).resolve().parents[2] / "docs" / "runbooks"
DOCS = RUNBOOKS.parent
ALERT_PAGES = ("gpu-node-down", "gpu-ecc-errors", "dask-workers-down", "low-gpu-utilization", "high-job-failure-rate",
               "high-gpu-temperature", "queue-backlog", "pool-evictions", "gpu-memory-pressure", "leader-election",
               "reclaimer-errors", "dlq-growth", "elevated-retries")
PLAYBOOKS = ("post-deploy-checklist", "emergency-intake-stop", "drain-upgrade", "evict-pool", "dlq-storm",
             "leader-stuck-lock", "oom")
_FENCE = re.compile(r"```(?:bash|sh|console)?\n(.*?)```", re.DOTALL)
_INLINE = re.compile(r"`(gpurt [^`]+)`")


def _commands(text: str) -> list[str]:
    lines = [line.strip() for block in _FENCE.findall(text) for line in block.splitlines()]
    fenced = [line.split("#", 1)[0].strip() for line in lines if line.startswith("gpurt ")]
    return fenced + [" ".join(match.split()) for match in _INLINE.findall(text)]


def _all_commands() -> list[tuple[str, str]]:
    pages = [*sorted(RUNBOOKS.glob("*.md")), DOCS / "validation.md", DOCS / "rollback.md"]
    return [(page.name, command) for page in pages if page.exists() for command in _commands(page.read_text())]


def _is_group(command: Any) -> bool:
    # Typer vendors its own click: a group is whatever has sub-commands.
    return bool(getattr(command, "commands", None))


def _resolve(root: Any, words: list[str]) -> tuple[Any, list[str]]:
    command, path = root, []
    for word in words:
        if not _is_group(command) or word not in command.commands:
            break
        command, path = command.commands[word], [*path, word]
    return command, path


def test_every_playbook_and_alert_has_a_page() -> None:
    assert {p.stem for p in RUNBOOKS.glob("*.md")} >= set(ALERT_PAGES) | set(PLAYBOOKS)


def test_alert_rules_link_to_existing_runbooks() -> None:
    from runtime.manifests.alerts import render_rules_yaml

    rules = [rule for group in yaml.safe_load(render_rules_yaml())["groups"] for rule in group["rules"]]
    links = {rule["annotations"]["runbook_url"] for rule in rules if "alert" in rule}
    assert links, "the rendered rules carry no runbook links"
    assert {link for link in links if not (DOCS.parent / link).exists()} == set()


def test_runbooks_use_many_commands() -> None:
    assert len(_all_commands()) > 60


@cache
def _command_tree() -> Any:
    # Built once: Typer builds the whole tree from the functions' signatures on every call (0.15 s each).
    from gpurt.cli.app import app

    return typer.main.get_command(app)


@cache
def _help_problem(path: tuple[str, ...]) -> str | None:
    """Why ``gpurt <path> --help`` fails, or None; once per command, however many lines use it."""
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, [*path, "--help"])
    return None if result.exit_code == 0 else f"--help failed: {result.output}"


def _problem(line: str) -> str | None:
    """Why ``line`` is not a valid gpurt command line, or None."""
    words = shlex.split(line)[1:]
    command, path = _resolve(_command_tree(), words)
    if not path:
        return "names no gpurt command"
    if _is_group(command):
        return f"stops at the group {' '.join(path)}"
    if problem := _help_problem(tuple(path)):
        return problem
    known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    unknown = sorted({word.split("=", 1)[0] for word in words if word.startswith("-")} - known)
    return f"uses unknown flag(s) {unknown}" if unknown else None


def test_the_checker_catches_wrong_commands_and_flags() -> None:
    assert _problem("gpurt pools scale t4-spot 2") is None
    assert _problem("gpurt pool scale t4-spot 2") == "names no gpurt command"
    assert _problem("gpurt pools") == "stops at the group pools"
    assert _problem("gpurt pools scale t4-spot 2 --force") == "uses unknown flag(s) ['--force']"


@pytest.mark.parametrize(("page", "line"), _all_commands(), ids=lambda value: value)
def test_runbook_command_exists_with_its_flags(page: str, line: str) -> None:
    assert _problem(line) is None, f"{page}: `{line}` {_problem(line)}"


def test_every_documented_pulumi_stack_is_fully_qualified() -> None:
    """``gpurt`` refuses a bare ``--stack`` where it opens a Pulumi stack (Pulumi would resolve it in the caller's
    default organization): no page may show one."""
    opening = ("gpurt validate", "gpurt rollback", "gpurt state backup", "gpurt state restore", "gpurt state repair")
    pages = [*DOCS.glob("*.md"), *RUNBOOKS.glob("*.md"), DOCS.parent / "README.md"]
    bare = [(page.name, command) for page in pages for command in _commands(page.read_text())
            if command.startswith(opening) for stack in re.findall(r"--stack (\S+)", command)
            if "/" not in stack and stack not in ('"$STACK_REF"', "…")]
    assert bare == []
