"""Helpers for the infrastructure tests: run a component under the plan's realistic mocks and query it."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

import yaml

from components.config import StackConfig, parse_stack_config
from components.plan import REPO_ROOT, Plan, Recording, record, run_plan
from components.rendered import Resource

PROJECT = "impulse-gpu-runtime-test"
REGION = "us-central1"


def run(build: Callable[[], object], project: str = PROJECT, region: str = REGION) -> Recording:
    """Run ``build`` (which declares resources) under mocks and return what it registered."""
    return record(build, project=project, region=region)


def of_type(recording: Recording, type_: str) -> list[Resource]:
    """Resources of one Pulumi type token."""
    return [r for r in recording.resources if r.type == type_]


def named(recording: Recording, type_: str, name: str) -> Resource:
    """The one resource of ``type_`` with Pulumi name ``name``."""
    matches = [r for r in of_type(recording, type_) if r.name == name]
    assert len(matches) == 1, f"{len(matches)} {type_} named {name}"
    return matches[0]


def children_of(recording: Recording, component_name: str) -> list[Resource]:
    """Custom resources whose parent is the component named ``component_name``."""
    parents = {r.urn for r in recording.resources if not r.custom and r.name == component_name}
    return [r for r in recording.resources if r.custom and r.parent in parents]


def stack_config(stack: str, root: Path = REPO_ROOT) -> StackConfig:
    """The validated config of a committed stack file."""
    values = yaml.safe_load((root / f"Pulumi.{stack}.yaml").read_text())["config"]
    raw = {key.split(":", 1)[1]: value for key, value in values.items() if key.startswith("gpu-runtime:")}
    return parse_stack_config(raw, values["gcp:project"], values["gcp:region"])


@cache
def stack_plan(stack: str) -> Plan:
    """The offline plan of a committed stack, run once per test session (it takes seconds)."""
    return run_plan(stack)


GITHUB_REPOSITORY = "impulse-risk/gpu-runtime"


@cache
def bootstrap_recording(stack: str) -> Recording:
    """The bootstrap program (``bootstrap/__main__.py``) of a committed stack, run as the CLI would, under mocks."""
    import runpy

    config = stack_config(stack)
    return record(lambda: runpy.run_path(str(REPO_ROOT / "bootstrap" / "__main__.py"), run_name="__main__"),
                  project=config.project, region=config.region, stack=stack, project_name="gpu-runtime-bootstrap",
                  config={"gpu-runtime-bootstrap:githubRepository": GITHUB_REPOSITORY})
