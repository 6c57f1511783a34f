"""The dependency split holds: each image's code imports only what that image installs.

The scheduler image installs the core dependencies and ``[scheduler]``; the GPU worker image the core and
``[gpu]``. What matters is what their entry points can reach: every import, including the lazy ones inside
functions, of every project module reachable from the entry points. Each third-party module found must come
from a distribution in the image's install set, read from ``uv.lock`` (the set the Dockerfiles'
``uv sync --frozen`` installs), and each image copies exactly the project packages its code reaches.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The project's top-level packages: the ones the layering contract names.
PROJECT_PACKAGES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"])
IMAGES = {
    # image: (extras it installs, the modules it runs)
    "gpu-scheduler": (("scheduler",), ("runtime.scheduler",)),
    "gpu-worker": (("gpu",), ("runtime.worker.task", "runtime.worker.vertex_task", "runtime.worker.warm",
                              "kernels.jobs", "kernels.shards")),
}
DOCKERFILES = {"gpu-scheduler": ROOT / "docker" / "scheduler.Dockerfile",
               "gpu-worker": ROOT / "docker" / "worker.Dockerfile"}
# The Dask client's methods that ship a callable by reference, and the image that unpickles and runs it: a Dask
# worker (the gpu-worker image), or the Dask scheduler (the DaskCluster's scheduler runs the gpu-scheduler image).
DASK_HANDOFFS = {"submit": "gpu-worker", "map": "gpu-worker", "run": "gpu-worker", "register_plugin": "gpu-worker",
                 "register_worker_plugin": "gpu-worker", "run_on_scheduler": "gpu-scheduler"}
# The project's own way to hand a callable to a worker (runtime.scheduler.backends.dask_sealed): the function's
# position among each call's arguments. The module that defines them forwards a parameter, not a function.
SEALED_HANDOFFS = {"submit_sealed": 1, "seal": 0}
SEALING_MODULE = "runtime.scheduler.backends.dask_sealed"
# Import names that come with the interpreter or are optional at run time by design.
OPTIONAL_ON_CPU = {"cupy"}  # kernels import cupy only where a GPU is present; the worker image has it


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@cache
def _lock() -> dict[str, dict]:
    packages = tomllib.loads((ROOT / "uv.lock").read_text())["package"]
    return {_normalise(p["name"]): p for p in packages}


def install_set(extras: tuple[str, ...]) -> set[str]:
    """Distributions ``uv sync --no-dev --extra …`` installs (markers ignored: a superset)."""
    lock = _lock()
    root = lock["gpu-runtime"]
    todo = [d for d in root.get("dependencies", [])]
    for extra in extras:
        todo += root.get("optional-dependencies", {}).get(extra, [])
    seen: set[str] = set()
    while todo:
        dep = todo.pop()
        name = _normalise(dep["name"])
        if name == "gpu-runtime":  # an extra that includes another extra
            todo += [d for e in dep.get("extra", []) for d in root["optional-dependencies"][e]]
            continue
        if name in seen:
            continue
        seen.add(name)
        package = lock[name]
        todo += package.get("dependencies", [])
        for extra in dep.get("extra", []):
            todo += package.get("optional-dependencies", {}).get(extra, [])
    return seen


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _submodules(package: str) -> list[str]:
    folder = ROOT.joinpath(*package.split("."))
    if not folder.is_dir():
        return [package]
    return [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            for p in sorted(folder.rglob("*.py"))]


# Python 3.11 keeps the recursion depth of its C-to-Python AST conversion in state that every thread of the
# interpreter shares, and checks it after each parse. Another thread parsing at the same moment, as a
# traceback printed by a thread an earlier test left running does (3.11 parses the source line to place its
# carets), makes the check fail with "AST constructor recursion depth mismatch" for a valid file. The parse
# is deterministic when it succeeds, so it is tried again.
PARSE_TRIES = 5


def _parse(path: Path) -> ast.Module:
    source = path.read_text()
    for _ in range(PARSE_TRIES - 1):
        try:
            return ast.parse(source)
        except SystemError as exc:
            if "recursion depth mismatch" not in str(exc):
                raise
    return ast.parse(source)


def _imports(path: Path, module: str, skipped: frozenset[tuple[str, str]] = frozenset()) -> set[str]:
    tree = _parse(path)
    hidden = {id(node) for function in ast.walk(tree)
              if isinstance(function, ast.FunctionDef) and (module, function.name) in skipped
              for node in ast.walk(function)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")[: len(module.split(".")) - node.level + (path.name == "__init__.py")]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            found |= {f"{prefix}.{alias.name}" for alias in node.names}
    return found


def reachable(entry_points: tuple[str, ...],
              skipped: frozenset[tuple[str, str]] = frozenset()) -> tuple[set[str], dict[str, str]]:
    """Project modules and third-party modules reachable from ``entry_points``.

    The second is module -> the project module importing it. Imports inside the functions ``skipped``
    names (module, function) are not followed.
    """
    todo = [m for entry in entry_points for m in _submodules(entry)]
    seen: set[str] = set()
    external: dict[str, str] = {}
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(module)
        if path is None:
            continue
        for name in _imports(path, module, skipped):
            top = name.split(".")[0]
            if top in PROJECT_PACKAGES:
                if _module_file(name):
                    todo.append(name)
            elif top not in sys.stdlib_module_names and top != "__future__":
                external.setdefault(name, module)
    return {m for m in seen if _module_file(m)}, external


def external_imports(entry_points: tuple[str, ...],
                     skipped: frozenset[tuple[str, str]] = frozenset()) -> dict[str, str]:
    """Third-party modules reachable from ``entry_points``: module -> the project module importing it."""
    return reachable(entry_points, skipped)[1]


def copied_packages(dockerfile: Path) -> set[str]:
    """The project packages a Dockerfile copies into its image (``COPY <folder> ./<folder>``), dotted."""
    copies = re.findall(r"^COPY ([\w/]+) \./([\w/]+)$", dockerfile.read_text(), flags=re.MULTILINE)
    return {source.replace("/", ".") for source, target in copies if source == target}


def package_of(module: str) -> str:
    """The unit an image copies a module with: a top-level package, or one of ``runtime``'s subpackages."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "runtime" and len(parts) > 1 else parts[0]


