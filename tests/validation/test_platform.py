"""The CLI hands the real ``LocalPlatform`` to validation as the interface ``validation/platform.py`` declares.

Nothing type-checks that at run time, so a rename on either side would surface only when a drill runs against
a live platform; these tests compare the two without one.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest

from runtime.local.platform import LocalPlatform, Restarted
from validation.platform import DrillPlatform, PlatformView, RestartedReplica


def _protocol_members(protocol: type) -> dict[str, object]:
    """The public members a Protocol declares, its own and its parent protocols'."""
    found: dict[str, object] = {}
    for klass in reversed(protocol.__mro__):
        if getattr(klass, "_is_protocol", False) and klass.__module__ == "validation.platform":
            found.update({name: value for name, value in vars(klass).items() if not name.startswith("_")})
    return found


@pytest.mark.parametrize("protocol", [DrillPlatform, PlatformView])
def test_the_local_platform_has_every_member_the_interface_declares(protocol: type, tmp_path: Path) -> None:
    platform = LocalPlatform(tmp_path)  # starts nothing
    members = _protocol_members(protocol)
    assert members
    missing = [name for name in members if not hasattr(platform, name)]
    assert not missing, f"LocalPlatform lacks {missing}, which validation/platform.py declares"


def test_a_restarted_replica_has_every_field_the_interface_declares() -> None:
    missing = set(_protocol_members(RestartedReplica)) - {field.name for field in dataclasses.fields(Restarted)}
    assert not missing, f"Restarted lacks {missing}, which validation/platform.py declares"


def test_the_real_methods_take_every_argument_the_interface_passes() -> None:
    for name, declared in _protocol_members(DrillPlatform).items():
        if not inspect.isfunction(declared):
            continue
        wanted = inspect.signature(declared).parameters
        taken = inspect.signature(getattr(LocalPlatform, name)).parameters
        for parameter in wanted.values():
            assert parameter.name in taken, f"LocalPlatform.{name} takes no {parameter.name}"
            assert (parameter.default is inspect.Parameter.empty) == (taken[parameter.name].default
                                                                      is inspect.Parameter.empty), (name, parameter)

