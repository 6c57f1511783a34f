"""Helpers for the infrastructure tests: run a component under the plan's realistic mocks and query it."""

from __future__ import annotations

import fcntl
import importlib
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import pytest
import yaml

import components.review.plan
from components.config import StackConfig, parse_stack_config
from components.rendered import Resource
from components.review.plan import REPO_ROOT, Plan, Recording, record, run_plan

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


# Where the workers of a pytest-xdist run share rendered plans (tests/components/conftest.py sets it).
SHARED_PLANS: list[Path | None] = [None]


def stack_plan(stack: str) -> Plan:
    """The offline plan of a committed stack, run once per test run (it takes seconds of CPU)."""
    return _stack_render(stack)[0]


def stack_classes(stack: str) -> dict[str, type]:
    """The Python class that registered each resource type of ``stack_plan(stack)``, recorded during that same
    render."""
    return {token: _sdk_class(path) for token, path in _stack_render(stack)[1].items()}


def _sdk_class(path: str) -> type:
    """The SDK class at ``path`` (``pulumi_gcp.compute.network.Network``) through its package's attribute
    (``pulumi_gcp.compute.Network``): the providers' packages load their modules lazily, and importing one of
    their modules directly, as unpickling a class would, leaves the package without its classes."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module.rsplit(".", 1)[0]), name)


@cache
def _stack_render(stack: str) -> tuple[Plan, dict[str, str]]:
    """A committed stack's plan and its resources' classes, from one render per test run.

    Under pytest-xdist the tests that read a plan are spread over every worker; the first worker to need a
    stack's plan renders it and leaves it pickled in the run's shared folder for the others, instead of each
    worker rendering it again. The classes are kept as their modules' paths (``stack_classes`` says why).
    """
    folder = SHARED_PLANS[0]
    if folder is None:
        return _render(stack)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{stack}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one renders, the others wait for its file
        stored = folder / f"{stack}.pickle"
        if stored.exists():
            return pickle.loads(stored.read_bytes())
        rendered = _render(stack)
        stored.write_bytes(pickle.dumps(rendered))
        return rendered


def _render(stack: str) -> tuple[Plan, dict[str, str]]:
    from tests.components.sdk_inputs import resource_classes

    with resource_classes() as classes:
        plan = run_plan(stack)
    return plan, {token: f"{cls.__module__}.{cls.__qualname__}" for token, cls in classes.items()}


@contextmanager
def committed_plans_served() -> Iterator[None]:
    """Inside: a command's plan of this checkout's committed stack (``run_plan(stack)``, as ``gpurt plan`` and
    ``gpurt images pinned`` make it) is ``stack_plan``'s, rendered once per run, instead of a render of its own;
    a plan of another project folder is still rendered."""
    render = components.review.plan.run_plan

    def served(stack: str, root: Path | None = None) -> Plan:
        return stack_plan(stack) if root is None else render(stack, root)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(components.review.plan, "run_plan", served)
        yield


GITHUB_REPOSITORY = "impulse-risk/gpu-runtime"
# GitHub's numeric ids of that repository and its owner (what `gh api repos/OWNER/NAME` answers)
GITHUB_REPOSITORY_ID = "812345678"
GITHUB_OWNER_ID = "98765"


@cache
def bootstrap_recording(stack: str) -> Recording:
    """The bootstrap program (``bootstrap/__main__.py``) of a committed stack, run as the CLI would, under mocks."""
    import runpy

    config = stack_config(stack)
    return record(lambda: runpy.run_path(str(REPO_ROOT / "bootstrap" / "__main__.py"), run_name="__main__"),
                  project=config.project, region=config.region, stack=stack, project_name="gpu-runtime-bootstrap",
                  config={"gpu-runtime-bootstrap:githubRepository": GITHUB_REPOSITORY,
                          "gpu-runtime-bootstrap:githubRepositoryId": GITHUB_REPOSITORY_ID,
                          "gpu-runtime-bootstrap:githubOwnerId": GITHUB_OWNER_ID})
