"""The scheduler's opt-in tracemalloc snapshots, and the growth report read from them."""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.scheduler import __main__ as scheduler_main
from runtime.scheduler.memory_trace import (
    MemoryTraceError,
    MemoryTracer,
    growth_report,
    main,
    snapshots,
    top_growth,
)
from runtime.scheduler.settings import Settings, SettingsError

KEPT_BLOCK_BYTES = 4096
KEPT_BLOCKS = 500


@pytest.fixture
def tracer(tmp_path: Path) -> Iterator[MemoryTracer]:
    if tracemalloc.is_tracing():
        pytest.skip("something else traces allocations in this process")
    # A period longer than any test: snapshots are written when a test asks for them.
    tracer = MemoryTracer(tmp_path / "snapshots", period_s=3600.0, keep=2)
    yield tracer
    tracer.stop()


def _keep_blocks(store: list[bytearray]) -> None:
    for _ in range(KEPT_BLOCKS):
        store.append(bytearray(KEPT_BLOCK_BYTES))  # the growing allocation site


def test_snapshots_are_numbered_and_only_the_first_and_newest_stay(tracer: MemoryTracer) -> None:
    tracer.start()
    assert tracemalloc.is_tracing()
    for _ in range(4):
        tracer.write_snapshot()
    tracer.stop()

    assert not tracemalloc.is_tracing()  # it started tracing, so it stops it
    names = [p.name for p in snapshots(tracer.directory)]
    pid = os.getpid()
    # 0 is the baseline, 1-4 periodic, 5 the one at stop; keep=2 leaves the baseline and 4, 5.
    assert names == [f"tracemalloc-{pid}-{n:06d}.tracemalloc" for n in (0, 4, 5)]
    assert not list(tracer.directory.glob("*.partial"))


def test_the_growth_report_names_the_site_that_kept_memory(tracer: MemoryTracer) -> None:
    kept: list[bytearray] = []
    tracer.start()
    early = tracer.write_snapshot()
    _keep_blocks(kept)
    late = tracer.write_snapshot()

    growth = top_growth(early, late, limit=5)
    top = growth[0]
    assert top.frames[0].endswith(f"{Path(__file__).name}:{_keep_blocks.__code__.co_firstlineno + 2}")
    assert any(frame.endswith(f"{Path(__file__).name}:{_caller_line()}") for frame in top.frames)
    # Each bytearray is its buffer plus a small object header: at least what was kept, at most a little more.
    assert KEPT_BLOCKS * KEPT_BLOCK_BYTES <= top.size_diff <= KEPT_BLOCKS * (KEPT_BLOCK_BYTES + 128)
    assert top.count_diff >= KEPT_BLOCKS

    report = growth_report(tracer.directory, limit=5)
    assert f"{Path(__file__).name}:{_keep_blocks.__code__.co_firstlineno + 2}" in report


def _caller_line() -> int:
    # The line of test_the_growth_report_names_the_site_that_kept_memory that calls _keep_blocks.
    source = Path(__file__).read_text().splitlines()
    start = test_the_growth_report_names_the_site_that_kept_memory.__code__.co_firstlineno
    return next(n for n in range(start, len(source) + 1) if "_keep_blocks(kept)" in source[n - 1])


def test_the_report_explains_missing_or_broken_snapshots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(MemoryTraceError, match="no such folder"):
        growth_report(tmp_path / "absent")
    (tmp_path / f"tracemalloc-{os.getpid()}-000000.tracemalloc").write_bytes(b"")
    with pytest.raises(MemoryTraceError, match="1 snapshot"):
        growth_report(tmp_path)
    broken = tmp_path / f"tracemalloc-{os.getpid()}-000001.tracemalloc"
    broken.write_bytes(b"not a pickle")
    with pytest.raises(MemoryTraceError, match="not a readable tracemalloc snapshot"):
        growth_report(tmp_path)

    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path) in err and "Traceback" not in err


def test_the_settings_name_a_bad_snapshot_period() -> None:
    with pytest.raises(SettingsError, match="GPURT_TRACEMALLOC_PERIOD_S"):
        Settings.from_env({"GPURT_TRACEMALLOC_DIR": "/tmp/x", "GPURT_TRACEMALLOC_PERIOD_S": "0"})
    settings = Settings.from_env({"GPURT_TRACEMALLOC_DIR": "/tmp/x"})
    assert settings.tracemalloc_dir == Path("/tmp/x") and settings.tracemalloc_period_s == 60.0
    assert Settings.from_env({}).tracemalloc_dir is None


def test_the_scheduler_refuses_a_snapshot_folder_it_cannot_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GPURT_TRACEMALLOC_DIR", str(blocker / "snapshots"))

    assert scheduler_main.main() == 2
    err = capsys.readouterr().err
    assert "GPURT_TRACEMALLOC_DIR" in err and str(blocker / "snapshots") in err
    assert not tracemalloc.is_tracing()


class _Service:
    """Stands in for the service: ``main`` wires the tracer around it whether it starts or not."""

    fail_start = False

    def __init__(self, settings: Settings) -> None:
        self.stopped = False

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError("no Kubernetes API")

    def stop(self, timeout_s: float = 0.0) -> None:
        self.stopped = True


@pytest.mark.parametrize("fail_start", [False, True])
def test_the_scheduler_writes_a_baseline_before_its_service_and_a_snapshot_as_it_exits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_start: bool) -> None:
    from runtime.scheduler import api, http_server, logs, service

    if tracemalloc.is_tracing():
        pytest.skip("something else traces allocations in this process")
    seen: list[list[str]] = []

    class Service(_Service):
        def __init__(self, settings: Settings) -> None:
            super().__init__(settings)
            seen.append([p.name for p in snapshots(tmp_path)])  # what was written before the service existed

    Service.fail_start = fail_start
    monkeypatch.setattr(service, "Service", Service)
    monkeypatch.setattr(api, "create_app", lambda *args, **kwargs: None)
    # Serves nothing, returns at once, as a server that started and was stopped.
    monkeypatch.setattr(http_server.QuietServer, "run", lambda self, sockets=None: setattr(self, "started", True))
    monkeypatch.setattr(logs, "configure", lambda level, max_bytes=None: None)  # leaves the test run's logging alone
    monkeypatch.setenv("GPURT_TRACEMALLOC_DIR", str(tmp_path))

    assert scheduler_main.main() == (1 if fail_start else 0)
    pid = os.getpid()
    assert seen == [[f"tracemalloc-{pid}-000000.tracemalloc"]]
    assert [p.name for p in snapshots(tmp_path)] == [f"tracemalloc-{pid}-{n:06d}.tracemalloc" for n in (0, 1)]
    assert not tracemalloc.is_tracing()


def test_a_snapshot_that_cannot_be_written_leaves_no_partial_file_and_exit_stays_clean(
        tracer: MemoryTracer, monkeypatch: pytest.MonkeyPatch) -> None:
    tracer.start()

    def disk_full(self: tracemalloc.Snapshot, filename: str) -> None:
        Path(filename).write_bytes(b"half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tracemalloc.Snapshot, "dump", disk_full)
    with pytest.raises(OSError):
        tracer.write_snapshot()
    tracer.stop()  # logs instead of raising: the scheduler's exit stays clean

    assert not tracemalloc.is_tracing()
    assert not list(tracer.directory.glob("*.partial"))
    assert [p.name for p in snapshots(tracer.directory)] == [f"tracemalloc-{os.getpid()}-000000.tracemalloc"]
