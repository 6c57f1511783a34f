"""Builds validation targets from the real world: the local platform's state file, or a stack's outputs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from runtime.access.local_state import ProcessRecord
from validation.adapters.pulumi_stack import PulumiStack
from validation.checks.dask import PoolBounds
from validation.platform import PlatformView
from validation.targets import CloudTarget, LocalTarget


class TargetError(RuntimeError):
    """The target cannot be reached or described; the message says what to do."""


def local_target(platform: PlatformView, is_alive: Callable[[ProcessRecord], bool]) -> LocalTarget:
    """The running local platform (``gpurt local up``) as a validation target.

    The CLI passes the platform and its process check in (``LocalPlatform``, ``processes.is_alive``), so
    validation does not import the local platform it checks.
    """
    from validation.adapters.dask_info import ApiPoolsDask
    from validation.adapters.pubsub import GooglePubSubAdmin

    state = platform.state
    if state is None:
        raise TargetError(f"no local platform state in {platform.directory}: start it with `gpurt local up`")

    def alive() -> tuple[bool, str]:
        dead = [p for p in state.processes if not is_alive(p)]
        if dead:
            return False, "; ".join(f"{p.name} (pid {p.pid}) is not running, log: {p.log_path}" for p in dead)
        return True, ", ".join(f"{p.name} pid {p.pid}" for p in state.processes) + " running"

    return LocalTarget(
        pubsub=GooglePubSubAdmin.for_emulator(state.emulator_host, state.project, state.broker_token),
        api_url=state.api_url,
        dask=ApiPoolsDask(state.api_url, state.control_token),
        processes_alive=alive,
    )


def _config_value(config: Mapping[str, str], key: str) -> Any:
    raw = config.get(key)
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def stack_settings(stack: PulumiStack) -> dict[str, Any]:
    """Project, region and GPU pools of the stack's last update (what was actually deployed).

    The pools and the Vertex AI settings are read through the Pulumi program's own config models, so a
    default (``daskWorkersMin``, say) has one home: ``components.config``.
    """
    from components.config import PROJECT_NAMESPACE, GpuPoolConfig, VertexConfig
    from components.quotas import quota_needs
    from components.rendered import Resource

    updates = [entry for entry in stack.history() if entry.kind == "update"]
    if not updates:
        raise TargetError(f"stack {stack.name} was never deployed (no update in its history)")
    config = updates[0].config
    outputs = stack.outputs()
    project = outputs.get("project") or _config_value(config, "gcp:project")
    region = outputs.get("region") or _config_value(config, "gcp:region")
    if not project or not region:
        raise TargetError(f"stack {stack.name} names no gcp:project / gcp:region in its config")
    try:
        pools = [GpuPoolConfig.model_validate(p)
                 for p in _config_value(config, f"{PROJECT_NAMESPACE}:gpuPools") or []]
        vertex = _config_value(config, f"{PROJECT_NAMESPACE}:vertex")
        vertex_config = VertexConfig.model_validate(vertex) if vertex else None
        uses_vertex_ai = vertex_config is not None and vertex_config.uses_vertex_ai
        # What the stack reaches at its maxima, from the node pools as deployed (their inputs in the stack's
        # state): the same derivation `gpurt plan` reports before the deploy.
        deployed = [Resource.from_state(r) for r in (stack.export().get("deployment") or {}).get("resources") or []]
        needs = quota_needs(deployed, region, vertex_config if uses_vertex_ai else None)
    except ValueError as exc:
        raise TargetError(f"stack {stack.name}'s last update holds config this program cannot read: {exc}") from None
    return {
        "project": project,
        "region": region,
        "quota_needs": needs,
        "scales_from_zero": bool(pools) and all(p.dask_workers_min == 0 for p in pools),
        "routes_to_vertex": uses_vertex_ai,
        "pool_bounds": [PoolBounds(p.name, p.dask_workers_min, p.dask_workers_max, p.queued_provisioning)
                        for p in pools],
    }


def cloud_target(stack: PulumiStack, kube_context: str | None = None) -> CloudTarget:
    """A deployed stack as a validation target, through the Google and Kubernetes client libraries."""
    from validation.adapters.dask_info import KubeServiceDask
    from validation.adapters.iam import GoogleResourceIam, ResourceManagerIam
    from validation.adapters.kube import KubernetesApi, api_client
    from validation.adapters.pubsub import GooglePubSubAdmin
    from validation.adapters.vertex import GoogleVertexQuota

    settings = stack_settings(stack)
    # Without a named context, the stack's own kubeconfig: the cluster's DNS endpoint, which CI can reach.
    kubeconfig = None if kube_context else stack.outputs().get("kubeconfig")
    kube = KubernetesApi(api_client(kube_context, kubeconfig))
    return CloudTarget(
        project=settings["project"], region=settings["region"],
        pubsub=GooglePubSubAdmin(settings["project"]),
        iam=ResourceManagerIam(settings["project"]),
        resource_iam=GoogleResourceIam(settings["project"]),
        kube=kube, dask=KubeServiceDask(kube),
        vertex=GoogleVertexQuota(settings["project"], settings["region"]),
        quota_needs=settings["quota_needs"],
        pools_scale_from_zero=settings["scales_from_zero"],
        routes_to_vertex=settings["routes_to_vertex"],
        pool_bounds=settings["pool_bounds"],
    )
