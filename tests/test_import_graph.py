"""The import graph has no circles: every import counts, lazy (inside a function) and ``TYPE_CHECKING`` ones too.

import-linter's layers contracts (``tests/test_layers.py``) forbid arrows between layers they name; a circle
between two modules of one layer, or of modules no contract places, passes them. This test reads every
module's imports with ``ast``, wherever they stand, and finds the circles of the graph they make
(strongly connected components of more than one module). An edge goes to the module an import names, as
import-linter draws it: ``from a.b import c`` to ``a.b.c`` when that is a module, else to ``a.b``; a package's
``__init__`` re-exporting its submodules is not an edge from them to it.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])


def _modules(root: Path) -> dict[str, Path]:
    """Every module of the project's packages under ``root``, by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The project modules that module ``name`` (at ``path``) imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from this module's package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        yield from (target for target in targets if target in modules and target != name)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each project module and the project modules it imports."""
    modules = _modules(root)
    return {name: set(_imported(name, path, modules)) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of two or more modules (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_project_has_no_import_circle() -> None:
    graph = import_graph()
    assert len(graph) > 300 and "gpurt.client.results" in graph["gpurt.client.plots"] | graph["gpurt.client"]
    assert circles(graph) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)


@pytest.mark.parametrize("lazy", [
    "def plot(self):\n    from gpurt.client.plots import draw\n",  # inside a function
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpurt.client.plots import draw\n",
    "def plot(self):\n    from .plots import draw\n",  # relative
])
def test_a_lazy_import_closing_a_circle_is_found(tmp_path: Path, lazy: str) -> None:
    _write(tmp_path, {f"{p}/__init__.py": "" for p in PACKAGES})
    _write(tmp_path, {"gpurt/client/__init__.py": "from gpurt.client.results import Result\n",
                      "gpurt/client/plots.py": "from gpurt.client.results import Result\n",
                      "gpurt/client/results.py": lazy})
    assert circles(import_graph(tmp_path)) == [["gpurt.client.plots", "gpurt.client.results"]]


def test_a_package_reexporting_its_modules_is_no_circle(tmp_path: Path) -> None:
    _write(tmp_path, {f"{p}/__init__.py": "" for p in PACKAGES})
    _write(tmp_path, {"gpurt/client/__init__.py": "from gpurt.client.results import Result\n",
                      "gpurt/client/plots.py": "from gpurt.client import results\n",
                      "gpurt/client/results.py": "import json\n"})
    assert import_graph(tmp_path)["gpurt.client.plots"] == {"gpurt.client.results"}
    assert circles(import_graph(tmp_path)) == []
