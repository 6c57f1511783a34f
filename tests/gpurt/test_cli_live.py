"""The operator CLI through Typer's runner, against a running local platform."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from gpurt.cli.app import app
from runtime.local import LocalPlatform
from runtime.protocol.contract import REQUEST_DLQ_TOPIC
from tests.gpurt import ON_THE_CLI_PLATFORM
from tests.runtime.local.prometheus.polling import poll

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(180), ON_THE_CLI_PLATFORM]
runner = CliRunner()


def gpurt(env: dict[str, str], *args: str) -> Result:
    return runner.invoke(app, list(args), env=env)


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def eventually(check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy, or fail at the deadline."""
    return poll(check, timeout_s, "the CLI to report the expected state")


def job_state(env: dict[str, str], job_id: str) -> str | None:
    result = gpurt(env, "jobs", "get", job_id, "--json")
    return json.loads(result.stdout)["state"] if result.exit_code == 0 else None


def test_local_status_reports_a_healthy_platform(cli_env: dict[str, str]) -> None:
    status = as_json(gpurt(cli_env, "local", "status", "--json"))
    assert status["running"] and status["healthy"] and status["ready"]
    text = gpurt(cli_env, "local", "status").stdout
    assert "in flight: 0" in text and "waiting for a slot: 0" in text  # an idle scheduler, as people read it


def test_submit_wait_then_get(cli_env: dict[str, str]) -> None:
    result = as_json(gpurt(cli_env, "submit", "--type", "noop", "--job-id", "cli-ok", "--wait", "--json"))
    assert (result["job_id"], result["status"], result["attempt"]) == ("cli-ok", "succeeded", 1)
    job = as_json(gpurt(cli_env, "jobs", "get", "cli-ok", "--json"))
    assert job["state"] == "succeeded" and job["result"]["job_id"] == "cli-ok"


def test_submit_from_a_file_with_param_override(cli_env: dict[str, str], tmp_path: Path) -> None:
    job = tmp_path / "job.json"
    job.write_text(json.dumps({"job_id": "cli-file", "type": "european_option",
                               "params": {"paths": 1_000_000, "strike": 105}}))
    result = as_json(gpurt(cli_env, "submit", str(job), "-p", "paths=2000", "--wait", "--json"))
    assert result["status"] == "succeeded" and result["result"]["paths"] == 2000


def test_a_repeat_says_it_came_from_the_result_cache_and_no_cache_runs_it(cli_env: dict[str, str]) -> None:
    job = ("submit", "--type", "european_option", "-p", "paths=2000", "-p", "seed=4514", "--wait")
    first = as_json(gpurt(cli_env, *job, "--json"))
    again = gpurt(cli_env, *job)
    assert again.exit_code == 0 and f"from {first['job_id']}" in again.output and "result cache" in again.output
    fresh = as_json(gpurt(cli_env, *job, "--no-cache", "--json"))
    assert fresh["status"] == "succeeded" and not fresh["cached"] and fresh["metrics"]["run_s"] is not None


def test_a_failed_job_exits_non_zero(cli_env: dict[str, str]) -> None:
    result = gpurt(cli_env, "submit", "--type", "noop", "-p", "fail=permanent", "--wait")
    assert result.exit_code == 1
    assert "permanent" in result.output


def test_pools_list_and_scale(cli_env: dict[str, str]) -> None:
    pools = as_json(gpurt(cli_env, "pools", "list", "--json"))
    assert [p["id"] for p in pools] == ["local"]
    scaled = as_json(gpurt(cli_env, "pools", "scale", "local", "2", "--json"))
    assert scaled["desired"] == 2
    eventually(lambda: as_json(gpurt(cli_env, "pools", "list", "--json"))[0]["workers"] == 2)
    assert as_json(gpurt(cli_env, "pools", "scale", "local", "1", "--json"))["desired"] == 1


def test_drain_holds_intake_and_normal_resumes_it(cli_env: dict[str, str]) -> None:
    assert gpurt(cli_env, "maintenance", "drain", "--wait", "--timeout", "30").exit_code == 0
    try:
        status = as_json(gpurt(cli_env, "maintenance", "status", "--json"))
        assert status["mode"] == "drain" and status["result_store_available"] is True
        held = gpurt(cli_env, "submit", "--type", "noop", "--job-id", "cli-held", "--wait", "--timeout", "3")
        assert held.exit_code == 3 and "no result" in held.output  # intake is stopped
        assert job_state(cli_env, "cli-held") is None
    finally:
        assert gpurt(cli_env, "maintenance", "normal").exit_code == 0
    assert eventually(lambda: job_state(cli_env, "cli-held") == "succeeded")  # the held job was not lost


def test_control_without_a_token_is_refused(platform: LocalPlatform, tmp_path: Path) -> None:
    env = {"GPURT_LOCAL_DIR": str(tmp_path), "GPURT_API_URL": platform.running_state().api_url,
           "GPURT_CONTROL_TOKEN": ""}
    result = gpurt(env, "pools", "stop-all", "--yes")
    assert result.exit_code == 1
    assert "401" in result.output and "Traceback" not in result.output


