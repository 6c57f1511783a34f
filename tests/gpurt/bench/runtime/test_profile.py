"""Splitting py-spy's samples of the scheduler into the stages of a job slot's time."""

from __future__ import annotations

from gpurt.bench.runtime.profile import WAITING, slot_stages

_PROCESS = "process 1:\"python -m scheduler\";Thread.run (threading.py:975)"
_SLOT = f"{_PROCESS};SlotScheduler._work (runtime/scheduler/dispatch.py:180)"
_JOB = f"{_SLOT};Consumer._on_message (runtime/scheduler/consumer.py:190);Processor.process (processor.py:60)"
# py-spy's raw format: a stack of frames joined by ';', a space, and how many samples saw it.
RAW = "\n".join([
    f"{_SLOT};Condition.wait (threading.py:327) 30",
    f"{_JOB};DaskBackend.run (runtime/scheduler/backends/dask.py:60);Future.result (distributed/client.py:330) 40",
    f"{_JOB};ResultPublisher.publish_result (runtime/pubsub/publisher.py:80) 10",
    f"{_JOB};ResultStore.put (runtime/scheduler/store/store.py:55);"
    "ResultStore._write (runtime/scheduler/store/store.py:140) 6",
    f"{_JOB};ResultStore.put_artifacts (runtime/scheduler/store/store.py:98) 2",
    f"{_JOB};ResultStore.get (runtime/scheduler/store/store.py:60) 2",
    f"{_JOB};parse_request (runtime/protocol/messages.py:10) 10",
    f"{_PROCESS};LoopRunner.run (distributed/utils.py:1) 500",
])


def test_slot_samples_become_stages_in_ms_per_job_largest_first() -> None:
    stages = slot_stages(RAW, slot_seconds_per_job=0.010)  # other threads' samples are left out
    by_name = {s.stage: s for s in stages}
    assert [s.stage for s in stages][:2] == ["Dask: submit, run, fetch the result", WAITING]
    assert abs(by_name[WAITING].share - 0.30) < 1e-12 and abs(by_name[WAITING].per_job_s - 0.003) < 1e-12
    assert abs(by_name["store: write result and marker"].share - 0.08) < 1e-12  # put and put_artifacts
    assert abs(by_name["store: read result and cancel marker"].share - 0.02) < 1e-12
    assert abs(by_name["parse, log, the rest of the processor"].share - 0.10) < 1e-12
    assert abs(sum(s.share for s in stages) - 1.0) < 1e-12


def test_no_slot_samples_give_no_stages() -> None:
    assert slot_stages("", 0.01) == []
    assert slot_stages("process 1;LoopRunner.run (distributed/utils.py:1) 5", 0.01) == []


def test_a_packs_dask_task_counts_as_dask() -> None:
    raw = (f"{_JOB};Processor.receive_pack (processor.py:90);"
           "DaskBackend.run_pack (runtime/scheduler/backends/dask.py:95) 7")
    (stage,) = slot_stages(raw, slot_seconds_per_job=0.010)
    assert stage.stage == "Dask: submit, run, fetch the result" and stage.share == 1.0
