"""A deploy of a recorded program onto a fake Kubernetes API that keeps the rules the Dask component relies on.

``FakeKubeApi`` holds objects by kind, namespace and name and applies, as a real API server and its controllers do:

- **Owner-reference garbage collection.** An object whose every owner (matched by ``uid``, not by name) is gone is
  deleted by the garbage collector, and so on down the chain
  (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#owners-dependents; kubernetes/kubernetes
  ``pkg/controller/garbagecollector/garbagecollector.go``, ``attemptToDeleteItem``: an item with no "solid"
  owner left is deleted). A new owner of the same name has a new ``uid`` and adopts nothing.
- **The dask-kubernetes operator's adoption.** On creating a DaskWorkerGroup or a DaskAutoscaler the operator
  sets its owner reference to the DaskCluster named in its ``spec.cluster`` (the locked package's
  ``dask_kubernetes/operator/controller/controller.py``: ``daskworkergroup_create`` and ``daskautoscaler_create``
  call ``cluster.adopt``, kr8s' ``set_owner``).
- **Names are unique**: creating an object whose name is taken is refused (AlreadyExists, HTTP 409).

``deploy`` steps through a recorded program's Kubernetes objects the way ``pulumi up`` does for the options the
component sets, with the pulumi-kubernetes provider's calls:

- A resource not in the state is created; one whose inputs (less ``ignoreChanges``) are unchanged is left alone.
- A change under one of its ``replaceOnChanges`` paths, or of ``metadata.name``, replaces it
  (https://www.pulumi.com/docs/iac/concepts/options/replaceonchanges/); with ``deleteBeforeReplace`` the old
  object is deleted before the new one is created, otherwise created first
  (https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/). A dependency by ``dependsOn`` alone
  replaces nothing else (pulumi/pulumi ``pkg/resource/deploy/step_generator.go``,
  ``calculateDependentReplacements`` looks only at property dependencies).
- Any other change is an update, which the provider starts by reading the live object and fails when it is gone
  (pulumi/pulumi-kubernetes ``provider/pkg/await/await.go``, ``Update``: ``client.Get`` of the old name, its
  error returned); a server-side apply never runs, so nothing missing is recreated.
- The provider's delete succeeds on an object already gone (``await.go``, ``Deletion``: ``nilIfGVKDeleted``).
- Resources in the state that the program no longer declares are deleted at the end.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.rendered import Resource
from runtime.manifests import dask_operator

Key = tuple[str, str, str]  # kind, namespace ("" when cluster-scoped), name
_ADOPTED_KINDS = (dask_operator.WORKER_GROUP_KIND, dask_operator.AUTOSCALER_KIND)


class KubeApiError(Exception):
    """A refusal of the API server, with its HTTP status reason."""

    def __init__(self, reason: str, key: Key) -> None:
        super().__init__(f"{reason}: {key[0]} {key[1]}/{key[2]}")
        self.reason = reason


def _key(manifest: Mapping[str, Any]) -> Key:
    meta = manifest["metadata"]
    return manifest["kind"], meta.get("namespace") or "", meta["name"]


class FakeKubeApi:
    """Objects by key, with uids, owner-reference garbage collection and the Dask operator's adoption."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self._uids = itertools.count(1)

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``manifest``; AlreadyExists when its name is taken."""
        key = _key(manifest)
        if key in self.objects:
            raise KubeApiError("AlreadyExists", key)
        stored = copy.deepcopy(dict(manifest))
        stored["metadata"]["uid"] = f"uid-{next(self._uids)}"
        self.objects[key] = stored
        if key[0] in _ADOPTED_KINDS:
            self._adopt(stored)
        return stored

    def _adopt(self, child: dict[str, Any]) -> None:
        owner = self.objects.get((dask_operator.CLUSTER_KIND, child["metadata"].get("namespace") or "",
                                  child["spec"]["cluster"]))
        if owner is None:  # the operator's handler fails (retried by kopf); nothing adopts the child
            return
        child["metadata"]["ownerReferences"] = [{
            "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "blockOwnerDeletion": True, "controller": True}]

    def get(self, key: Key) -> dict[str, Any]:
        """The live object; NotFound when absent."""
        if key not in self.objects:
            raise KubeApiError("NotFound", key)
        return self.objects[key]

    def update(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the spec of a live object (its uid and owners stay); NotFound when absent."""
        live = self.get(_key(manifest))
        meta = {**copy.deepcopy(dict(manifest["metadata"])), "uid": live["metadata"]["uid"]}
        if "ownerReferences" in live["metadata"]:
            meta["ownerReferences"] = live["metadata"]["ownerReferences"]
        live.clear()
        live.update({**copy.deepcopy(dict(manifest)), "metadata": meta})
        return live

    def delete(self, key: Key) -> None:
        """Delete an object, then collect every dependent left without an owner."""
        self.get(key)
        del self.objects[key]
        self.collect_garbage()

    def collect_garbage(self) -> None:
        """Delete every object whose owners are all gone, until none is left (the collector runs after each
        delete here; in a cluster it runs on its own, shortly after)."""
        while True:
            uids = {obj["metadata"]["uid"] for obj in self.objects.values()}
            orphans = [key for key, obj in self.objects.items()
                       if (owners := obj["metadata"].get("ownerReferences"))
                       and not any(owner["uid"] in uids for owner in owners)]
            if not orphans:
                return
            for key in orphans:
                del self.objects[key]


