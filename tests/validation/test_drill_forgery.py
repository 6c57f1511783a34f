"""The chaos drill's forgery rows, on their own against a real local platform (one replica, one worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from runtime.local.platform import LocalConfig, LocalPlatform
from runtime.protocol import contract
from validation.drills import forgery
from validation.drills.base import DrillContext

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STOP_GRACE_S = 3.0


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalPlatform]:
    local = LocalPlatform(tmp_path_factory.mktemp("forgery"), LocalConfig(port=0, emulator_port=0, workers=1))
    local.up()
    yield local
    local.down(drain_timeout_s=0, grace_s=STOP_GRACE_S)


def test_a_forged_result_and_a_forged_dead_letter_leave_each_victim_its_own_answer(platform: LocalPlatform) -> None:
    ctx = DrillContext(platform, timeout_s=60.0, run_id="t")
    forgery.run(ctx)  # raises DrillFailed with every problem it found
    # the forged result, the bogus body's rejection and the victim's own all reached the topic: the client chose
    assert ctx.figures["forged result: results on the topic for the victim"] >= 3
    assert ctx.figures["forged dead letter: refused by the reclaimer after (s)"] < forgery.ANSWER_WAIT_S
    assert any("1 forged message(s) taken out of the DLQ" in line for line in ctx.evidence)
    left = ctx.pubsub().pull(contract.REQUEST_DLQ_SUBSCRIPTION, 10, timeout_s=2.0)
    assert not left  # nothing of the drill's stays in the DLQ
