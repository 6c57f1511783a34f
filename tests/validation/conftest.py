"""Fixtures of the validation tests: a real Pub/Sub emulator with the contract's topology."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.protocol import contract
from validation.adapters.pubsub import GooglePubSubAdmin

PROJECT = "gpurt-validation-test"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def emulator() -> Iterator[object]:
    """The project's emulator on a free port, stopped afterwards."""
    from runtime.local.broker import start_emulator

    handle = start_emulator(port=0)
    yield handle
    handle.stop()


@pytest.fixture
def pubsub(emulator) -> GooglePubSubAdmin:
    """A ``GooglePubSubAdmin`` on the emulator, with the contract's topics and subscriptions created."""
    from runtime.pubsub.admin import ensure_topology

    admin = GooglePubSubAdmin.for_emulator(emulator.address, PROJECT)
    ensure_topology(PROJECT, admin._publisher, admin._subscriber)
    return admin


def request_subscription_path() -> str:
    """Full path of the request subscription in the test project."""
    return f"projects/{PROJECT}/subscriptions/{contract.REQUEST_SUBSCRIPTION}"


@pytest.fixture
def pulumi_cli(tmp_path, monkeypatch):
    """A ``RecordingPulumiCli`` first on PATH, seeded from tests/fixtures/pulumi."""
    from tests.validation.recording_pulumi_cli import RecordingPulumiCli

    cli = RecordingPulumiCli(tmp_path / "pulumi-cli")
    monkeypatch.setenv("PATH", f"{cli.bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK", "1")
    return cli


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` with a fixed identity; returns stdout."""
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": os.environ["PATH"]}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def program(tmp_path) -> tuple[Path, str, str]:
    """A git checkout of a Pulumi program with two commits: (repo, good commit, bad commit)."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    (repo / "__main__.py").write_text("RELEASE = 'good'\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "good")
    good = git(repo, "rev-parse", "HEAD")
    (repo / "__main__.py").write_text("RELEASE = 'bad'\n")
    git(repo, "commit", "-qam", "bad")
    return repo, good, git(repo, "rev-parse", "HEAD")
