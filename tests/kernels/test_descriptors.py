"""One descriptor per job type: every table that once repeated a type is read from it, and a new type is one more."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest

from kernels import descriptors
from kernels.descriptors import DESCRIPTORS, JobDescriptor, WarmJob, by_type, descriptor_of
from kernels.params import PARAMS_BY_TYPE, EuropeanOptionParams, JobParams, JobType, job_models
from kernels.registry import KERNELS, is_sharded
from kernels.sizes import SizeRule
from kernels.warm import WARM_JOBS, warm_jobs
from runtime.protocol.messages import JobRequest, JobResult, JobStatus

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_every_job_type_has_one_descriptor_naming_its_params_model() -> None:
    assert list(DESCRIPTORS) == list(JobType)
    assert all(descriptor_of(job_type).params is PARAMS_BY_TYPE[job_type] for job_type in JobType)
    assert all(descriptor.type is job_type for job_type, descriptor in DESCRIPTORS.items())
    assert JobParams.__args__ == tuple(PARAMS_BY_TYPE.values())  # type: ignore[union-attr]  # the wire's union


def test_a_type_without_a_descriptor_or_with_two_is_refused_by_name() -> None:
    every = list(DESCRIPTORS.values())
    with pytest.raises(TypeError, match=r"job type\(s\) option_book have no descriptor"):
        by_type(every[:-1], PARAMS_BY_TYPE)
    with pytest.raises(TypeError, match="job type noop has two descriptors"):
        by_type([*every, every[0]], PARAMS_BY_TYPE)
    wrong = JobDescriptor(EuropeanOptionParams, None, descriptors.NOOP.describe, example={})
    with pytest.raises(TypeError, match="european_option names EuropeanOptionParams"):
        by_type([wrong], {JobType.EUROPEAN_OPTION: PARAMS_BY_TYPE[JobType.NOOP]})


@pytest.mark.parametrize("job_type", list(JobType), ids=str)
def test_each_types_example_file_is_its_descriptors_example(job_type: JobType) -> None:
    body = json.loads((EXAMPLES / f"{job_type.value}.json").read_text())
    assert body["type"] == job_type.value
    assert (body.get("params") or {}) == descriptor_of(job_type).example
    JobRequest.model_validate(body)


def test_every_example_file_is_a_request_of_a_described_type() -> None:
    for path in sorted(EXAMPLES.glob("*.json")):
        assert JobRequest.model_validate_json(path.read_text()).type in DESCRIPTORS, path.name


def test_the_warm_up_jobs_are_the_descriptors_each_named_once() -> None:
    names = [name for name, _, _ in WARM_JOBS]
    assert len(names) == len(set(names))
    assert {job_type for _, job_type, _ in WARM_JOBS} == set(KERNELS)  # every kernel is compiled, noop has none
    assert all(isinstance(job_type, JobType) for _, job_type, _ in WARM_JOBS)


# A throwaway job type, declared as a new type is: its params model names it, and one descriptor says the rest.
class BarrierOptionParams(EuropeanOptionParams):
    """A knock-out call: a European option worth nothing once the spot has crossed ``barrier``."""

    job_type: ClassVar[str] = "barrier_option"  # type: ignore[assignment]
    barrier: float = 150.0


def _barrier_title(p: BarrierOptionParams, paths: str, varying: frozenset[str]) -> str:
    return f"Knock-out {p.kind.value} K={p.strike:g}, barrier {p.barrier:g}, {paths}"


BARRIER = JobDescriptor(
    BarrierOptionParams, "kernels.barrier", _barrier_title, example={"barrier": 140.0},
    warm=(WarmJob("barrier_option", {"paths": 64}),),
    size=SizeRule(tiny=lambda p: p.paths <= 1_000, sharded=True))


def test_a_new_job_type_is_one_descriptor_that_every_table_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Adding a type edits no table: the warm-up set, the kernel registry, the packing and sharding rules and the
    plots' titles read the descriptor (docs/architecture.md, "Adding a job type")."""
    from gpurt.client import Result
    from gpurt.client.plots import _describe
    from runtime.scheduler.packing import is_tiny

    assert job_models()["barrier_option"] is BarrierOptionParams  # the model names its type
    assert by_type([*DESCRIPTORS.values(), BARRIER], job_models())["barrier_option"] is BARRIER
    monkeypatch.setitem(DESCRIPTORS, "barrier_option", BARRIER)

    assert ("barrier_option", "barrier_option", {"paths": 64}) in warm_jobs()
    assert is_sharded("barrier_option")  # type: ignore[arg-type]
    small, large = BarrierOptionParams(paths=1_000), BarrierOptionParams(paths=2_000)
    assert is_tiny(JobRequest.model_construct(job_id="b", type="barrier_option", params=small))
    assert not is_tiny(JobRequest.model_construct(job_id="b", type="barrier_option", params=large))
    assert descriptor_of("barrier_option").size.shard_count(large, 500) == 4
    result = Result(JobResult.model_construct(job_id="b", status=JobStatus.SUCCEEDED, type="barrier_option",
                                              result={"params": large.model_dump(mode="json")}))
    assert result.job == large
    assert _describe(result) == "Knock-out call K=100, barrier 150, 2,000 paths"


def test_only_the_types_with_a_size_rule_pack_or_shard() -> None:
    tiny = {job_type for job_type, d in DESCRIPTORS.items() if d.size.tiny is not SizeRule().tiny}
    assert tiny == {JobType.NOOP, JobType.EUROPEAN_OPTION}
    assert {job_type for job_type in JobType if is_sharded(job_type)} == {
        JobType.EUROPEAN_OPTION, JobType.ASIAN_OPTION, JobType.PORTFOLIO_VAR}
