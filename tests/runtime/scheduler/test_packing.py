"""Which jobs run packed: each type's size rule (kernels.sizes), read through its descriptor, packs what it packed."""

from __future__ import annotations

from typing import Any

import pytest

from kernels.sizes import PACK_MAX_PATHS
from runtime.protocol.messages import JobRequest
from runtime.scheduler.packing import is_tiny


@pytest.mark.parametrize(("job_type", "params", "tiny"), [
    ("noop", {}, True),
    ("noop", {"sleep_s": 0.1}, True),
    ("noop", {"sleep_s": 0.11}, False),
    ("european_option", {"paths": PACK_MAX_PATHS}, True),
    ("european_option", {"paths": PACK_MAX_PATHS + 1}, False),
    ("european_option", {"paths": 1_000, "greeks": ["delta"]}, False),
    ("asian_option", {"paths": 64, "steps": 4}, False),
    ("random_walk", {"paths": 64, "steps": 4}, False),
    ("heston_option", {"paths": 64, "steps": 4}, False),
])
def test_packing_packs_what_it_packed_before(job_type: str, params: dict[str, Any], tiny: bool) -> None:
    assert is_tiny(JobRequest.model_validate({"job_id": "j", "type": job_type, "params": params})) is tiny
