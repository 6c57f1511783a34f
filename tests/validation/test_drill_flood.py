"""The chaos drill's connection flood, on its own against a real local platform (one replica, one worker).

Jobs run through the flood: each must get the result it should (the ledger's count, as in the whole drill),
every probe of the flooded replica must be answered, and its API must refuse the checks the drill makes
while the flood holds it full, then answer again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from runtime.local.platform import LocalConfig, LocalPlatform
from runtime.protocol import contract
from runtime.protocol.messages import JobStatus
from validation.drills import flood
from validation.drills.base import DrillContext
from validation.drills.ledger import ResultLedger

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STOP_GRACE_S = 3.0
FLOOD_S = 4.0  # the drill's 10 s, shortened: a dozen probe rounds still
JOBS = 6
JOB_SLEEP_S = 2.0  # long enough that the flood finds them running
RESULT_WAIT_S = 60.0


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("flood"), LocalConfig(port=0, emulator_port=0, workers=1))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def test_a_flooded_replica_answers_every_probe_and_loses_no_job(
    platform: LocalPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flood, "FLOOD_S", FLOOD_S)
    ctx = DrillContext(platform, timeout_s=RESULT_WAIT_S, run_id="t")
    jobs = [ctx.job_id("flood", index) for index in range(JOBS)]
    clients = platform.pubsub()
    try:
        with ResultLedger(clients, jobs) as ledger:
            topic = clients.topic(contract.REQUEST_TOPIC)
            for job_id in jobs:
                body = {"job_id": job_id, "type": "noop", "params": {"sleep_s": JOB_SLEEP_S}}
                clients.publisher.publish(topic, json.dumps(body).encode(), job_id=job_id, type="noop").result(30)

            fault = flood.connection_flood(ctx)

            assert ledger.wait_for(JOBS, RESULT_WAIT_S)
            tally = ledger.tally(dict.fromkeys(jobs, JobStatus.SUCCEEDED))
    finally:
        clients.close()
    assert fault.skipped is None and fault.problems == [], fault.detail
    assert fault.whole_at - fault.struck_at >= FLOOD_S
    assert ctx.figures["connection flood: probes unanswered"] == 0
    refused, asked = map(int, str(ctx.figures["connection flood: API health checks refused"]).split(" of "))
    assert asked > 0 and refused == asked  # the API stayed full (its cap holds) for the whole flood
    assert tally.lost == [] and tally.unexpected == {} and tally.differing == []
