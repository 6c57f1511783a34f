"""CLI behaviour that needs no running platform: input errors and 'nothing to talk to'."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpurt.cli.app import app

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """No local platform, no cloud settings."""
    return {"GPURT_LOCAL_DIR": str(tmp_path), "GPURT_API_URL": "", "GPURT_CONTROL_TOKEN": "",
            "PUBSUB_EMULATOR_HOST": "", "GPURT_PROJECT": ""}


@pytest.mark.parametrize(("args", "message"), [
    (("submit", "--type", "nope"), "invalid job"),
    (("submit", "--type", "noop", "-p", "sleep_s=-1"), "sleep_s"),
    (("submit", "--type", "noop", "-p", "novalue"), "key=value"),
    (("submit", "missing.json"), "cannot read"),
    (("submit",), "JOB.json file or --type"),
    (("dlq", "replay", "--yes"), "--sample N or --all"),
    (("bench", "runtime", "--soak", "5"), "--soak needs --csv"),
    (("bench", "runtime", "--tracemalloc"), "--tracemalloc goes with --soak"),
    (("bench", "runtime", "--rejected-every", "10"), "--rejected-every goes with --soak"),
])
def test_bad_input_is_one_clear_line(env: dict[str, str], args: tuple[str, ...], message: str) -> None:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_submit_file_that_is_not_a_job(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text("[1, 2]")
    result = runner.invoke(app, ["submit", str(tmp_path / "job.json")], env=env)
    assert result.exit_code == 2 and "JSON object" in result.output


@pytest.mark.parametrize("args", [("submit", "--type", "noop"), ("dlq", "list")])
def test_pubsub_commands_without_a_platform_say_what_to_do(env: dict[str, str], args: tuple[str, ...]) -> None:
    result = runner.invoke(app, list(args), env=env)
    assert result.exit_code == 1
    assert "gpurt local up" in result.output


def test_api_commands_without_a_platform_fail_clearly(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["pools", "list", "--api-url", "http://127.0.0.1:9"], env=env)
    assert result.exit_code == 1 and "cannot reach the scheduler" in result.output


def test_local_status_and_down_when_nothing_runs(env: dict[str, str]) -> None:
    status = runner.invoke(app, ["local", "status"], env=env)
    assert status.exit_code == 1 and "not running" in status.output
    down = runner.invoke(app, ["local", "down"], env=env)
    assert down.exit_code == 0 and "was not running" in down.output


@pytest.mark.parametrize("body", [
    "[1, 2]",  # not an object
    '{"job_id": "j", "type": "noop", "params": {"sleep_s": NaN}}',  # JSON the scheduler's strict parser refuses
    '{"job_id": "j", "type": "noop", "type": "noop"}',  # a key given twice
    '{"job_id": "j", "type": "nope"}',  # no such job type
    "{",  # not JSON
])
def test_gpurt_run_and_gpurt_submit_refuse_the_same_bad_file_with_the_same_error(env: dict[str, str], tmp_path: Path,
                                                                                body: str) -> None:
    job = tmp_path / "job.json"
    job.write_text(body)
    ran, submitted = (runner.invoke(app, [command, str(job)], env=env) for command in ("run", "submit"))
    assert ran.exit_code == submitted.exit_code == 2
    # Rich wraps at the terminal's width, inside the path too when it is long (an xdist worker's temporary folder).
    assert ran.output == submitted.output and f"invalidjobin{job}:" in "".join(ran.output.split())


def test_a_param_given_to_a_file_whose_params_are_not_an_object_is_a_clear_error(env: dict[str, str],
                                                                                   tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text('{"type": "noop", "params": [1]}')
    result = runner.invoke(app, ["submit", str(job), "-p", "sleep_s=1"], env=env)
    assert result.exit_code == 2 and "params" in result.output and "Traceback" not in result.output


def test_a_queue_name_no_queue_can_have_is_refused_before_looking_for_a_platform(env: dict[str, str]) -> None:
    result = runner.invoke(app, ["submit", "--type", "noop", "--queue", "Rates_Desk"], env=env)
    # The Python API's own check (QueueSpec), as a notebook's Client(queue=...) gets it: one line, exit 2.
    assert result.exit_code == 2 and "'Rates_Desk' must be a lowercase DNS label" in " ".join(result.output.split())
    assert "gpurt local up" not in result.output