def _manifest(resource: Resource) -> dict[str, Any] | None:
    props = resource.props
    if not {"apiVersion", "kind", "metadata"} <= set(props):
        return None  # not an object of the API (a Helm release)
    return dict(props)


def _paths(value: Any, where: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping) and value:
        return {p: v for key, item in value.items()
                for p, v in _paths(item, f"{where}.{key}" if where else key).items()}
    if isinstance(value, list) and value:
        return {p: v for i, item in enumerate(value) for p, v in _paths(item, f"{where}[{i}]").items()}
    return {where: value}


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith((f"{root}.", f"{root}[")) for root in roots)


@dataclass
class DeployResult:
    """What ``deploy`` did: the state for the next deploy, the steps and the error that stopped it."""

    state: dict[str, Resource]
    steps: list[tuple[str, str]] = field(default_factory=list)
    """(operation, resource name) in order: create, update, replace, delete."""
    error: KubeApiError | None = None


def deploy(api: FakeKubeApi, state: Mapping[str, Resource], program: Sequence[Resource]) -> DeployResult:
    """Step ``program``'s Kubernetes objects onto ``api`` against ``state`` (by URN), as ``pulumi up`` does."""
    result = DeployResult(state=dict(state))
    declared = {resource.urn for resource in program}
    try:
        for resource in program:
            manifest = _manifest(resource)
            if manifest is None:
                continue
            old = state.get(resource.urn)
            if old is None:
                api.create(manifest)
                result.steps.append(("create", resource.name))
            else:
                before, after = _paths(old.props), _paths(manifest)
                changed = [p for p in sorted(before.keys() | after.keys())
                           if before.get(p) != after.get(p) and not _under(p, resource.ignore_changes)]
                if not changed:
                    continue
                if any(_under(p, [*resource.replace_on_changes, "metadata.name"]) for p in changed):
                    _replace(api, _key(old.props), manifest, resource.delete_before_replace)
                    result.steps.append(("replace", resource.name))
                else:
                    api.update(manifest)
                    result.steps.append(("update", resource.name))
            result.state[resource.urn] = resource
        for urn in [urn for urn in state if urn not in declared]:
            _delete(api, _key(state[urn].props))
            result.steps.append(("delete", state[urn].name))
            del result.state[urn]
    except KubeApiError as exc:
        result.error = exc
    return result


def _replace(api: FakeKubeApi, old: Key, manifest: Mapping[str, Any], delete_first: bool) -> None:
    if delete_first:
        _delete(api, old)
        api.create(manifest)
    else:
        api.create(manifest)
        _delete(api, old)


def _delete(api: FakeKubeApi, key: Key) -> None:
    if key in api.objects:
        api.delete(key)
