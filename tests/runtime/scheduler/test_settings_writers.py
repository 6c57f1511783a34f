"""The gpu-scheduler's two writers, the Kubernetes manifest and the local platform, set only variables
``Settings`` reads, each in a form it parses back to what the writer meant; and the names are the contract's.

The scheduler ignores variables it does not read, so a misspelt or retired name in a writer would change
nothing, silently: these tests are what catches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import AliasChoices

from runtime.local.platform import LocalConfig, replica_env, scheduler_env
from runtime.manifests import scheduler as manifest
from runtime.protocol import contract
from runtime.protocol.contract import SchedulerEnv
from runtime.protocol.queues import QueueSpec
from runtime.protocol.queues import encode as encode_queues
from runtime.scheduler.settings import Settings, SettingsError

# What Kubernetes' downward API puts in the variables the manifest fills from the pod itself.
DOWNWARD_API = {"metadata.name": "gpu-scheduler-7d9f-abcde", "metadata.namespace": contract.RUNTIME_NAMESPACE}


def _fields_by_variable() -> dict[str, str]:
    """Every variable ``Settings`` reads -> the field it fills."""
    found = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        for variable in (alias.choices if isinstance(alias, AliasChoices) else [alias] if alias else []):
            found[str(variable)] = name
    return found


def _as_text(value: Any) -> str:
    """A parsed setting written back the way the environment spells it."""
    if value is None:
        return ""
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    if isinstance(value, tuple) and value and all(isinstance(item, QueueSpec) for item in value):  # GPURT_QUEUES
        return encode_queues(value)
    if isinstance(value, dict):  # pool[=seconds],...
        return ",".join(key if seconds is None else f"{key}={seconds}" for key, seconds in value.items())
    return str(value)


def _written_as_text(variable: str, value: str) -> str:
    if variable == SchedulerEnv.VERTEX_TYPES:  # a set: the order written does not matter
        return ",".join(sorted(part.strip() for part in value.split(",")))
    return value


def problems(env: Mapping[str, str]) -> list[str]:
    """Why ``env``, as a writer sets it, is not what the scheduler would read (empty: it is)."""
    fields = _fields_by_variable()
    found = [f"{variable} is not a setting the scheduler reads" for variable in env if variable not in fields]
    try:
        parsed = Settings.from_env({k: v for k, v in env.items() if k in fields})
    except SettingsError as exc:
        return [*found, str(exc)]
    defaults = Settings.from_env({})
    for variable, value in env.items():
        field = fields.get(variable)
        if field is None:
            continue
        if value == "":  # empty means unset: the default holds
            if getattr(parsed, field) != getattr(defaults, field):
                found.append(f"{variable} is empty but {field} is not its default")
        elif _as_text(getattr(parsed, field)).casefold() != _written_as_text(variable, value).casefold():
            found.append(f"{variable}={value!r} is read as {field}={getattr(parsed, field)!r}")
    return found


def _manifest_env(spec: manifest.SchedulerSpec, token_file: Path) -> dict[str, str]:
    """The scheduler container's environment as the pod would see it (the token file mounted at ``token_file``)."""
    [container] = manifest.build_deployment(spec)["spec"]["template"]["spec"]["containers"]
    env = {}
    for item in container["env"]:
        if "valueFrom" in item:
            env[item["name"]] = DOWNWARD_API[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[item["name"]] = item["value"]
    assert env[SchedulerEnv.CONTROL_TOKEN_FILE] == manifest.TOKEN_FILE
    env[SchedulerEnv.CONTROL_TOKEN_FILE] = str(token_file)  # the mounted Secret, here
    return env


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("secret-token\n", encoding="utf-8")
    return path


def test_the_contract_names_exactly_the_variables_settings_reads() -> None:
    assert set(_fields_by_variable()) == contract.SCHEDULER_ENV_NAMES


def test_the_kubernetes_manifest_sets_only_what_the_scheduler_reads(token_file: Path) -> None:
    plain = manifest.SchedulerSpec(project="impulse-gpu-runtime", image="registry.example/scheduler:abc",
                                   result_store="gs://impulse-results/results")
    # Every optional branch of the writer: Vertex AI routing, queued pools, extra settings.
    routed = manifest.SchedulerSpec(
        project="impulse-gpu-runtime", image="registry.example/scheduler:abc",
        result_store="gs://impulse-results/results", extra_env={SchedulerEnv.LOG_LEVEL: "debug"},
        vertex=manifest.VertexRouting(job_types=("portfolio_var", "asian_option"),
                                      service_account="gpu-runtime@impulse-gpu-runtime.iam.gserviceaccount.com",
                                      image="registry.example/worker:abc", region="us-central1",
                                      machine_type="a2-highgpu-2g", accelerator="NVIDIA_TESLA_A100",
                                      accelerator_count=2, spill_after_s=900),
        queued_pools={"a100-flex": 86400, "h100": None},
    )
    for spec in (plain, routed):
        env = _manifest_env(spec, token_file)
        assert problems(env) == []
    read_back = Settings.from_env(_manifest_env(routed, token_file))
    assert read_back.control_token == "secret-token"
    # The stack's GPU count reaches the custom jobs (a2-highgpu-2g is refused with any other count).
    assert (read_back.vertex_machine_type, read_back.vertex_accelerator_count) == ("a2-highgpu-2g", 2)


@pytest.mark.parametrize("replicas", (1, 2))
def test_the_local_platform_sets_only_what_the_scheduler_reads(tmp_path: Path, replicas: int) -> None:
    # One replica with Vertex AI overflow (the custom-jobs stand-in), the others without.
    config = LocalConfig(workers=3 if replicas == 1 else None, gpus=1 if replicas == 1 else None,
                         replicas=replicas, scheduler_env={SchedulerEnv.SHARD_PATHS: "1000000"},
                         spill_after_s=2.5 if replicas == 1 else None)
    lease_file = tmp_path / "lease.json" if replicas > 1 else None
    token_file = tmp_path / "control-token"
    token_file.write_text("local-token", encoding="utf-8")
    shared = scheduler_env(config, emulator_host="127.0.0.1:8085", result_store=(tmp_path / "results").as_uri(),
                           token_file=token_file, lease_file=lease_file, emulator_admin_url="http://127.0.0.1:8090",
                           vertex_url="http://127.0.0.1:8095")
    assert (SchedulerEnv.VERTEX_SPILL_AFTER_S in shared) is (replicas == 1)
    for index in range(replicas):
        env = replica_env(shared, config.host, f"scheduler-{index + 1}", 8080 + index, 9000 + index,
                          probe_port=9100 + index, elected=lease_file is not None)
        assert problems(env) == []
        # The token reaches a replica as a file: its environment, which its Dask processes inherit, has none.
        assert SchedulerEnv.CONTROL_TOKEN not in env and "local-token" not in env.values()
        assert Settings.from_env(env).control_token == "local-token"


def test_a_misspelt_or_malformed_setting_is_caught(token_file: Path) -> None:
    spec = manifest.SchedulerSpec(project="p", image="i", result_store="gs://b/r")
    env = _manifest_env(spec, token_file)

    assert problems({**env, "GPURT_LOGLEVEL": "debug"}) == ["GPURT_LOGLEVEL is not a setting the scheduler reads"]
    [why] = problems({**env, SchedulerEnv.PORT: "eighty"})
    assert SchedulerEnv.PORT in why
    # Parsed, but not as written: a pool listed twice is read once, with the last entry's duration.
    [why] = problems({**env, SchedulerEnv.QUEUED_POOLS: "a100-flex=86400,a100-flex"})
    assert why.startswith(f"{SchedulerEnv.QUEUED_POOLS}='a100-flex=86400,a100-flex' is read as queued_pools=")


def test_the_manifest_refuses_extra_settings_the_scheduler_does_not_read() -> None:
    with pytest.raises(ValueError, match="extra_env: GPURT_LOGLEVEL is not a setting the gpu-scheduler reads"):
        manifest.SchedulerSpec(project="p", image="i", result_store="gs://b/r", extra_env={"GPURT_LOGLEVEL": "debug"})
