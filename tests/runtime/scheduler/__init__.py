"""Tests of the gpu-scheduler."""

import pytest

# The modules whose tests use the session's in-process platform (``platform`` in conftest.py: a scheduler, its
# Dask cluster, an emulator) name this xdist group: a session fixture is made once per worker that uses it, so
# they share one worker (tests/conftest.py).
ON_THE_SESSION_PLATFORM = pytest.mark.xdist_group("tests/runtime/scheduler/conftest.py::platform")
