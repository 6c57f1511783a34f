"""The rendered-resource record: a plan's resources survive its JSON, and the lookups treat gaps as absent."""

from __future__ import annotations

from dataclasses import replace

from components.rendered import DEPLOYMENT, Resource, kubernetes_object, last_segment, lookup
from tests.components.infra import stack_plan


def test_a_plans_resources_survive_its_json() -> None:
    resources = stack_plan("staging").resources
    # The JSON carries masked inputs, so what comes back has them as its inputs.
    assert [Resource.from_json(r.to_json()) for r in resources] == [
        replace(r, props=r.shown) for r in resources]


def test_lookups_treat_a_missing_level_as_absent() -> None:
    props = {"spec": {"template": {"spec": {"containers": []}}}, "name": "x"}
    assert lookup(props, "spec", "template", "spec", "containers") == []
    assert lookup(props, "spec", "missing", "deeper") is None
    assert lookup(props, "name", "deeper") is None  # a string on the way is not a level
    assert lookup(None, "spec") is None
    assert last_segment("projects/p/topics/t") == last_segment("t") == "t"


def test_a_kubernetes_object_is_found_by_namespace_and_name() -> None:
    def deployment(namespace: str, name: str) -> Resource:
        return Resource(DEPLOYMENT, f"{namespace}-{name}", {"metadata": {"namespace": namespace, "name": name}})

    resources = [deployment("a", "web"), deployment("b", "web")]
    assert kubernetes_object(resources, DEPLOYMENT, "web", "b") is resources[1]
    assert kubernetes_object(resources, DEPLOYMENT, "web", "c") is None
