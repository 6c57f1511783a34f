"""The fake Kubernetes API and deploy refuse what the real ones refuse (tests/components/kube_deploy.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.rendered import Resource
from runtime.manifests import dask_operator
from tests.components.kube_deploy import FakeKubeApi, KubeApiError, deploy

NS = "compute"


def _object(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": dask_operator.API_VERSION, "kind": kind,
            "metadata": {"name": name, "namespace": NS, "labels": {}}, "spec": spec}


def _resource(manifest: dict[str, Any], **options: Any) -> Resource:
    name = f"{manifest['kind']}-{manifest['metadata']['name']}"
    return Resource("kubernetes:x", name, manifest, urn=f"urn:{name}", **options)


def test_the_operator_adopts_groups_and_deleting_the_cluster_collects_them() -> None:
    api = FakeKubeApi()
    api.create(_object(dask_operator.CLUSTER_KIND, "c"))
    api.create(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c"))
    api.create(_object(dask_operator.AUTOSCALER_KIND, "c-autoscaler", cluster="c"))
    api.delete((dask_operator.CLUSTER_KIND, NS, "c"))
    assert api.objects == {}


def test_an_owner_of_the_same_name_created_again_does_not_keep_the_old_children() -> None:
    """Owners are matched by uid: a cluster deleted and made again under its name owns nothing the old one did,
    even when the collector runs only after the new one exists."""
    api = FakeKubeApi()
    api.create(_object(dask_operator.CLUSTER_KIND, "c"))
    api.create(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c"))
    del api.objects[(dask_operator.CLUSTER_KIND, NS, "c")]  # deleted; the collector has not run yet
    api.create(_object(dask_operator.CLUSTER_KIND, "c"))
    api.collect_garbage()
    assert set(api.objects) == {(dask_operator.CLUSTER_KIND, NS, "c")}


def test_an_update_of_a_collected_object_fails_not_found_and_a_taken_name_already_exists() -> None:
    api = FakeKubeApi()
    api.create(_object(dask_operator.CLUSTER_KIND, "c"))
    with pytest.raises(KubeApiError) as taken:
        api.create(_object(dask_operator.CLUSTER_KIND, "c"))
    assert taken.value.reason == "AlreadyExists"
    with pytest.raises(KubeApiError) as missing:
        api.update(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c"))
    assert missing.value.reason == "NotFound"


def test_a_deploy_replacing_only_the_owner_fails_on_the_collected_child() -> None:
    """What a lenient fake (no collection, or an update that creates) would let pass: the cluster replaced,
    its adopted group updated though the collector deleted it."""
    api = FakeKubeApi()
    cluster = _resource(_object(dask_operator.CLUSTER_KIND, "c", revision="1"),
                        replace_on_changes=("spec.revision",), delete_before_replace=True)
    group = _resource(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c", image="v1"))
    first = deploy(api, {}, [cluster, group])
    assert first.error is None and first.steps == [("create", cluster.name), ("create", group.name)]
    second = deploy(api, first.state, [
        _resource(_object(dask_operator.CLUSTER_KIND, "c", revision="2"),
                  replace_on_changes=("spec.revision",), delete_before_replace=True),
        _resource(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c", image="v2"))])
    assert second.steps == [("replace", cluster.name)]
    assert second.error is not None and second.error.reason == "NotFound"


def test_a_fixed_name_replaced_create_first_already_exists_and_ignored_fields_change_nothing() -> None:
    api = FakeKubeApi()
    group = _resource(_object(dask_operator.CLUSTER_KIND, "c", revision="1", replicas=1),
                      replace_on_changes=("spec.revision",), ignore_changes=("spec.replicas",))
    first = deploy(api, {}, [group])
    unchanged = deploy(api, first.state, [_resource(_object(dask_operator.CLUSTER_KIND, "c", revision="1",
                                                            replicas=5), ignore_changes=("spec.replicas",))])
    assert unchanged.steps == [] and unchanged.error is None
    second = deploy(api, first.state, [_resource(_object(dask_operator.CLUSTER_KIND, "c", revision="2"),
                                                 replace_on_changes=("spec.revision",))])
    assert second.error is not None and second.error.reason == "AlreadyExists"


def test_a_resource_the_program_drops_is_deleted_and_one_already_gone_is_no_error() -> None:
    api = FakeKubeApi()
    cluster = _resource(_object(dask_operator.CLUSTER_KIND, "c"))
    group = _resource(_object(dask_operator.WORKER_GROUP_KIND, "c-t4", cluster="c"))
    first = deploy(api, {}, [cluster, group])
    gone = deploy(api, first.state, [])
    assert gone.error is None and api.objects == {}
    assert [step for step, _ in gone.steps] == ["delete", "delete"]
