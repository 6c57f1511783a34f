"""Shared test set-up: no test reaches a real cloud, and CUDA runs only where a GPU exists."""

from __future__ import annotations

import os

# Keep Google client libraries from looking for credentials or metadata servers.
os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "gpurt-test")
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)


def pytest_collection_modifyitems(config, items) -> None:  # type: ignore[no-untyped-def]
    """Under pytest-xdist (``make test`` runs ``-n auto --dist loadgroup``), the tests that start real
    processes (``integration``: servers, ports, a platform) share one worker, one after another, as in a
    serial run: their deadlines and port choices were written for one such test at a time. A ``slow``
    test that starts none (long CPU work: plans, reference prices, the CUDA simulator) runs on any worker,
    its module kept together so a module fixture is made once. The unit tests fill the workers around them.
    A module that names its own ``xdist_group`` keeps it: the two longest integration modules (the replica
    drills, the alert drill), whose platforms take free ports and their own directories like every platform
    here, form a second serial group, "processes-2", so the two groups run side by side on two workers."""
    import pytest

    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.xdist_group("processes"))
        elif item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
