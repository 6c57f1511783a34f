"""Result store on memory:// and file:// (gs:// goes through the same fsspec calls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.protocol import JobResult, JobStatus
from runtime.store import ResultStore, StoreError


@pytest.fixture(params=["memory", "file"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ResultStore:
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


def test_unsafe_names_never_escape_the_root(store: ResultStore) -> None:
    with pytest.raises(StoreError, match="not a valid job id"):
        store.get("../etc/passwd")
    with pytest.raises(StoreError, match="not a safe file name"):
        store.put_artifacts("job-3", {"../x": b""})


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
