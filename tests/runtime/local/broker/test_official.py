"""Finding and starting Google's official emulator: a broken installation is an error, not a skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runtime.local.broker.official import (
    OfficialEmulator,
    OfficialEmulatorError,
    find_official_emulator,
    start_official_emulator,
)


def _fake_sdk(root: Path, *, with_jar: bool) -> Path:
    """An SDK layout with an executable ``bin/gcloud`` and, if asked, the emulator's jar."""
    (root / "bin").mkdir(parents=True)
    gcloud = root / "bin" / "gcloud"
    gcloud.write_text("#!/bin/sh\nexit 0\n")
    gcloud.chmod(0o755)
    if with_jar:
        lib = root / "platform" / "pubsub-emulator" / "lib"
        lib.mkdir(parents=True)
        (lib / "cloud-pubsub-emulator-0.8.20-all.jar").write_bytes(b"")
    return root / "bin"


def test_no_gcloud_means_no_official_emulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert find_official_emulator() is None


def test_gcloud_without_the_emulator_component_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(_fake_sdk(tmp_path / "sdk", with_jar=False)))
    with pytest.raises(OfficialEmulatorError, match="google-cloud-cli-pubsub-emulator"):
        find_official_emulator()


def test_the_jar_is_found_beside_gcloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = _fake_sdk(tmp_path / "sdk", with_jar=True)
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text("")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin")
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    found = find_official_emulator()
    assert found == OfficialEmulator(java=str(java_home / "bin" / "java"),
                                     jar=tmp_path / "sdk" / "platform" / "pubsub-emulator" / "lib"
                                     / "cloud-pubsub-emulator-0.8.20-all.jar")
    assert found.command("127.0.0.1", 8085)[-2:] == ["--host=127.0.0.1", "--port=8085"]


@pytest.mark.timeout(30)
def test_an_emulator_that_exits_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    broken = OfficialEmulator(java="/bin/sh", jar=tmp_path / "missing.jar")  # sh cannot run "-Xms64m ..."
    with pytest.raises(OfficialEmulatorError, match="exited with"):
        start_official_emulator(broken, timeout_s=20)
