"""Result store on memory://, file:// and gs:// (a GCS JSON API emulator through gcsfs)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.protocol.messages import JobResult, JobStatus
from runtime.scheduler.store import ResultStore, StoreError, StoreUnavailable
from runtime.scheduler.store.store import CANCEL_MARKER_TTL_S
from runtime.storage.filesystems import GCS_EMULATOR_ENV
from tests.runtime.scheduler.store.failing_fs import FailingFileSystem
from tests.runtime.storage.gcs_server import fake_gcs_server

_buckets = itertools.count(1)


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[str]:
    """One GCS emulator for the session; each test uses its own bucket."""
    with fake_gcs_server() as url:
        yield url


@pytest.fixture
def gcs_bucket(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the emulator, with gcsfs pointed at it; returns the bucket's name."""
    from gcsfs.core import GCSFileSystem

    monkeypatch.setenv(GCS_EMULATOR_ENV, gcs_emulator)
    bucket = f"gpurt-results-{next(_buckets)}"
    GCSFileSystem().mkdir(bucket)
    return bucket


@pytest.fixture(params=["memory", "file", pytest.param("gs", marks=pytest.mark.integration)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ResultStore:
    if request.param == "gs":
        return ResultStore(f"gs://{request.getfixturevalue('gcs_bucket')}/store")
    url = f"memory://store-{tmp_path.name}" if request.param == "memory" else tmp_path.as_uri()
    return ResultStore(url)


def test_results_round_trip_and_replace(store: ResultStore) -> None:
    assert store.get("job-1") is None and not store.exists("job-1")
    store.put(JobResult(job_id="job-1", status=JobStatus.FAILED, attempt=5))
    store.put(JobResult(job_id="job-1", status=JobStatus.SUCCEEDED, attempt=1, result={"estimate": 1.5}))
    stored = store.get("job-1")
    assert stored is not None and stored.status is JobStatus.SUCCEEDED and stored.result == {"estimate": 1.5}
    assert store.exists("job-1")


def test_artifacts_and_publication_marker(store: ResultStore) -> None:
    urls = store.put_artifacts("job-2", {"pnl.npy": b"\x00\x01", "plot.png": b"png"})
    assert urls["pnl.npy"] == f"{store.url}/artifacts/job-2/pnl.npy"
    assert store.get_artifact("job-2", "plot.png") == b"png"
    assert not store.is_published("job-2")
    store.mark_published("job-2")
    assert store.is_published("job-2")
    assert not store.cancel_requested("job-2")
    store.request_cancel("job-2")
    assert store.cancel_requested("job-2")


@pytest.mark.parametrize("kind", ["memory", "file"])
def test_a_cancel_marker_expires_and_the_sweep_removes_it(kind: str, tmp_path: Path) -> None:
    # issue 43: `DELETE /jobs/<id>` of a job that never comes left its marker for ever. A cancel may precede its
    # job's request (queued in the subscription), so the marker stands as long as a message may wait there.
    now = [1_000_000.0]
    url = f"memory://cancel-{tmp_path.name}" if kind == "memory" else tmp_path.as_uri()
    store = ResultStore(url, clock=lambda: now[0])
    store.request_cancel("never-comes")
    now[0] += CANCEL_MARKER_TTL_S / 2
    store.request_cancel("queued")
    assert store.cancel_requested("never-comes") and store.cancel_requested("queued")
    assert store.sweep_cancel_markers() == 0
    now[0] += CANCEL_MARKER_TTL_S / 2  # the first marker is as old as the subscription's retention now
    assert not store.cancel_requested("never-comes") and store.cancel_requested("queued")
    assert store.sweep_cancel_markers() == 1
    assert store._fs.ls(f"{store._root}/cancel", detail=False) == [f"{store._root}/cancel/queued"]
    store._fs.pipe_file(f"{store._root}/cancel/legacy", b"")  # a marker from before markers held their time
    assert not store.cancel_requested("legacy") and store.sweep_cancel_markers() == 1
    assert ResultStore(f"memory://cancel-none-{tmp_path.name}").sweep_cancel_markers() == 0  # no folder yet


def test_a_session_lists_the_jobs_started_for_it(store: ResultStore) -> None:
    assert store.session_jobs("quant-desk") == []
    store.add_to_session("quant-desk", "job-b")
    store.add_to_session("quant-desk", "job-a")
    store.add_to_session("other", "job-c")
    store.add_to_session("quant-desk", "job-a")  # a redelivered start: listed once
    assert store.session_jobs("quant-desk") == ["job-a", "job-b"]  # not a cached listing of the first call
    assert store.session_jobs("other") == ["job-c"]


@pytest.mark.parametrize("session", ["../../results", "a/b", ".", "..", "~x", "s-\u00e9\U0001f600", "x" * 128,
                                     "\U0001f600" * 128, "a%2Fb"])
def test_any_session_id_stays_one_folder_of_its_own(store: ResultStore, session: str) -> None:
    store.add_to_session(session, "job-s")
    assert store.session_jobs(session) == ["job-s"]
    # Nothing leaked outside sessions/, and no other session (a prefix, its escaped twin) sees the job.
    assert store.get("job-s") is None and store.session_jobs("a") == [] and store.session_jobs("") == []
    assert store.session_jobs(session + "x") == []


def test_unsafe_names_never_escape_the_root(store: ResultStore) -> None:
    with pytest.raises(StoreError, match="not a valid job id"):
        store.get("../etc/passwd")
    with pytest.raises(StoreError, match="not a safe file name"):
        store.put_artifacts("job-3", {"../x": b""})


@pytest.mark.parametrize("job_id", ["abc\n", "abc\r\n", "\nabc"])
def test_a_job_id_with_a_newline_is_refused_by_every_store_call(store: ResultStore, job_id: str) -> None:
    # `re.match` with a `$` pattern let "abc\n" through: `DELETE /jobs/abc%0A` then wrote cancel/abc\n.
    for call in (store.get, store.request_cancel, store.mark_published, store.cancel_requested):
        with pytest.raises(StoreError, match="not a valid job id"):
            call(job_id)
    with pytest.raises(StoreError, match="not a safe file name"):
        store.put_artifacts("job-3", {"plot.png\n": b""})


def test_file_store_leaves_no_temporary_files(tmp_path: Path) -> None:
    ResultStore(tmp_path.as_uri()).put(JobResult(job_id="job-4", status=JobStatus.CANCELLED))
    assert [p.name for p in (tmp_path / "results").iterdir()] == ["job-4.json"]


def test_a_folder_removed_behind_the_store_is_made_again(tmp_path: Path) -> None:
    import shutil

    store = ResultStore(tmp_path.as_uri())
    store.put(JobResult(job_id="job-5", status=JobStatus.SUCCEEDED))
    shutil.rmtree(tmp_path / "results")
    store.put(JobResult(job_id="job-6", status=JobStatus.SUCCEEDED))
    assert store.exists("job-6")


@pytest.mark.integration
def test_gs_store_writes_plain_objects_another_client_reads(gcs_bucket: str) -> None:
    from gcsfs.core import GCSFileSystem

    store = ResultStore(f"gs://{gcs_bucket}/runs/2026")
    store.put(JobResult(job_id="job-7", status=JobStatus.SUCCEEDED, result={"estimate": 10.45}))
    store.put_artifacts("job-7", {"pnl.npy": b"\x00" * 3})

    reader = GCSFileSystem()
    assert sorted(reader.find(gcs_bucket)) == [f"{gcs_bucket}/runs/2026/artifacts/job-7/pnl.npy",
                                               f"{gcs_bucket}/runs/2026/results/job-7.json"]
    stored = JobResult.model_validate_json(reader.cat(f"{gcs_bucket}/runs/2026/results/job-7.json"))
    assert stored.result == {"estimate": 10.45}
    assert ResultStore(f"gs://{gcs_bucket}/runs/2026").get("job-7") == stored  # a second store, e.g. a replica


# --- outages ---------------------------------------------------------------------------------------


def _failing_store(tmp_path: Path) -> tuple[ResultStore, FailingFileSystem]:
    fs = FailingFileSystem()
    return ResultStore(tmp_path.as_uri(), fs=fs), fs


@pytest.mark.parametrize("mode", ["read-only", "unreachable", "full"])
def test_a_failing_store_raises_store_unavailable_and_a_bad_name_does_not(tmp_path: Path, mode: str) -> None:
    store, fs = _failing_store(tmp_path)
    fs.mode = mode  # type: ignore[assignment]
    with pytest.raises(StoreUnavailable, match="job-8"):
        store.put(JobResult(job_id="job-8", status=JobStatus.SUCCEEDED))
    with pytest.raises(StoreUnavailable):
        store.probe()
    with pytest.raises(StoreError) as bad_name:
        store.put(JobResult.model_construct(job_id="../x", status=JobStatus.SUCCEEDED))
    assert not isinstance(bad_name.value, StoreUnavailable)  # no outage: waiting would not help


def test_a_view_waiting_out_outages_retries_after_the_handler_returns(tmp_path: Path) -> None:
    store, fs = _failing_store(tmp_path)
    fs.mode = "read-only"
    seen: list[str] = []

    def handler(error: StoreUnavailable) -> None:  # what StoreHealth.wait_out does once a probe succeeds
        seen.append(str(error))
        if len(seen) == 2:
            fs.mode = None

    patient = store.waiting_out_outages(handler)
    patient.put(JobResult(job_id="job-9", status=JobStatus.SUCCEEDED))
    assert len(seen) == 2 and "job-9" in seen[0]
    assert store.get("job-9") is not None
    fs.mode = "read-only"
    with pytest.raises(StoreUnavailable):  # the store itself still fails at once: the API answers 503
        store.mark_published("job-9")


def test_the_probe_leaves_nothing_behind(tmp_path: Path) -> None:
    store, _ = _failing_store(tmp_path)
    store.probe()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == [
        "artifacts", "published", "results"]


# --- temporary files -------------------------------------------------------------------------------


def test_a_write_that_fails_mid_way_leaves_no_temporary_file(tmp_path: Path) -> None:
    store, fs = _failing_store(tmp_path)
    store.put(JobResult(job_id="job-10", status=JobStatus.SUCCEEDED))  # the folders exist, as in a running store
    fs.mode = "full"  # the file is created, then writing its bytes fails
    for _ in range(3):
        with pytest.raises(StoreUnavailable, match="No space left"):
            store.put(JobResult(job_id="job-11", status=JobStatus.SUCCEEDED))
        with pytest.raises(StoreUnavailable):
            store.put_artifacts("job-11", {"pnl.npy": b"\x00"})
    assert fs.failures == 6
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["job-10.json"]
    assert list((tmp_path / "artifacts" / "job-11").iterdir()) == []


def test_the_sweep_removes_only_stale_temporary_files(tmp_path: Path) -> None:
    import os
    import time

    from runtime.scheduler.store.store import STALE_TEMPORARY_S

    store = ResultStore(tmp_path.as_uri())
    store.put(JobResult(job_id="job-12", status=JobStatus.SUCCEEDED))
    store.put_artifacts("job-12", {"pnl.npy": b"\x00"})
    store.mark_published("job-12")
    old = time.time() - STALE_TEMPORARY_S - 60
    stale = [tmp_path / "results" / "job-13.json.0a1b.tmp", tmp_path / "artifacts" / "job-12" / "plot.png.2c3d.tmp",
             tmp_path / "published" / ".probe-4e5f.tmp"]
    fresh = tmp_path / "results" / "job-14.json.6a7b.tmp"  # a write in progress, on another replica maybe
    for path in [*stale, fresh]:
        path.write_bytes(b"")
    for path in stale:
        os.utime(path, (old, old))
    old_result = tmp_path / "results" / "job-12.json"
    os.utime(old_result, (old, old))  # old, but a result: never swept

    assert store.sweep_temporary() == len(stale)
    assert not any(path.exists() for path in stale)
    assert fresh.exists() and old_result.exists() and store.is_published("job-12")
    assert store.get_artifact("job-12", "pnl.npy") == b"\x00"
    assert ResultStore(f"memory://sweep-{tmp_path.name}").sweep_temporary() == 0  # no temporaries there


def test_the_folders_it_remembers_stay_bounded_over_many_jobs(store: ResultStore,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Each job's artifacts have a folder of their own: remembering every one grew with every job run.
    from runtime.scheduler.store import store as store_module

    monkeypatch.setattr(store_module, "MAX_KNOWN_FOLDERS", 4)
    jobs = 20
    for i in range(jobs):
        store.put_artifacts(f"many-{i}", {"a.bin": bytes([i]), "b.bin": b"b"})
    assert len(store._made_dirs) <= 4
    assert [store.get_artifact(f"many-{i}", "a.bin") for i in range(jobs)] == [bytes([i]) for i in range(jobs)]


_SWEEP_PEAK = """
import sys, tracemalloc
from pathlib import Path
from runtime.scheduler.store.store import ResultStore
root, results = Path(sys.argv[1]), int(sys.argv[2])
for folder in ("results", "published"):
    (root / folder).mkdir(parents=True)
    for i in range(results):
        (root / folder / f"job-{i}.json").write_bytes(b"")
store = ResultStore(root.as_uri())
tracemalloc.start()
tracemalloc.reset_peak()
base = tracemalloc.get_traced_memory()[0]
assert store.sweep_temporary() == 0
print(tracemalloc.get_traced_memory()[1] - base)
"""


def _sweep_peak_bytes(root: Path, results: int) -> int:
    """The most memory one sweep allocates over a local store holding ``results`` results, measured in a
    process of its own: threads other tests left running in this one would allocate into the peak."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _SWEEP_PEAK, str(root), str(results)], capture_output=True,
                         text=True, timeout=120, check=True, cwd=Path(__file__).resolve().parents[4])
    return int(out.stdout.strip())


def test_the_sweep_takes_no_more_memory_with_more_results_stored(tmp_path: Path) -> None:
    # It listed every stored result at once (a dict of details each): every sweep's memory grew with the
    # results, which left the scheduler's resident memory a step higher after each sweep.
    few = _sweep_peak_bytes(tmp_path / "few", 200)
    many = _sweep_peak_bytes(tmp_path / "many", 4000)
    assert many < few + 64 * 1024, (few, many)


def test_the_result_cache_index_names_a_job_per_key_on_every_backend(store: ResultStore) -> None:
    key, other = "a" * 64, "b" * 64
    assert store.cached_job(key) is None
    store.put_cache_entry(key, "job-1")
    store.put_cache_entry(key, "job-2")  # a later run of the same computation takes the entry
    assert store.cached_job(key) == "job-2" and store.cached_job(other) is None
    for bad in ("../results/job-1", "A" * 64, "a" * 63, ""):
        with pytest.raises(StoreError, match="not a SHA-256"):
            store.cached_job(bad)
    with pytest.raises(StoreError, match="not a valid job id"):
        store.put_cache_entry(key, "../x")