def test_dead_letter_then_replay(cli_env: dict[str, str], platform: LocalPlatform) -> None:
    failed = gpurt(cli_env, "submit", "--type", "noop", "-p", "fail=transient", "--job-id", "cli-dlq", "--wait",
                   "--timeout", "90", "--json")
    assert failed.exit_code == 1
    outcome = json.loads(failed.stdout)
    assert (outcome["status"], outcome["attempt"]) == ("failed", 5)  # failed is published at the last attempt

    letters = eventually(lambda: [x for x in as_json(gpurt(cli_env, "dlq", "list", "--json"))
                                  if x["job_id"] == "cli-dlq"])
    assert as_json(gpurt(cli_env, "dlq", "inspect", "cli-dlq"))["message_id"] == letters[0]["message_id"]
    assert len(as_json(gpurt(cli_env, "dlq", "list", "--json"))) == 1  # looking consumed nothing

    # A dead letter whose cause has since been fixed (here: a request that now succeeds).
    clients = platform.pubsub()
    try:
        body = json.dumps({"job_id": "cli-fixed", "type": "noop"}).encode()
        clients.publisher.publish(clients.topic(REQUEST_DLQ_TOPIC), body, job_id="cli-fixed", type="noop").result(10)
    finally:
        clients.close()
    eventually(lambda: len(as_json(gpurt(cli_env, "dlq", "list", "--json"))) == 2)

    replay = as_json(gpurt(cli_env, "dlq", "replay", "--all", "--yes", "--json"))

    assert len(replay["replayed"]) == 2 and replay["failed"] == {}
    assert eventually(lambda: job_state(cli_env, "cli-fixed") == "succeeded")
    # The still-broken request fails again and returns to the DLQ: nothing is lost.
    eventually(lambda: [x for x in as_json(gpurt(cli_env, "dlq", "list", "--json")) if x["job_id"] == "cli-dlq"],
               timeout_s=90)


def test_replay_needs_a_choice(cli_env: dict[str, str]) -> None:
    result = gpurt(cli_env, "dlq", "replay", "--yes")
    assert result.exit_code == 2 and "--sample N or --all" in result.output


def test_soak_writes_one_csv_row_per_result(platform: LocalPlatform, tmp_path: Path) -> None:
    import csv

    from gpurt.bench.runtime.soak import CSV_COLUMNS, soak

    summary = soak(platform, seconds=1.5, rate_per_s=4, csv_path=tmp_path / "soak.csv")

    rows = list(csv.DictReader((tmp_path / "soak.csv").open()))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert summary.published >= 5 and summary.completed == summary.published == len(rows)
    assert all(r["status"] == "succeeded" and float(r["latency_s"]) > 0 for r in rows)
    assert [float(r["t_s"]) for r in rows] == sorted(float(r["t_s"]) for r in rows)


def test_a_soak_mixes_in_rejected_requests_when_asked(platform: LocalPlatform, tmp_path: Path) -> None:
    import csv

    from gpurt.bench.runtime.soak import soak

    summary = soak(platform, seconds=1.5, rate_per_s=4, csv_path=tmp_path / "soak.csv", rejected_every=2)

    statuses = [r["status"] for r in csv.DictReader((tmp_path / "soak.csv").open())]
    assert summary.completed == summary.published == len(statuses) >= 5
    # the 1st, 3rd, 5th... message is rejected, the others succeed (rows come in the order results arrive)
    assert statuses.count("rejected") == (len(statuses) + 1) // 2
    assert statuses.count("succeeded") == len(statuses) // 2


# issue 43: each rejected request kept its error, its parsed body included, for ever. Over 1,000 of `rejected_body`
# (32 KB each) after a warm-up, the scheduler's RSS grew 148 -> 256 MB before the fix (about 108 KB a request) and
# 137.9 -> 138.4 MB after it (loaded 2-core machine, 2026-11-28). 300 of them would have grown it by some 32 MB,
# twice the bound; the fuzz suite counts the bytes 1,000 rejections keep (test_protocol_fuzz.py).
REJECTED_REQUESTS = 300
REJECTED_WARM_UP = 100
REJECTED_GROWTH_MB = 16.0
REJECTED_WAIT_S = 150.0


