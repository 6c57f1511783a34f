"""Local pool worker specs: pinned one GPU each (round robin) where GPUs exist, untouched otherwise."""

from __future__ import annotations

from runtime.protocol import contract
from runtime.scheduler.pools.local import worker_spec

TEMPLATE = {"cls": object, "options": {"nthreads": 1, "env": {"OMP_NUM_THREADS": "1"}}}


def test_without_gpus_the_template_is_copied_as_is() -> None:
    spec = worker_spec(TEMPLATE, 3, gpus=0)
    assert spec == TEMPLATE and spec is not TEMPLATE


def test_with_gpus_each_worker_gets_one_in_turn() -> None:
    specs = [worker_spec(TEMPLATE, i, gpus=2) for i in range(3)]
    assert [s["options"]["env"]["CUDA_VISIBLE_DEVICES"] for s in specs] == ["0", "1", "0"]
    assert all(s["options"]["resources"] == {contract.DASK_GPU_RESOURCE: 1} for s in specs)
    assert specs[0]["options"]["env"]["OMP_NUM_THREADS"] == "1"
    assert "resources" not in TEMPLATE["options"]  # the template is never modified
