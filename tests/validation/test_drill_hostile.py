"""The chaos drill's hostile-input row: its slow body. The row itself runs in the chaos drill's end-to-end test
(tests/validation/test_drill_chaos.py), which asserts what it found."""

from __future__ import annotations

import pytest

from runtime.protocol.messages import InvalidRequest, parse_request
from validation.drills import hostile


def test_the_slow_body_is_the_parsers_old_worst_case_and_is_not_a_request() -> None:
    body = hostile.slow_body()
    assert len(body) == hostile.SLOW_BODY_BYTES and body.startswith(b'"\\"\\"') and not body.endswith(b'"')
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body)
    assert caught.value.job_id is None  # so its result is named by its message id
