"""One import name for users: ``import gpurt`` is light, and the Python API's names load from it on first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import gpurt


def test_importing_gpurt_loads_none_of_the_python_api() -> None:
    probe = ("import json, sys; import gpurt; "
             "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('pandas', 'google', 'distributed', 'numba', 'pydantic', 'typer') or m.startswith('gpurt.'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(done.stdout) == []


def test_every_public_name_is_the_python_apis_own() -> None:
    from gpurt import client

    assert sorted(gpurt.__all__) == sorted(client.__all__)
    assert all(getattr(gpurt, name) is getattr(client, name) for name in gpurt.__all__)
    assert gpurt.EuropeanOption(strike=105).strike == 105


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Clinet'"):
        gpurt.Clinet  # noqa: B018
