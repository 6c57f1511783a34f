"""The kernel version that keys the result cache changes by itself with any edit to the kernels."""

from __future__ import annotations

import shutil
from pathlib import Path

import kernels
from kernels.version import KERNEL_VERSION, source_digest

KERNELS = Path(kernels.__file__).parent


def test_the_version_is_the_digest_of_the_kernels_as_they_are() -> None:
    assert source_digest(KERNELS) == KERNEL_VERSION
    assert len(KERNEL_VERSION) == 64


def test_any_edit_to_a_kernel_or_a_parameter_default_changes_it(tmp_path: Path) -> None:
    copy = tmp_path / "kernels"
    shutil.copytree(KERNELS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert source_digest(copy) == KERNEL_VERSION
    params = copy / "params.py"
    params.write_text(params.read_text().replace("seed: Seed = 42", "seed: Seed = 43", 1))
    assert source_digest(copy) != KERNEL_VERSION
    shutil.copy(KERNELS / "params.py", params)
    (copy / "new_kernel.py").write_text("")  # a new module counts too, even an empty one
    assert source_digest(copy) != KERNEL_VERSION


def test_bytecode_caches_do_not_count(tmp_path: Path) -> None:
    copy = tmp_path / "kernels"
    shutil.copytree(KERNELS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "__pycache__").mkdir()
    (copy / "__pycache__" / "stale.py").write_text("x = 1")
    assert source_digest(copy) == KERNEL_VERSION
