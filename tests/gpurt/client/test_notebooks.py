"""The example notebooks run, cell by cell, against the local platform: an example cannot rot unnoticed."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from runtime.local import LocalPlatform
from tests.gpurt.client import ON_THE_CLIENT_PLATFORM

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
# One cell may run a job that loads the kernels on a loaded machine.
CELL_TIMEOUT_S = 300


def run_notebook(path: Path, cwd: Path) -> nbformat.NotebookNode:
    """Execute ``path`` in a fresh kernel started in ``cwd``; raises ``CellExecutionError`` at the first error."""
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return notebook


def test_the_examples_include_the_three_notebooks() -> None:
    assert {p.name for p in NOTEBOOKS} >= {"heston_smile.ipynb", "basket_greeks.ipynb", "var_report.ipynb"}


@pytest.mark.integration
@pytest.mark.slow
@ON_THE_CLIENT_PLATFORM
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_an_example_notebook_runs_against_the_local_platform(path: Path, platform_env: LocalPlatform,
                                                             monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's client, from any folder
    executed = run_notebook(path, tmp_path)
    errors = [o for cell in executed.cells if cell.cell_type == "code" for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == []


@pytest.mark.timeout(300)
def test_a_notebook_that_errors_fails_its_test(tmp_path: Path) -> None:
    # an example gone stale: a value the protocol now refuses
    broken = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("from gpurt import Noop\nNoop(sleep_s=-1)")])
    path = tmp_path / "broken.ipynb"
    nbformat.write(broken, path)
    with pytest.raises(CellExecutionError):
        run_notebook(path, tmp_path)


@pytest.mark.timeout(300)
def test_in_jupyter_the_progress_bar_is_a_widget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    probe = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from tqdm.notebook import tqdm as widget_bar\n"
        "from gpurt.client.progress import progress_bar\n"
        "bar = progress_bar(20, None, 'jobs')\n"
        "print(isinstance(bar, widget_bar))\n"
        "bar.close()")])
    path = tmp_path / "probe.ipynb"
    nbformat.write(probe, path)
    outputs = run_notebook(path, tmp_path).cells[0].outputs
    printed = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o["name"] == "stdout")
    warnings = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream" and o["name"] == "stderr")
    assert printed.strip() == "True" and "IProgress not found" not in warnings
