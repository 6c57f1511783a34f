"""The stand-in Pulumi CLI refuses what the real one refuses, for each rule the project relies on.

Each test here would pass against a lenient fake that accepted anything, and fails against this one; the
rules' sources in pulumi/pulumi are cited in ``tests/validation/fake_pulumi.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.validation.fake_pulumi import CliError, resolve_stack, validate_config_value
from tests.validation.recording_pulumi_cli import ORG, RecordingPulumiCli

pytestmark = pytest.mark.timeout(120)

PROJECT = """name: gpu-runtime
runtime: python
config:
  zones: {type: array, items: {type: string}}
  network: {type: object}
  replicas: {type: integer, default: 2}
  protect: {type: boolean, default: true}
  token: {type: string, secret: true}
"""


@pytest.mark.parametrize(("type_name", "items", "value", "valid"), [
    ("array", {"type": "string"}, ["us-central1-a"], True),
    ("array", {"type": "string"}, '["us-central1-a"]', False),  # an array's JSON text is a string
    ("array", {"type": "string"}, [1], False),
    ("array", {"type": "object"}, [{"name": "t4"}], True),
    ("object", None, {"subnetCidr": "10.0.0.0/20"}, True),
    ("object", None, '{"subnetCidr": "10.0.0.0/20"}', False),
    ("integer", None, "3", True),
    ("integer", None, "three", False),
    ("integer", None, 2.0, True),
    ("boolean", None, "false", True),
    ("boolean", None, "no", False),
    ("string", None, {"a": 1}, False),
])
def test_config_values_are_checked_against_their_declared_type(type_name, items, value, valid) -> None:
    assert validate_config_value(type_name, items, value) is valid


def test_a_bare_stack_name_resolves_against_the_default_org_not_the_stacks_own(tmp_path, monkeypatch) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: gpu-runtime\nruntime: python\n")
    monkeypatch.chdir(tmp_path)

    assert resolve_stack("staging", "alice") == "alice/gpu-runtime/staging"
    assert resolve_stack("impulse/staging", "alice") == "impulse/gpu-runtime/staging"
    assert resolve_stack("impulse/gpu-runtime/staging", "alice") == "impulse/gpu-runtime/staging"
    with pytest.raises(CliError, match="could not parse stack name"):
        resolve_stack("a/b/c/d", "alice")


@pytest.fixture
def cli(tmp_path: Path) -> RecordingPulumiCli:
    return RecordingPulumiCli(tmp_path / "cli", history=[], stacks=(f"{ORG}/gpu-runtime/staging",),
                              default_org="alice")


def _pulumi(cli: RecordingPulumiCli, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(cli.bin_dir / "pulumi"), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ})


@pytest.fixture
def program(tmp_path: Path) -> Path:
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text(PROJECT)
    return program


def test_a_stack_outside_the_default_org_needs_its_qualified_name(cli, program) -> None:
    refused = _pulumi(cli, program, "stack", "select", "--stack", "staging")
    selected = _pulumi(cli, program, "stack", "select", "--stack", f"{ORG}/gpu-runtime/staging")

    assert refused.returncode == 255 and "no stack named 'staging' found" in refused.stderr
    assert selected.returncode == 0, selected.stderr


@pytest.mark.parametrize(("plaintext", "error"), [
    (['zones=["us-central1-a"]', "network={}", "token=x"], "key 'network' must be of type 'object'"),
    (["network={}", "token=x"], "Stack 'staging' is missing configuration value 'zones'"),
])
def test_up_refuses_string_values_for_typed_keys_and_missing_keys(cli, program, plaintext, error) -> None:
    stack = f"{ORG}/gpu-runtime/staging"
    for pair in plaintext:
        assert _pulumi(cli, program, "config", "set-all", "--stack", stack, "--plaintext", pair).returncode == 0

    done = _pulumi(cli, program, "up", "--yes", "--stack", stack)

    assert done.returncode == 255 and error in done.stderr, done.stderr


def test_up_refuses_a_secret_key_in_plain_text_and_accepts_typed_json(cli, program) -> None:
    stack = f"{ORG}/gpu-runtime/staging"
    typed = {"gpu-runtime:zones": {"value": '["a"]', "objectValue": ["a"], "secret": False},
             "gpu-runtime:network": {"value": "{}", "objectValue": {}, "secret": False},
             "gpu-runtime:token": {"value": "x", "secret": False}}
    _pulumi(cli, program, "config", "set-all", "--stack", stack, "--json", json.dumps(typed))
    plain = _pulumi(cli, program, "up", "--yes", "--stack", stack)
    typed["gpu-runtime:token"]["secret"] = True
    _pulumi(cli, program, "config", "set-all", "--stack", stack, "--json", json.dumps(typed))
    accepted = _pulumi(cli, program, "up", "--yes", "--stack", stack)

    assert plain.returncode == 255 and "key 'token' must be encrypted as it's secret" in plain.stderr
    assert accepted.returncode == 0, accepted.stderr
    [entry] = json.loads(_pulumi(cli, program, "stack", "history", "--json", "--stack", stack).stdout)
    assert entry["config"]["gpu-runtime:zones"] == {"value": '["a"]', "objectValue": ["a"], "secret": False}
