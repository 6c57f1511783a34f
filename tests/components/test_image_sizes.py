"""Image sizes from uv.lock: which distributions an image installs on its platform, which wheel of each, and the
sum of their sizes — checked on a lock small enough to add up by hand, and against uv's own resolution."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from packaging.markers import Marker
from typer.testing import CliRunner

from components.review.image_sizes import ENVIRONMENT, IMAGE_EXTRAS, LOCK_FILE, Lock, LockError, image_sizes

W = "https://files.example/"


def _wheel(name: str, size: int) -> dict:
    return {"url": W + name, "hash": "sha256:" + "0" * 64, "size": size}


LOCK = {"package": [
    {"name": "gpu-runtime", "version": "0.1.0", "source": {"editable": "."},
     "dependencies": [{"name": "alpha"}, {"name": "winonly", "marker": "sys_platform == 'win32'"}],
     "optional-dependencies": {"scheduler": [{"name": "gamma", "extra": ["fast"]}],
                               "gpu": [{"name": "gpu-runtime", "extra": ["scheduler"]}]}},
    {"name": "alpha", "version": "1.0", "dependencies": [{"name": "delta"}],
     "wheels": [_wheel("alpha-1.0-cp311-cp311-win_amd64.whl", 999),
                _wheel("alpha-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", 1_000),
                _wheel("alpha-1.0-py3-none-any.whl", 5_000),
                _wheel("alpha-1.0-cp311-cp311-manylinux_2_17_aarch64.whl", 998)]},
    {"name": "winonly", "version": "1.0", "wheels": [_wheel("winonly-1.0-py3-none-any.whl", 7)]},
    {"name": "gamma", "version": "2.0", "optional-dependencies": {"fast": [{"name": "epsilon"}]},
     "wheels": [_wheel("gamma-2.0-py3-none-any.whl", 200)]},
    {"name": "delta", "version": "3.0", "wheels": [_wheel("delta-3.0-cp311-abi3-manylinux_2_28_x86_64.whl", 30)]},
    {"name": "epsilon", "version": "4.0", "wheels": [_wheel("epsilon-4.0-cp312-cp312-manylinux_2_17_x86_64.whl", 1),
                                                    _wheel("epsilon-4.0-py3-none-any.whl", 4)]},
]}


def test_a_small_lock_adds_up_by_hand() -> None:
    lock = Lock(LOCK)
    sizes = {image.image: image for image in image_sizes(lock)}

    # scheduler: alpha (its manylinux wheel, not the win/aarch64/pure one) + delta (abi3) + gamma + epsilon via
    # gamma[fast] (the pure wheel: a cp312 wheel does not fit CPython 3.11); winonly's marker is false on linux.
    assert {(p.name, p.file, p.size) for p in sizes["gpu-scheduler"].packages} == {
        ("alpha", "alpha-1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", 1_000),
        ("delta", "delta-3.0-cp311-abi3-manylinux_2_28_x86_64.whl", 30),
        ("gamma", "gamma-2.0-py3-none-any.whl", 200),
        ("epsilon", "epsilon-4.0-py3-none-any.whl", 4),
    }
    assert sizes["gpu-scheduler"].size == 1_000 + 30 + 200 + 4
    assert sizes["gpu-worker"].size == sizes["gpu-scheduler"].size  # [gpu] includes [scheduler] here


def test_a_package_without_a_wheel_for_the_images_is_named() -> None:
    lock = Lock({"package": [
        {"name": "gpu-runtime", "version": "0", "dependencies": [{"name": "macos"}]},
        {"name": "macos", "version": "1", "wheels": [_wheel("macos-1-cp311-cp311-macosx_11_0_arm64.whl", 1)]},
    ]})
    with pytest.raises(LockError, match=re.escape("no wheel of macos 1 for CPython 3.11 on linux/amd64")):
        image_sizes(lock)


def _uv_export(extra: str) -> set[tuple[str, str]]:
    """uv's own answer: what `uv export` lists for ``extra``, markers evaluated for the images' platform."""
    out = subprocess.run(["uv", "export", "--frozen", "--no-dev", "--extra", extra, "--no-hashes",
                          "--no-emit-project", "--format", "requirements-txt"], cwd=LOCK_FILE.parent,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    found = set()
    for line in out.splitlines():
        if not line or line.startswith((" ", "#", "-e")):
            continue
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(ENVIRONMENT):
            continue
        name, _, version = requirement.strip().partition("==")
        found.add((re.sub(r"[-_.]+", "-", name).lower(), version))
    return found


@pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not on PATH")
@pytest.mark.parametrize(("image", "extras"), IMAGE_EXTRAS.items())
def test_the_install_set_is_uvs_own(image: str, extras: tuple[str, ...]) -> None:
    lock = Lock.read()
    ours = {(re.sub(r"[-_.]+", "-", p["name"]).lower(), p["version"]) for p in lock.install_set(extras)}

    assert ours == _uv_export(extras[0]), image


def test_gpurt_images_sizes_prints_each_image_against_its_target() -> None:
    from gpurt.cli.app import app

    result = CliRunner().invoke(app, ["images", "sizes", "--top", "1"], env={"COLUMNS": "200"})
    found = {image.image: image for image in image_sizes(Lock.read())}

    for name, image in found.items():
        assert f"{name}: {image.size / 1e6:.1f} MB in {len(image.packages)} wheels" in result.output
    assert result.exit_code == (0 if all(i.within_target for i in found.values()) else 1)
