"""Tests of the ``gpurt`` CLI, the Python API and the demo."""

import pytest

# The modules whose tests use this package's one local platform (``platform`` in conftest.py) name this xdist
# group: a package fixture is made once per worker that runs the package, so they share one worker
# (tests/conftest.py).
ON_THE_CLI_PLATFORM = pytest.mark.xdist_group("tests/gpurt/conftest.py::platform")