@cache
def _module_owners() -> dict[str, set[str]]:
    """Every installed Python module (dotted name) -> the distributions whose files provide it."""
    owners: dict[str, set[str]] = {}
    for dist in importlib.metadata.distributions():
        name = _normalise(dist.metadata["Name"])
        for file in dist.files or ():
            if file.suffix in (".py", ".so") and ".." not in file.parts:
                parts = [*file.parts[:-1], file.name.split(".")[0]]
                if parts[-1] == "__init__":
                    parts.pop()
                owners.setdefault(".".join(parts), set()).add(name)
    return owners


def distributions_of(module: str) -> set[str]:
    """The installed distributions providing ``module`` or, for ``from x import name``, its longest prefix."""
    parts = module.split(".")
    while parts:
        owners = _module_owners().get(".".join(parts))
        if owners:
            return owners
        parts.pop()
    return set()


def _is_namespace(module: str) -> bool:
    return any(name.startswith(f"{module}.") for name in _module_owners())


@dataclass(frozen=True)
class Handoff:
    """A callable the gpu-scheduler hands to Dask: where, what, and the image that will unpickle and run it."""

    site: str  # module:line
    target: Any  # the function or class, or None where the argument is not a name this test can resolve
    image: str

    @property
    def defined_in(self) -> str:
        return getattr(self.target, "__module__", "?")


def _is_dask_client(node: ast.expr) -> bool:
    # the project names its distributed.Client `client`, `_client` or `<something>_client`, and nothing else so
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return name == "client" or name.endswith("_client")


