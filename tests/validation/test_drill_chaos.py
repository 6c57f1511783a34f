"""The chaos drill: its parts on their own, and ``gpurt drill chaos --jobs 40`` on two real replicas.

The end-to-end run uses an emulator time scale of 0.1, so a job nacked by a fault is redelivered after
1 s instead of 10 s; the replica kill still waits for the killed consumer's leases to expire.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from gpurt.bench.chaos import SECTION, write_benchmarks
from runtime.access.local_state import ProcessRecord
from runtime.access.transport import PubSubClients
from runtime.protocol.messages import InvalidRequest, JobResult, JobStatus, parse_request
from runtime.protocol.queues import QueueSpec, with_built_ins
from validation.drills import faults, forgery, hostile
from validation.drills.base import DrillContext, DrillResult
from validation.drills.chaos import BROKER_RESTART_JOBS, FAULTS, LONG_PER_SLICE, plan
from validation.drills.faults import (
    LONG_STORE_OUTAGE,
    LONG_STORE_OUTAGE_FIGURE,
    STORE_FAULT,
    STORE_FAULT_S,
    long_store_outage,
    read_only,
    replaced_by_a_file,
    store_fails,
)
from validation.drills.flood import CONNECTION_FLOOD
from validation.drills.ledger import ResultLedger

# Two desks beside the built-in queues, one capped: the faults strike replicas consuming four queues at once.
DRILL_DESKS = (QueueSpec("desk-a", weight=2), QueueSpec("desk-b", max_slots=1))
JOBS = 49  # 7 per slice: the 4 long jobs that faults catch running, and a few of each kind
SHORT_OUTAGE_S = 20.0  # the long store outage, shortened: --store-outage keeps the default at 5 minutes
EMULATOR_TIME_SCALE = 0.1
STOP_GRACE_S = 3.0


def _context(tmp_path: Path) -> DrillContext:
    from runtime.local.platform import LocalPlatform

    return DrillContext(LocalPlatform(tmp_path), timeout_s=1.0, run_id="t")


class _QueuedPlatform:
    """A platform whose saved state names its request queues (all the load's planning reads)."""

    def __init__(self, queues: tuple[QueueSpec, ...]) -> None:
        self.state = SimpleNamespace(queues=queues)


def test_the_load_goes_round_robin_through_every_queue_the_platform_runs(tmp_path: Path) -> None:
    queues = with_built_ins(DRILL_DESKS)
    load = plan(DrillContext(_QueuedPlatform(queues), timeout_s=1.0, run_id="t"), 40)  # type: ignore[arg-type]
    assert [r.queue for r in load[:4]] == ["default", "desk-a", "desk-b", "urgent"]
    assert {q: sum(r.queue == q for r in load) for q in ("default", "desk-a", "desk-b", "urgent")} == dict.fromkeys(
        ("default", "desk-a", "desk-b", "urgent"), 10)
    assert {r.queue for r in plan(_context(tmp_path), 8)} == {"default", "urgent"}  # not started: the built-in ones


def test_the_load_mixes_every_kind_with_the_outcome_the_parser_gives(tmp_path: Path) -> None:
    load = plan(_context(tmp_path), 200)
    assert len({r.job_id for r in load}) == 200
    for request in load:
        try:
            parsed = parse_request(request.data)
        except InvalidRequest:
            assert request.expect is JobStatus.REJECTED
            continue
        assert request.expect is not JobStatus.REJECTED
        assert request.attributes == parsed.attributes()
        failing = parsed.type.value == "noop" and getattr(parsed.params, "fail", None) == "permanent"
        assert (request.expect is JobStatus.FAILED) == failing
    kinds = {json.loads(r.data)["type"] for r in load}
    assert kinds == {"noop", "european_option", "random_walk"}
    assert {r.expect for r in load} == {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.REJECTED}
    slice_size = -(-200 // (len(FAULTS) + 1))  # as plan() slices: the last slice may be shorter
    for start in range(0, 200, slice_size):  # every slice opens with jobs long enough to be caught running
        assert all(json.loads(r.data)["params"]["sleep_s"] > 0 for r in load[start:start + LONG_PER_SLICE])


def _result(job_id: str, status: JobStatus, attempt: int = 1) -> JobResult:
    return JobResult(job_id=job_id, status=status, attempt=attempt)


def test_tally_counts_lost_duplicates_and_unexpected_outcomes() -> None:
    planned = {"a": JobStatus.SUCCEEDED, "b": JobStatus.SUCCEEDED, "c": JobStatus.REJECTED,
               "d": JobStatus.SUCCEEDED, "e": JobStatus.SUCCEEDED}
    ledger = ResultLedger(PubSubClients("p", publisher=None, subscriber=None), planned)
    same = _result("a", JobStatus.SUCCEEDED)
    # the stored answer to a second message of "a" names that message: still the same result
    again = same.model_copy(update={"request_message_id": "another-message"})
    arriving = [same, again, _result("b", JobStatus.SUCCEEDED), _result("b", JobStatus.SUCCEEDED, attempt=2),
                _result("c", JobStatus.REJECTED), _result("d", JobStatus.FAILED), _result("other", JobStatus.FAILED)]
    for result in arriving:
        ledger._on_result(result)  # what the subscriber thread hands over

    tally = ledger.tally(planned)

    assert tally.lost == ["e"]
    assert tally.duplicated == 2 and tally.differing == ["b"]  # a's second message is the same result again
    assert tally.unexpected == {"d": "failed"}
    assert tally.by_status == {"succeeded": 2, "rejected": 1, "failed": 1}
    assert ledger.done() == 4 and ledger.first_at("e") is None


def _store(tmp_path: Path) -> list[Path]:
    folders = [tmp_path / "store", tmp_path / "store" / "results"]
    folders[1].mkdir(parents=True)
    (folders[1] / "done.json").write_bytes(b"{}")
    return folders


def test_read_only_refuses_new_files_and_restores_the_folders(tmp_path: Path) -> None:
    folders = _store(tmp_path)
    modes = [f.stat().st_mode for f in folders]
    with read_only(folders) as how:
        if how is None:
            pytest.skip("root without CAP_LINUX_IMMUTABLE: writes cannot be refused here (replaced_by_a_file is)")
        for folder in folders:
            with pytest.raises(OSError):
                (folder / "new.json").write_bytes(b"{}")
        assert (folders[1] / "done.json").read_bytes() == b"{}"  # read-only, not gone
    assert [f.stat().st_mode for f in folders] == modes
    (folders[1] / "new.json").write_bytes(b"{}")


def test_a_store_replaced_by_a_file_fails_every_write_and_comes_back_whole(tmp_path: Path) -> None:
    root, results = _store(tmp_path)
    with replaced_by_a_file(root) as how:
        assert "unavailable" in how
        with pytest.raises(OSError):
            (results / "new.json").write_bytes(b"{}")
        with pytest.raises(OSError):
            results.mkdir(parents=True, exist_ok=True)
    assert (results / "done.json").read_bytes() == b"{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


class _State:
    """What the store faults read of the platform's state: the store, no replicas, an emulator's command."""

    control_token = "t"

    def __init__(self, store: Path, time_scale: float) -> None:
        self.result_store = store.as_uri()
        self._emulator = ProcessRecord(name="emulator", pid=1, create_time=0.0, log_path=store / "log",
                                       command=["python", "-m", "runtime.local.broker", "--time-scale",
                                                str(time_scale)])

    def schedulers(self) -> list[ProcessRecord]:
        return []

    def process(self, name: str) -> ProcessRecord | None:
        return self._emulator if name == "emulator" else None


class _Platform:
    def __init__(self, state: _State) -> None:
        self.state = state

    def running_state(self) -> _State:
        return self.state


def test_store_faults_last_their_real_time_whatever_the_emulators_time_scale(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "results").mkdir(parents=True)
    ctx = DrillContext(_Platform(_State(store, time_scale=0.01)), timeout_s=1.0,  # type: ignore[arg-type]
                       store_outage_s=1.5)

    short = store_fails(ctx)
    long = long_store_outage(ctx)

    assert short.whole_at - short.struck_at >= STORE_FAULT_S and f"for {STORE_FAULT_S:.0f}s" in short.detail
    assert long.name == LONG_STORE_OUTAGE and long.whole_at - long.struck_at >= 1.5
    assert "0 replica(s) stopped intake for it (not ready), 0 held" in long.detail
    assert ctx.figures[LONG_STORE_OUTAGE_FIGURE] == 1.5 and long.problems == []
    (store / "results" / "after.json").write_bytes(b"{}")  # whole again


@pytest.mark.parametrize(("stopped", "problem"), [({"scheduler-1"}, False), (set(), True)])
def test_the_long_outage_fails_a_replica_that_held_jobs_and_kept_intake_open(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stopped: set[str], problem: bool) -> None:
    # scheduler-1 runs a job when the store fails; scheduler-2 runs none, so it cannot notice and is not judged
    (tmp_path / "results").mkdir()
    monkeypatch.setattr(faults, "in_flight_by_replica", lambda ctx: {"scheduler-1": ["job-1"]})
    monkeypatch.setattr(faults, "_stopped_for_the_store", lambda ctx: stopped)
    monkeypatch.setattr(faults, "_readiness_told_anyone", lambda ctx: set())
    ctx = DrillContext(_Platform(_State(tmp_path, time_scale=1.0)), timeout_s=1.0,  # type: ignore[arg-type]
                       store_outage_s=0.2)

    long = long_store_outage(ctx)

    assert long.caught == ["job-1"] and long.holding == {"scheduler-1"}
    assert f"{len(stopped)} replica(s) stopped intake for it (not ready), 1 held jobs" in long.detail
    assert long.problems == ([f"{LONG_STORE_OUTAGE}: ['scheduler-1'] held jobs when the store failed and never "
                              "stopped intake"] if problem else [])


def test_figures_go_to_their_own_benchmarks_section(tmp_path: Path) -> None:
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n<!-- bench:runtime -->\nkept\n<!-- /bench:runtime -->\n")
    result = DrillResult(name="chaos", passed=True, duration_s=12.0,
                         figures={"jobs": 40, "scheduler replicas": 2, "lost": 0, "recovery_s x": None})
    write_benchmarks(result, path)
    text = path.read_text()
    assert "kept" in text and f"<!-- bench:{SECTION} -->" in text
    assert "Device: " in text and "--jobs 40` on `gpurt local up --replicas 2`" in text
    assert "| lost | 0 |" in text and "| recovery_s x | - |" in text and "Drill passed" in text


# --- end to end -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from runtime.local.platform import LocalConfig, LocalPlatform

    local = LocalPlatform(tmp_path_factory.mktemp("chaos"), LocalConfig(
        port=0, emulator_port=0, workers=1, replicas=2, emulator_time_scale=EMULATOR_TIME_SCALE,
        queues=with_built_ins(DRILL_DESKS)))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(480)  # seven faults, one a 20 s store outage, one a 10 s connection flood, on a loaded machine
def test_chaos_drill_loses_nothing_across_every_fault(replicas, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from gpurt.cli.app import app

    rejected = sum(r.expect is JobStatus.REJECTED for r in plan(_context(tmp_path), JOBS))
    result = CliRunner().invoke(app, ["drill", "chaos", "--jobs", str(JOBS), "--timeout", "120", "--json",
                                      "--store-outage", str(SHORT_OUTAGE_S),
                                      "--local-dir", str(replicas.directory)], env={"COLUMNS": "200"})

    assert result.exit_code == 0, result.output
    (chaos,) = json.loads(result.stdout[result.stdout.index("["):])
    figures, evidence = chaos["figures"], " | ".join(chaos["evidence"])
    assert chaos["passed"], chaos["failure"]
    assert figures["jobs"] == JOBS and figures["scheduler replicas"] == 2
    assert figures["request queues"] == "default, desk-a, desk-b, urgent"  # the load went through all four
    assert sum(v for k, v in figures.items() if k.startswith("results ")) == JOBS
    assert figures["lost"] == 0 and figures["duplicated (differing)"] == 0 and figures["dead-lettered"] == 0
    assert figures["results rejected"] == rejected and figures["unexpected outcome"] == 0
    for fault in ("Dask worker killed", "scheduler replica killed", "intake drained and resumed", CONNECTION_FLOOD,
                  STORE_FAULT, LONG_STORE_OUTAGE):
        assert f"{fault}: " in evidence and "skipped" not in evidence
        assert isinstance(figures[f"recovery_s {fault}"], float)
    assert figures[LONG_STORE_OUTAGE_FIGURE] == SHORT_OUTAGE_S
    assert figures["connection flood: probes unanswered"] == 0
    # every replica running jobs when the store went stopped intake (the drill fails otherwise); one that ran
    # none may rightly not notice the outage, so how many held jobs depends on where the broker sent them
    stopped, holding = map(int, re.search(r"(\d+) replica\(s\) stopped intake for it \(not ready\), (\d+) held",
                                          evidence).groups())
    assert stopped >= holding >= 1
    assert figures["broker restart: waiting requests lost"] == f"0 of {BROKER_RESTART_JOBS}"  # the durable broker
    assert "a new job finished" in evidence
    assert figures["hostile input: answered within (s)"] < hostile.ANSWER_WAIT_S
    assert "replicas stayed healthy" in evidence
    # the forged result, the bogus body's rejection and the victim's own all reached the topic: the client chose
    assert figures["local forgery: calls refused"] == "5 of 5"
    assert figures["forged result: results on the topic for the victim"] >= 3
    assert figures["forged dead letter: refused by the reclaimer after (s)"] < forgery.ANSWER_WAIT_S
    assert "1 forged message(s) taken out of the DLQ" in evidence
    # every replica's Dask scheduler refused a stranger's client (the drill found at least one per replica)
    assert "loopback: " in evidence and "Dask port(s) refused a client without the cluster's credentials" in evidence
    assert "request was answered rejected (conflict)" in evidence  # the relabel row
    assert all(p.alive for p in replicas.status().processes)  # the killed replica is back, the emulator too


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_relabel_row_gets_the_victim_a_conflict_not_the_other_strikes_price(replicas) -> None:  # type: ignore[no-untyped-def]
    ctx = DrillContext(replicas, timeout_s=120.0)
    assert forgery.relabelled_result(ctx) == []
    assert "request was answered rejected (conflict)" in ctx.evidence[-1]


@pytest.mark.integration
@pytest.mark.slow
def test_the_store_outage_rows_see_whether_readyz_tells_a_stranger_why(replicas) -> None:  # type: ignore[no-untyped-def]
    from validation.drills.faults import _readiness_told_anyone

    # issue 43: /readyz named the store's path and a job id to anyone during an outage; the store-outage rows ask
    # it without the token throughout. A ready replica says no more than a failing one: {"ready": true}.
    assert _readiness_told_anyone(DrillContext(replicas, timeout_s=10.0)) == set()
