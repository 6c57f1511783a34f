"""Tests of the gpu-scheduler."""

import pytest

# The modules whose tests use the package's in-process platform (``platform`` in conftest.py: a scheduler, its
# Dask cluster, an emulator) name this xdist group: a package fixture is made once per worker that uses it, so
# they share one worker (tests/conftest.py).
ON_THE_PACKAGE_PLATFORM = pytest.mark.xdist_group("tests/runtime/scheduler/conftest.py::platform")