@pytest.mark.timeout(600)  # 400 rejections of 32 KB each on a loaded machine
def test_rejected_requests_leave_the_schedulers_memory_flat(platform: LocalPlatform) -> None:
    from gpurt.bench.runtime.soak import rejected_body, scheduler_rss_mb
    from runtime.access.transport import ResultCollector
    from runtime.protocol.contract import REQUEST_TOPIC
    from runtime.protocol.messages import JobStatus

    clients = platform.pubsub()
    try:
        with ResultCollector(clients) as collector:
            topic = clients.topic(REQUEST_TOPIC)

            def reject(prefix: str, count: int) -> None:
                ids = [f"{prefix}-{i}" for i in range(count)]
                for future in [clients.publisher.publish(topic, rejected_body(job_id), job_id=job_id, type="noop")
                               for job_id in ids]:
                    future.result(timeout=60)
                results = collector.wait(ids, REJECTED_WAIT_S)
                assert len(results) == count and {r.status for r in results.values()} == {JobStatus.REJECTED}

            reject("leak-warm", REJECTED_WARM_UP)
            before = scheduler_rss_mb(platform)
            reject("leak", REJECTED_REQUESTS)
            after = scheduler_rss_mb(platform)
    finally:
        clients.close()
    assert before is not None and after is not None
    assert after - before < REJECTED_GROWTH_MB, f"{REJECTED_REQUESTS:,} rejections: {before:.0f} -> {after:.0f} MB"


def test_cancel_a_running_job(cli_env: dict[str, str]) -> None:
    assert gpurt(cli_env, "submit", "--type", "noop", "-p", "sleep_s=60", "--job-id", "cli-cancel").exit_code == 0
    eventually(lambda: job_state(cli_env, "cli-cancel") == "running")

    assert as_json(gpurt(cli_env, "jobs", "cancel", "cli-cancel", "--json"))["cancel_requested"] is True

    assert eventually(lambda: job_state(cli_env, "cli-cancel") == "cancelled", timeout_s=30)
    again = gpurt(cli_env, "jobs", "cancel", "cli-cancel")
    assert again.exit_code == 1 and "already finished" in again.output


def test_stop_a_pool_then_bring_it_back(cli_env: dict[str, str]) -> None:
    stopped = as_json(gpurt(cli_env, "pools", "stop", "local", "--yes", "--json"))
    assert stopped["desired"] == 0
    eventually(lambda: as_json(gpurt(cli_env, "pools", "list", "--json"))[0]["workers"] == 0)
    assert gpurt(cli_env, "pools", "stop", "nope", "--yes").exit_code == 1

    assert as_json(gpurt(cli_env, "pools", "scale", "local", "1", "--json"))["desired"] == 1
    eventually(lambda: as_json(gpurt(cli_env, "pools", "list", "--json"))[0]["workers"] == 1)
    assert as_json(gpurt(cli_env, "submit", "--type", "noop", "--wait", "--json"))["status"] == "succeeded"


def test_utilization_bench_times_a_burst_and_a_stream_of_sleeping_jobs(platform: LocalPlatform) -> None:
    from gpurt.bench.runtime.utilization import run_burst, run_first_job, run_stream

    with platform.api() as api:
        workers = sum(pool.workers for pool in api.pools())
    burst = run_burst(platform, workers, sleep_s=0.05, jobs=8)
    assert burst.completed == 8
    # The workers cannot run the jobs faster than all of them in parallel: utilization is a share.
    assert burst.makespan_s >= 8 * 0.05 / workers and 0 < burst.utilization <= 1
    assert burst.scheduler_cpu_per_job_s > 0
    assert burst.dask_scheduler_cpu_per_job_s is not None and burst.dask_scheduler_cpu_per_job_s > 0  # found apart
    # The process's CPU split by thread: some thread was busy, and the parts add up to no more than the whole
    # (read just around the burst, in clock ticks of 10 ms: 8 jobs leave a quiet thread at 0).
    assert burst.threads and all(per_job > 0 for _, per_job in burst.threads)
    assert sum(per_job for _, per_job in burst.threads) <= 2 * burst.scheduler_cpu_per_job_s + 0.01
    stream = run_stream(platform, workers, sleep_s=0.05, jobs=8)
    assert stream.completed == 8 and stream.rate_per_s == pytest.approx(0.8 * workers / 0.05)
    assert stream.queue_wait_p95_s is not None and stream.queue_wait_p95_s >= stream.queue_wait_p50_s >= 0
    asked_at = time.perf_counter()
    first = run_first_job(platform, workers, asked_at)
    assert first.cold_to_first_result_s > first.first_run_s > 0 and first.warm_run_s > 0


def test_submit_to_a_queue_publishes_through_the_clients_queue_and_says_why_it_was_refused(
        cli_env: dict[str, str]) -> None:
    # The local broker lets the user token publish to the default queue only (runtime/local/broker_credentials.py):
    # the desk's topic refuses it, and the Python API's error for that reaches the command line, in one line.
    result = gpurt(cli_env, "submit", "--type", "noop", "--queue", "rates-desk")
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "Traceback" not in said
    assert "queue rates-desk (topic gpu-job-request-rates-desk)" in said and "not allowed" in said


def test_submit_without_wait_prints_the_message_id_the_client_got(cli_env: dict[str, str]) -> None:
    published = as_json(gpurt(cli_env, "submit", "--type", "noop", "--job-id", "cli-nowait", "--json"))
    assert published["job_id"] == "cli-nowait" and published["message_id"]
    assert eventually(lambda: job_state(cli_env, "cli-nowait") == "succeeded")
