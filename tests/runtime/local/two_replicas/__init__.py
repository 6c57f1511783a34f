"""Two scheduler replicas of one local platform, as real processes: crash recovery and a maintenance drain."""

import pytest

# The modules of this package use its one platform (``platform`` in conftest.py), so they name one xdist group
# and run on one worker: a package fixture is made once per worker that runs the package (tests/conftest.py).
ON_TWO_REPLICAS = pytest.mark.xdist_group("tests/runtime/local/two_replicas/conftest.py::platform")
STOP_GRACE_S = 3.0  # how long a replica stopped here may take: the platform is thrown away at the end
