"""``runtime.local`` loads its exported names on first use, so a process of the platform that is a module of the
package (the broker) starts without the platform's own code."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import runtime.local


def test_every_exported_name_is_the_one_its_module_defines() -> None:
    for name in runtime.local.__all__:
        home = importlib.import_module(runtime.local._HOMES[name])
        assert getattr(runtime.local, name) is getattr(home, name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        runtime.local.Nothing  # noqa: B018


def test_the_broker_starts_without_the_platforms_code() -> None:
    # A child of its own: this test process has the platform loaded already.
    check = ("import sys, runtime.local.broker.__main__, runtime.local.broker.server; "
             "print(sorted(m for m in ('runtime.local.platform', 'runtime.local.vertex_api', 'httpx') "
             "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split("\n")[-2] == "[]", done.stdout
