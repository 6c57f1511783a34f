"""Stack config: the committed stacks are valid, and bad values fail with the key that is wrong."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import (
    VERTEX_ACCELERATOR_MACHINE_FAMILIES,
    ConfigError,
    load_control_token,
    load_stack_config,
    parse_stack_config,
)
from components.review.plan import REPO_ROOT, load_stack_settings, record
from tests.components.infra import stack_config


def _raw(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "zones": ["us-central1-a", "us-central1-b"],
        "network": {
            "subnetCidr": "10.0.0.0/20", "podsCidr": "10.4.0.0/14", "servicesCidr": "10.8.0.0/20",
            "masterCidr": "172.16.0.0/28",
        },
        "gpuPools": [{
            "name": "t4", "machineType": "n1-standard-8", "acceleratorType": "nvidia-tesla-t4", "maxNodes": 2,
            "daskWorkersMax": 4,
        }],
        "images": {"schedulerTag": "abc", "workerTag": "abc"},
        "vertex": {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4"},
    }
    raw.update(overrides)
    return raw


def _error(raw: dict[str, Any], project: str | None = "p", region: str | None = "us-central1") -> str:
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, project, region)
    return str(info.value)


@pytest.mark.parametrize("stack", ["staging", "production"])
def test_committed_stacks_are_valid(stack: str) -> None:
    config = stack_config(stack)
    assert config.region == "us-central1"
    assert config.gpu_pools and all(p.min_nodes == 0 for p in config.gpu_pools)


def test_stack_choices() -> None:
    staging, production = stack_config("staging"), stack_config("production")
    assert {p.accelerator_type for p in staging.gpu_pools} == {"nvidia-tesla-t4"}
    assert all(p.spot for p in staging.gpu_pools) and not staging.deletion_protection
    assert "nvidia-tesla-a100" in {p.accelerator_type for p in production.gpu_pools}
    assert production.deletion_protection


def test_vertex_accelerators_are_members_of_the_vertex_enum() -> None:
    enum = json.loads((Path(__file__).parent / "fixtures" / "vertex_accelerator_types.json").read_text())

    assert set(VERTEX_ACCELERATOR_MACHINE_FAMILIES) <= set(enum["values"])


def test_a100_mega_machines_host_sixteen_a100s() -> None:
    pool = {**_raw()["gpuPools"][0], "machineType": "a2-megagpu-16g", "acceleratorType": "nvidia-tesla-a100",
            "acceleratorCount": 16}
    assert parse_stack_config(_raw(gpuPools=[pool]), "p", "us-central1").gpu_pools[0].accelerator_count == 16


def test_defaults_and_image_reference() -> None:
    config = parse_stack_config(_raw(), "p", "us-central1")
    assert (config.scheduler_replicas, config.release_channel, config.deletion_protection) == (2, "REGULAR", True)
    assert config.pool_zones(config.gpu_pools[0]) == ("us-central1-a", "us-central1-b")
    assert config.image("gpu-scheduler", "abc") == "us-central1-docker.pkg.dev/p/gpu-runtime/gpu-scheduler:abc"


DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_a_deployed_image_is_pinned_by_its_digest() -> None:
    config = parse_stack_config(_raw(images={"schedulerTag": "abc", "workerTag": "abc", "schedulerDigest": DIGEST}),
                                "p", "us-central1")

    assert config.image("gpu-scheduler", "abc", config.images.scheduler_digest) == (
        f"us-central1-docker.pkg.dev/p/gpu-runtime/gpu-scheduler:abc@{DIGEST}")
    assert config.images.worker_digest is None


@pytest.mark.parametrize(("images", "problem"), [
    ({"schedulerTag": "latest-staging", "workerTag": "abc"},
     "gpu-runtime:images.schedulerTag: 'latest-staging' is a moving tag"),
    ({"schedulerTag": "abc", "workerTag": "abc", "workerDigest": "sha256:abc"},
     "gpu-runtime:images.workerDigest: 'sha256:abc' does not have the form ^sha256:[0-9a-f]{64}$"),
    # A tag pasted where the operator's digest belongs.
    ({"schedulerTag": "abc", "workerTag": "abc", "operatorDigest": "2026.3.0"},
     "gpu-runtime:images.operatorDigest: '2026.3.0' does not have the form ^sha256:[0-9a-f]{64}$"),
])
def test_moving_tags_and_malformed_digests_are_refused(images: dict[str, str], problem: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(problem)):
        parse_stack_config(_raw(images=images), "p", "us-central1")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (_raw(zones=["europe-west4-a"]), "zone europe-west4-a is not in region us-central1"),
        (
            _raw(network={**_raw()["network"], "podsCidr": "10.0.0.0/14"}),
            "subnetCidr 10.0.0.0/20 overlaps podsCidr 10.0.0.0/14",
        ),
        (_raw(network={**_raw()["network"], "masterCidr": "172.16.0.0/24"}), "masterCidr must be a /28"),
        (_raw(network={**_raw()["network"], "subnetCidr": "10.0.0.300/20"}), "gpu-runtime:network.subnetCidr"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "machineType": "a2-highgpu-1g"}]), "cannot host nvidia-tesla-t4"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "acceleratorType": "nvidia-tesla-k80"}]), "is not one of"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "name": "T4_Pool"}]), "gpu-runtime:gpuPools[0].name"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "name": "t4\n"}]), "gpu-runtime:gpuPools[0].name"),  # `$`: newline
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "daskWorkersMax": 5}]), "exceeds the pool's node capacity 4"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "minNodes": 3}]), "minNodes 3 exceeds maxNodes 2"),
        (_raw(gpuPools=[_raw()["gpuPools"][0]] * 2), "names must be unique"),
        (_raw(gpuPools=[]), "gpu-runtime:gpuPools: needs at least 1 entry, but the file gives 0"),
        (_raw(releaseChannel="NIGHTLY"), "releaseChannel"),
        (_raw(imags={}), "gpu-runtime:imags: is not a setting of this project"),
        # A2/A3 machine types come with a fixed number of GPUs; H100 mega machines take a different GPU type.
        (
            _raw(gpuPools=[{**_raw()["gpuPools"][0], "machineType": "a2-highgpu-2g",
                            "acceleratorType": "nvidia-tesla-a100", "acceleratorCount": 1}]),
            "a2-highgpu-2g has 2 GPU(s), not acceleratorCount 1",
        ),
        (
            _raw(gpuPools=[{**_raw()["gpuPools"][0], "machineType": "a3-megagpu-8g",
                            "acceleratorType": "nvidia-h100-80gb", "acceleratorCount": 8}]),
            "cannot host nvidia-h100-80gb",
        ),
        (
            _raw(vertex={"machineType": "a2-highgpu-1g", "acceleratorType": "NVIDIA_TESLA_A100",
                         "acceleratorCount": 2}),
            "a2-highgpu-1g has 1 GPU(s), not acceleratorCount 2",
        ),
        # Vertex AI names accelerators by its own enum, not GKE's label values.
        (_raw(vertex={"machineType": "n1-standard-8", "acceleratorType": "nvidia-tesla-t4"}),
         "gpu-runtime:vertex.acceleratorType"),
        (_raw(vertex={"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_A100"}), "cannot host NVIDIA"),
    ],
)
def test_bad_config_names_the_key(raw: dict[str, Any], expected: str) -> None:
    assert expected in _error(raw)


_NETWORK = _raw()["network"]


@pytest.mark.parametrize(
    ("raw", "key", "reason"),
    [
        # RFC 5737 and RFC 3849 ranges, as the stack files once carried them for the control plane.
        (_raw(network={**_NETWORK, "masterAuthorizedNetworks": [{"name": "ci", "cidr": "198.51.100.0/24"}]}),
         "gpu-runtime:network.masterAuthorizedNetworks[0].cidr", "documentation range 198.51.100.0/24"),
        (_raw(network={**_NETWORK, "masterAuthorizedNetworks": [{"name": "vpn", "cidr": "203.0.113.0/25"}]}),
         "gpu-runtime:network.masterAuthorizedNetworks[0].cidr", "documentation range 203.0.113.0/24"),
        (_raw(network={**_NETWORK, "subnetCidr": "2001:db8:1::/48"}), "gpu-runtime:network.subnetCidr",
         "documentation range 2001:db8::/32"),
        (_raw(gpuPools=[{**_raw()["gpuPools"][0], "reservation": {"type": "SPECIFIC_RESERVATION",
                                                                   "name": "REPLACE_ME"}}]),
         "gpu-runtime:gpuPools[0].reservation.name", "placeholder (replace)"),
        (_raw(images={"schedulerTag": "changeme", "workerTag": "abc"}), "gpu-runtime:images.schedulerTag",
         "placeholder (changeme)"),
        (_raw(vertex={"machineType": "<machine type>", "acceleratorType": "NVIDIA_TESLA_T4"}),
         "gpu-runtime:vertex.machineType", "template to fill in"),
    ],
)
def test_placeholders_and_documentation_ranges_are_refused(raw: dict[str, Any], key: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, "p", "us-central1", source="Pulumi.production.yaml")
    message = str(info.value)
    assert "Pulumi.production.yaml" in message
    assert f"{key}: " in message and reason in message


def test_a_placeholder_project_names_the_provider_key() -> None:
    message = _error(_raw(), project="example-project")
    assert "gcp:project: 'example-project' is a placeholder (example)" in message


def test_authorized_networks_must_be_internal() -> None:
    raw = _raw(network={**_NETWORK, "masterAuthorizedNetworks": [{"name": "office", "cidr": "8.8.8.0/24"}]})
    assert "gpu-runtime:network.masterAuthorizedNetworks[0].cidr: 8.8.8.0/24 is not an internal range" in _error(raw)
    internal = _raw(network={**_NETWORK, "masterAuthorizedNetworks": [{"name": "vpn", "cidr": "10.30.0.0/16"}]})
    assert parse_stack_config(internal, "p", "us-central1").network.master_authorized_networks[0].cidr == "10.30.0.0/16"


def test_a_missing_key_names_the_namespace_and_the_file() -> None:
    raw = _raw()
    del raw["network"]
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, "p", "us-central1", source="Pulumi.staging.yaml")
    assert str(info.value) == ("invalid stack config in Pulumi.staging.yaml:\n"
                               "  gpu-runtime:network: is required but not set")


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("maxNodes", "lots", "gpu-runtime:gpuPools[0].maxNodes: is 'lots', but must be a whole number"),
    ("maxNodes", -3, "gpu-runtime:gpuPools[0].maxNodes: is -3, but must be at least 1"),
    ("spot", "maybe", "gpu-runtime:gpuPools[0].spot: is 'maybe', but must be true or false"),
    ("maxRunDurationSeconds", 10**9, "gpu-runtime:gpuPools[0].maxRunDurationSeconds: is 1000000000, but must be "
                                     "at most 604800"),
])
def test_a_wrong_value_is_told_in_the_projects_words(field: str, value: object, expected: str) -> None:
    raw = _raw(gpuPools=[{**_raw()["gpuPools"][0], field: value}])
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, "p", "us-central1", source="Pulumi.staging.yaml")
    # One line for the one mistake: not pydantic's wording, and no echo of the pool list as "too short".
    assert str(info.value) == f"invalid stack config in Pulumi.staging.yaml:\n  {expected}"


def test_committed_stacks_hold_no_placeholder() -> None:
    from components import placeholders

    for stack in ("staging", "production"):
        values = yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        assert list(placeholders.find(values)) == [], stack


def test_missing_provider_settings() -> None:
    assert "gcp:project, gcp:region" in _error(_raw(), project=None, region="")


def _pulumi_config(stack: str, drop: str | None = None) -> dict[str, str]:
    config = load_stack_settings(stack).config
    return {key: value for key, value in config.items() if key != drop}


def test_load_from_pulumi_config() -> None:
    loaded = {}

    def program() -> None:
        loaded["config"] = load_stack_config()
        load_control_token()

    record(program, project="p", region="r", config=_pulumi_config("production"))
    assert loaded["config"] == stack_config("production")


def test_control_token_is_required() -> None:
    with pytest.raises(ConfigError, match="pulumi config set --secret controlToken"):
        record(load_control_token, project="p", region="r",
               config=_pulumi_config("staging", drop="gpu-runtime:controlToken"))


def test_wrong_type_in_pulumi_config_is_a_config_error() -> None:
    config = {**_pulumi_config("staging"), "gpu-runtime:schedulerReplicas": "many"}
    with pytest.raises(ConfigError, match="schedulerReplicas"):
        record(load_stack_config, project="p", region="r", config=config)


def test_the_running_stack_names_its_file() -> None:
    config = {**_pulumi_config("staging"), "gpu-runtime:releaseChannel": "NIGHTLY"}
    with pytest.raises(ConfigError, match=re.escape("invalid stack config in Pulumi.staging.yaml")):
        record(load_stack_config, project="p", region="r", config=config, stack="staging")


_VALUE_TYPES = {"string": str, "integer": int, "boolean": bool, "array": list, "object": dict}


def _of_type(value: Any, declaration: dict[str, Any]) -> bool:
    """Whether a stack value matches its declaration, items included (YAML booleans are no integers)."""
    kind = declaration["type"]
    if isinstance(value, bool) and kind != "boolean":
        return False
    if not isinstance(value, _VALUE_TYPES[kind]):
        return False
    return kind != "array" or all(_of_type(item, declaration["items"]) for item in value)


# The project-file schema's config declaration: these attributes only (``value`` is for other namespaces).
_DECLARATION_KEYS = {"type", "items", "description", "secret", "default"}
# ``type: object`` (and arrays of objects) entered the project-file schema in Pulumi CLI 3.187.0 (pulumi#20129,
# pulumi#20132); older CLIs reject the whole Pulumi.yaml.
_OBJECT_TYPE_SINCE = (3, 187, 0)


def _types_used(declaration: dict[str, Any]) -> set[str]:
    used = {declaration["type"]}
    if "items" in declaration:
        used |= _types_used(declaration["items"])
    return used


def _minimum_version(requirement: str) -> tuple[int, ...]:
    """The lower bound of a ``>=X.Y.Z`` CLI version range."""
    assert requirement.startswith(">="), requirement
    return tuple(int(part) for part in requirement.removeprefix(">=").split("."))


def test_project_file_demands_a_cli_that_knows_its_config_types() -> None:
    project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())
    used = set()
    for key, declaration in project["config"].items():
        assert set(declaration) <= _DECLARATION_KEYS, key
        used |= _types_used(declaration)
    assert used <= set(_VALUE_TYPES)
    if "object" in used:
        assert "requiredPulumiVersion" in project, "object-typed config needs a CLI floor"
        assert _minimum_version(project["requiredPulumiVersion"]) >= _OBJECT_TYPE_SINCE


def test_project_config_schema_is_complete_and_typed() -> None:
    """Pulumi.yaml declares every key the stacks set, each typed, defaults of their type (as the CLI checks)."""
    project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "uv", "virtualenv": ".venv"}}
    declared = project["config"]
    for key, declaration in declared.items():
        assert declaration["description"], key
        kind = declaration["type"]
        if kind == "array":
            assert declaration["items"]["type"] in _VALUE_TYPES, key
        if "default" in declaration:
            assert isinstance(declaration["default"], _VALUE_TYPES[kind]), key
    for stack in ("staging", "production"):
        values = yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
        ours = {key.split(":", 1)[1]: value for key, value in values.items() if key.startswith("gpu-runtime:")}
        assert set(ours) <= set(declared), f"{stack} sets undeclared keys"
        required = {k for k, d in declared.items() if "default" not in d and not d.get("secret")}
        assert required <= set(ours), f"{stack} misses {required - set(ours)}"
        for key, value in ours.items():
            assert _of_type(value, declared[key]), (stack, key)
        assert "gpu-runtime:controlToken" not in values  # never committed in plain text


@pytest.mark.parametrize(("window", "message"), [
    ({"hours": 6, "days": ["SA"]}, "less than its minimum of 48 h in 32 days"),
    ({"hours": 3, "days": ["MO", "TU", "WE", "TH", "FR"]}, "greater than or equal to 4"),
    ({"days": ["XX"]}, "are not weekdays"),
    ({"start": "25:00"}, "should match pattern"),
])
def test_a_maintenance_window_gke_would_refuse_is_refused(window: dict, message: str) -> None:
    from components.config import MaintenanceWindowConfig

    with pytest.raises(ValueError, match=message):
        MaintenanceWindowConfig.model_validate(window)


def test_a_pool_upgrade_that_cannot_proceed_is_refused() -> None:
    from components.config import UpgradeConfig

    with pytest.raises(ValueError, match="cannot both be 0"):
        UpgradeConfig.model_validate({"maxSurge": 0, "maxUnavailable": 0})


def test_a_deploy_window_overlapping_gkes_maintenance_window_is_refused() -> None:
    """GKE upgrades on its own in the maintenance window (cluster operations held, the Dask scheduler evicted):
    the deploy window must lie elsewhere in the week, wrapping past Sunday midnight included."""
    overlapping = {"start": "07:00", "hours": 4, "days": ["SA"]}  # the maintenance window is SA/SU 02:00-08:00
    with pytest.raises(ConfigError, match=r"deployWindow \(SA 07:00 UTC for 4 h\) overlaps maintenanceWindow"):
        parse_stack_config(_raw(deployWindow=overlapping), "p", "us-central1")
    wrapping = {"start": "23:00", "hours": 4, "days": ["SU"]}  # into Monday 03:00
    with pytest.raises(ConfigError, match="overlaps"):
        parse_stack_config(_raw(deployWindow=wrapping, maintenanceWindow={"start": "01:00", "hours": 4,
                                                                          "days": ["MO", "TU", "WE"]}),
                           "p", "us-central1")
    apart = parse_stack_config(_raw(deployWindow={"start": "09:00", "hours": 5, "days": ["TU"]}), "p", "us-central1")
    assert apart.deploy_window is not None and apart.deploy_window.hours == 5


def test_each_stack_deploys_in_a_window_of_its_own() -> None:
    from datetime import UTC, datetime

    production = stack_config("production")
    assert production.deploy_window is not None
    assert not production.deploy_window.minutes_of_week() & production.maintenance_window.minutes_of_week()
    assert production.deploy_window.contains(datetime(2026, 12, 1, 10, 0, tzinfo=UTC))  # a Tuesday
    assert not production.deploy_window.contains(datetime(2026, 12, 5, 3, 0, tzinfo=UTC))  # Saturday, GKE's
    staging = stack_config("staging")
    assert staging.deploy_window is not None
    assert not staging.deploy_window.minutes_of_week() & staging.maintenance_window.minutes_of_week()
