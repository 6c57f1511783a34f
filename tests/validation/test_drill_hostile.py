"""The chaos drill's hostile-input row, on its own against a real local platform (one replica, one worker)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.local.platform import LocalConfig, LocalPlatform
from runtime.protocol.messages import InvalidRequest, parse_request
from validation.drills import hostile
from validation.drills.base import DrillContext

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STOP_GRACE_S = 3.0


def test_the_slow_body_is_the_parsers_old_worst_case_and_is_not_a_request() -> None:
    body = hostile.slow_body()
    assert len(body) == hostile.SLOW_BODY_BYTES and body.startswith(b'"\\"\\"') and not body.endswith(b'"')
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body)
    assert caught.value.job_id is None  # so its result is named by its message id


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("hostile"), LocalConfig(port=0, emulator_port=0, workers=1))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def test_hostile_messages_are_answered_for_their_own_ids_and_the_victim_still_runs(
        platform: LocalPlatform, tmp_path: Path) -> None:
    ctx = DrillContext(platform, timeout_s=60.0, run_id="t")
    hostile.run(ctx)  # raises DrillFailed with every problem it found
    assert ctx.figures["hostile input: answered within (s)"] < hostile.ANSWER_WAIT_S
    assert any("replicas stayed healthy" in line for line in ctx.evidence)
