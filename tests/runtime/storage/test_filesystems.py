"""url_to_fs: gs:// on a GCS API emulator skips gcsfs's Storage Control lookup; everything else is fsspec's."""

from __future__ import annotations

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from runtime.storage.filesystems import GCS_EMULATOR_ENV, url_to_fs


def test_gs_on_an_emulator_gets_the_json_api_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    from gcsfs.core import GCSFileSystem

    monkeypatch.setenv(GCS_EMULATOR_ENV, "http://127.0.0.1:4443")
    fs, path = url_to_fs("gs://bucket/results/job-1.json")
    assert type(fs) is GCSFileSystem  # not gcsfs's ExtendedGcsFileSystem subclass
    assert path == "bucket/results/job-1.json"


def test_other_urls_are_fsspecs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GCS_EMULATOR_ENV, "http://127.0.0.1:4443")
    fs, path = url_to_fs("memory://store/results")
    assert isinstance(fs, MemoryFileSystem) and path == "/store/results"