def _resolve(module: str, expr: ast.expr) -> Any:
    """The object a module-level name (``f``, ``mod.f``, or ``Plugin(...)``'s class) stands for, else None."""
    if isinstance(expr, ast.Call):
        expr = expr.func
    names: list[str] = []
    while isinstance(expr, ast.Attribute):
        names.insert(0, expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    found: Any = importlib.import_module(module)
    for name in [expr.id, *names]:
        found = getattr(found, name, None)
    return found


def dask_handoffs(modules: set[str]) -> list[Handoff]:
    """Every callable ``modules`` hand to Dask: the client's shipping methods and the project's sealed submits."""
    found = []
    for module in sorted(modules):
        path = _module_file(module)
        for node in ast.walk(_parse(path)) if path else ():
            if not isinstance(node, ast.Call):
                continue
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if isinstance(called, ast.Attribute) and name in DASK_HANDOFFS and _is_dask_client(called.value):
                position, image = 0, DASK_HANDOFFS[name]
            elif name in SEALED_HANDOFFS and module != SEALING_MODULE:
                position, image = SEALED_HANDOFFS[name], "gpu-worker"
            else:
                continue
            if len(node.args) > position:
                found.append(Handoff(f"{module}:{node.lineno}", _resolve(module, node.args[position]), image))
    return found


def _from_standard_library(module: str) -> bool:
    return module.split(".")[0].lstrip("_") in sys.stdlib_module_names or module == "builtins"


def misplaced(handoffs: list[Handoff]) -> list[str]:
    """The handoffs whose callable the image that runs it would not have (or that cannot be resolved)."""
    wrong = []
    for handoff in handoffs:
        module = handoff.defined_in
        if handoff.target is None:
            wrong.append(f"{handoff.site}: cannot tell what is handed to Dask (hand it a module-level name)")
        elif not (_from_standard_library(module) or package_of(module) in copied_packages(DOCKERFILES[handoff.image])):
            wrong.append(f"{handoff.site}: {module}.{handoff.target.__qualname__} runs in the {handoff.image} "
                         f"image, which does not copy {package_of(module)}")
    return wrong


@cache
def scheduler_handoffs() -> list[Handoff]:
    """What the gpu-scheduler image's code hands to Dask."""
    return dask_handoffs(reachable(IMAGES["gpu-scheduler"][1])[0])


def _lazy_imports_in(function: Any) -> set[tuple[str, str]]:
    """``(module, name)`` of each ``from module import name`` inside ``function``'s body."""
    module = function.__module__
    tree = _parse(_module_file(module))  # type: ignore[arg-type]
    body = next(node for node in ast.walk(tree)
                if isinstance(node, ast.FunctionDef) and node.name == function.__name__)
    return {(node.module, alias.name) for node in ast.walk(body) if isinstance(node, ast.ImportFrom) and node.module
            for alias in node.names}


@cache
def worker_only_bodies() -> frozenset[tuple[str, str]]:
    """Functions the gpu-scheduler only names for Dask, and those they import to run: a worker runs their bodies,
    so what those import is the worker image's to install, not the scheduler's."""
    handed = {h.target for h in scheduler_handoffs()
              if h.image == "gpu-worker" and inspect.isfunction(h.target) and not _from_standard_library(h.defined_in)}
    return frozenset({(f.__module__, f.__name__) for f in handed} | {i for f in handed for i in _lazy_imports_in(f)})


def _skipped(image: str) -> frozenset[tuple[str, str]]:
    return worker_only_bodies() if image == "gpu-scheduler" else frozenset()


@pytest.mark.parametrize("image", list(IMAGES))
def test_image_code_imports_only_what_the_image_installs(image: str) -> None:
    extras, entry_points = IMAGES[image]
    allowed = install_set(extras)
    missing = {}
    for module, importer in external_imports(entry_points, _skipped(image)).items():
        if module.split(".")[0] in OPTIONAL_ON_CPU and "gpu" in extras:
            continue
        owners = distributions_of(module)
        if not owners and _is_namespace(module):
            continue  # ``from google.cloud import x``: the submodule ``google.cloud.x`` is checked on its own
        if not owners & allowed:
            missing[module] = (importer, sorted(owners) or "not installed anywhere")
    assert missing == {}, f"{image} reaches modules its image does not install: {missing}"


def test_the_scheduler_image_carries_no_infrastructure_tooling_and_no_kernels() -> None:
    scheduler = install_set(("scheduler",))
    for heavy in ("pulumi", "pulumi-gcp", "pulumi-kubernetes", "pulumi-policy", "kopf", "google-genai",
                  "google-cloud-aiplatform", "matplotlib", "typer", "cupy-cuda12x",
                  "numba", "llvmlite", "numba-cuda", "scipy"):
        assert heavy not in scheduler, heavy


def test_every_callable_handed_to_dask_is_in_the_image_that_runs_it() -> None:
    handoffs = scheduler_handoffs()
    assert misplaced(handoffs) == []
    # the walk sees each way the scheduler hands work to Dask (a broken walk would find nothing to check)
    names = {getattr(h.target, "__qualname__", None) for h in handoffs}
    assert {"execute", "execute_pack", "execute_shard", "merge_shards", "ForgetKeyNames", "forget_key_names",
            "forget_finished_spans", "drop_topics"} <= names


def test_the_handoff_check_catches_a_task_the_worker_image_lacks() -> None:
    from runtime.scheduler.backends import shards

    # where execute_shard once lived: the gpu-scheduler's package, which the worker image does not copy
    planted = Handoff("runtime.scheduler.backends.dask:1", shards.ShardedJob, "gpu-worker")
    assert misplaced([planted]) == ["runtime.scheduler.backends.dask:1: runtime.scheduler.backends.shards.ShardedJob "
                                    "runs in the gpu-worker image, which does not copy runtime.scheduler"]
    assert misplaced([Handoff("x:1", None, "gpu-worker")])  # a callable the walk cannot resolve is not passed


def test_the_workers_preload_is_in_the_worker_image() -> None:
    from runtime.protocol import contract

    assert _module_file(contract.DASK_WORKER_PRELOAD)
    assert package_of(contract.DASK_WORKER_PRELOAD) in copied_packages(DOCKERFILES["gpu-worker"])


def test_the_worker_image_runs_the_functions_the_scheduler_only_names() -> None:
    # Not following what runs only on workers must be what keeps numba out of the scheduler's reach.
    assert "numba" in external_imports(IMAGES["gpu-scheduler"][1])
    assert "numba" not in external_imports(IMAGES["gpu-scheduler"][1], worker_only_bodies())


def test_the_worker_image_carries_only_the_cuda_libraries_the_kernels_use() -> None:
    worker = install_set(("gpu",))
    assert {"numba", "numba-cuda", "cupy-cuda12x", "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12",
            "nvidia-nvjitlink-cu12"} <= worker
    for unused in ("nvidia-cublas-cu12", "nvidia-cusparse-cu12", "nvidia-cusolver-cu12", "nvidia-cufft-cu12",
                   "nvidia-curand-cu12", "dask-cuda"):
        assert unused not in worker, unused


def test_the_walk_sees_lazy_imports() -> None:
    # The Vertex backend imports its REST client's auth lazily; the walk must still find it.
    found = external_imports(("runtime.vertex.rest",))
    assert "google.auth.transport.requests" in found
    assert "google-auth" in distributions_of("google.auth.transport.requests")


# Declared for what they plug in, not for an import of ours.
PLUGINS = {
    "gcsfs": "fsspec's gs:// filesystem",
    "s3fs": "fsspec's s3:// filesystem",
    "numba-cuda": "numba.cuda's implementation",
    "ipywidgets": "tqdm.auto's progress widget in Jupyter",
    "cuda-toolkit": "cuRAND and cuBLAS for the cupy baselines of gpurt bench kernels ([gpu-bench])",
}
# Imported, but installed only by the [gpu] extra, which CPU machines (this test's) do not install.
GPU_ONLY = {"cupy-cuda12x": "imported as cupy where a GPU is present"}


def test_every_declared_dependency_is_used() -> None:
    root = _lock()["gpu-runtime"]
    declared = {_normalise(d["name"]) for d in root.get("dependencies", [])}
    declared |= {_normalise(d["name"]) for deps in root.get("optional-dependencies", {}).values() for d in deps}
    declared.discard("gpu-runtime")
    used = set()
    for module in external_imports(PROJECT_PACKAGES):
        used |= distributions_of(module)
    unused = declared - used - set(PLUGINS) - set(GPU_ONLY)
    assert unused == set(), f"declared but imported nowhere: {sorted(unused)}"


def test_locked_numpy_is_one_the_locked_numba_cuda_can_compile_against() -> None:
    """numba-cuda releases that register an overload of ``np.row_stack`` fail at their first CUDA compile under
    NumPy 2.5, which removed it (seen on an H100 on 2026-11-25: every GPU test failed with that AttributeError).
    While the locked numba-cuda still does, no NumPy 2.5 may be locked for any Python version."""
    import numba_cuda

    arrayobj = Path(numba_cuda.__file__).parent / "numba" / "cuda" / "np" / "arrayobj.py"
    if "np.row_stack" not in arrayobj.read_text():
        pytest.skip("this numba-cuda no longer overloads np.row_stack")
    numpys = [p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"] if p["name"] == "numpy"]
    too_new = [v for v in numpys if tuple(int(x) for x in v.split(".")[:2]) >= (2, 5)]
    assert numpys and not too_new, f"uv.lock pins numpy {too_new}; keep numpy<2.5 in pyproject.toml"



@pytest.mark.parametrize("image", list(IMAGES))
def test_each_image_copies_exactly_the_packages_its_code_reaches(image: str) -> None:
    modules, _ = reachable(IMAGES[image][1])
    reached = {package_of(module) for module in modules} - {"runtime"}  # runtime/__init__.py is copied alone
    assert copied_packages(DOCKERFILES[image]) == reached


def test_the_package_check_sees_a_package_the_image_forgot(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILES["gpu-worker"].read_text().replace(
        "COPY runtime/protocol ./runtime/protocol\n", ""))
    modules, _ = reachable(IMAGES["gpu-worker"][1])
    assert "runtime.protocol" in {package_of(module) for module in modules} - copied_packages(dockerfile)
