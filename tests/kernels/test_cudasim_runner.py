"""The simulator child's set-up (tests/kernels/cudasim_runner.py): it cuts what the child spends, never what a
kernel computes (test_cudasim.py compares every result with the CPU twin)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import kernels
from kernels import chunks
from tests.kernels import cudasim_runner


def test_no_kernel_module_keeps_its_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    original = chunks.warm_up
    modules = [importlib.import_module(f"kernels.{m.name}") for m in pkgutil.iter_modules(kernels.__path__)]
    users = [module for module in modules if getattr(module, "warm_up", None) is original]
    for module in users:
        monkeypatch.setattr(module, "warm_up", original)  # put back after the test
    # the modules listed after chunks itself among them: chunks' own is replaced on the way
    assert {"kernels.chunks", "kernels.launch", "kernels.fd_greeks"} <= {module.__name__ for module in users}

    cudasim_runner._without_warm_up()

    assert [module.__name__ for module in users if module.warm_up is original] == []


GENERATOR = '''
import numba

@numba.jit(forceobj=True)
def step(x):
    return x + 1

@numba.jit(forceobj=True)
def draw(x):
    return step(x) * 2

@numba.njit
def compiled(x):
    return x
'''


def test_object_mode_functions_become_the_python_they_compile() -> None:
    module = types.ModuleType("generator")
    exec(GENERATOR, module.__dict__)  # a module of this test's own text
    step, draw, compiled = module.step, module.draw, module.compiled

    cudasim_runner._object_mode_as_python(module)

    assert module.step is step.py_func and module.draw is draw.py_func
    assert module.compiled is compiled  # nopython functions are numba's semantics, not Python's: kept
    assert module.draw(1) == 4
    # the call inside draw went through the module's globals to the Python step: nothing was compiled
    assert step.signatures == [] and draw.signatures == []
