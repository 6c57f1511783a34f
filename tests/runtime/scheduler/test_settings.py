"""Settings from the environment: defaults, parsing, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.scheduler.settings import LeaderMode, PoolsBackend, Settings, SettingsError


def test_defaults_are_the_local_platform() -> None:
    settings = Settings.from_env({})
    assert (settings.project, settings.port, settings.host) == ("gpurt-local", 8080, "127.0.0.1")
    assert settings.pools is PoolsBackend.LOCAL and settings.leader is LeaderMode.ALWAYS
    assert settings.local_workers is None  # one per GPU, else DEFAULT_LOCAL_WORKERS
    assert settings.control_token is None
    assert settings.warm_workers is True  # local workers compile the kernels before their first job
    assert settings.result_store_url() == (Path.cwd() / ".gpurt/results").as_uri()


def test_values_are_parsed_and_empty_means_unset() -> None:
    settings = Settings.from_env({"GPURT_VERTEX_TYPES": "portfolio_var, asian_option", "GPURT_MAX_IN_FLIGHT": "4",
                                  "GPURT_POOLS": "kubernetes", "GPURT_DASK_SCHEDULER": "", "GPURT_PORT": "9000",
                                  "GPURT_RESULT_STORE": "gs://bucket/results", "GPURT_LOG_LEVEL": "debug"})
    assert settings.vertex_types == {"portfolio_var", "asian_option"}
    assert settings.max_in_flight == 4 and settings.port == 9000 and settings.log_level == "DEBUG"
    assert settings.result_store_url() == "gs://bucket/results"


def test_bad_values_name_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"GPURT_VERTEX_TYPES: .*unknown job types"):
        Settings.from_env({"GPURT_VERTEX_TYPES": "quantum"})
    with pytest.raises(SettingsError, match="GPURT_POOLS"):
        Settings.from_env({"GPURT_POOLS": "cloud"})
    with pytest.raises(SettingsError, match="GPURT_WARM_WORKERS"):
        Settings.from_env({"GPURT_WARM_WORKERS": "sometimes"})
    assert Settings.from_env({"GPURT_WARM_WORKERS": "false"}).warm_workers is False


def test_the_probes_listener_is_off_unless_asked_and_never_on_the_apis_port() -> None:
    assert Settings.from_env({}).probe_port is None  # probes on the API's port only, as before
    assert Settings.from_env({"GPURT_PROBE_PORT": "8081"}).probe_port == 8081
    assert Settings.from_env({"GPURT_PORT": "0", "GPURT_PROBE_PORT": "0"}).probe_port == 0  # each any free port
    with pytest.raises(SettingsError, match="GPURT_PROBE_PORT must differ from GPURT_PORT"):
        Settings.from_env({"GPURT_PORT": "9000", "GPURT_PROBE_PORT": "9000"})


def test_the_token_is_not_shown_in_repr() -> None:
    assert "s3cret" not in repr(Settings.from_env({"GPURT_CONTROL_TOKEN": "s3cret"}))


def test_the_token_is_read_from_its_file_which_wins_over_the_variable(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-the-secret\n")
    settings = Settings.from_env({"GPURT_CONTROL_TOKEN_FILE": str(token_file), "GPURT_CONTROL_TOKEN": "from-env"})
    assert settings.control_token == "from-the-secret"
    assert Settings.from_env({"GPURT_CONTROL_TOKEN": "from-env"}).control_token == "from-env"  # the local platform


@pytest.mark.parametrize("content, reason", [(None, "cannot read"), ("  \n", "is empty")])
def test_an_unusable_token_file_is_an_error_naming_the_variable_and_the_file(
        tmp_path: Path, content: str | None, reason: str) -> None:
    token_file = tmp_path / "token"
    if content is not None:
        token_file.write_text(content)
    with pytest.raises(SettingsError, match=f"GPURT_CONTROL_TOKEN_FILE: .*{token_file}.*{reason}|"
                                            f"GPURT_CONTROL_TOKEN_FILE: {reason}"):
        Settings.from_env({"GPURT_CONTROL_TOKEN_FILE": str(token_file)})


def test_local_workers_and_gpus_default_to_detection() -> None:
    settings = Settings.from_env({"GPURT_LOCAL_GPUS": "2"})
    assert settings.local_workers is None and settings.local_gpus == 2


def test_an_external_cluster_needs_its_address() -> None:
    with pytest.raises(SettingsError, match="GPURT_POOLS=external needs GPURT_DASK_SCHEDULER"):
        Settings.from_env({"GPURT_POOLS": "external"})
    settings = Settings.from_env({"GPURT_POOLS": "external", "GPURT_DASK_SCHEDULER": "tcp://10.0.0.5:8786"})
    assert settings.pools is PoolsBackend.EXTERNAL and settings.dask_scheduler == "tcp://10.0.0.5:8786"
