"""Builds validation targets from the real world: the local platform's state file, or a stack's outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from runtime.access.local_state import ProcessRecord
from validation.adapters.pulumi_stack import PulumiStack
from validation.checks.dask import RenderedDask
from validation.platform import PlatformView
from validation.targets import CloudTarget, LocalTarget

if TYPE_CHECKING:
    from components.config import StackConfig


# The image the expected Dask objects are rendered with (``rendered_dask``): no compared field holds it.
_IMAGE_NOT_COMPARED: Final = "image-not-compared"


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


def stored_config(stack: PulumiStack) -> StackConfig:
    """The config of the stack's last update (what was actually deployed), validated by the deploy's own
    ``components.config.parse_stack_config``: every field and cross-field rule ``pulumi up`` applies, defaults
    included.

    Each key is read back as the program reads it (``components.config.STACK_KEYS``): an object or array value
    from its ``objectValue``, a scalar from its text, which the model converts as ``pulumi.Config`` would.
    Raises ``TargetError`` for a stack never deployed, or one whose stored config this program refuses.
    """
    from components.config import PROJECT_NAMESPACE, STACK_KEYS, ConfigError, parse_stack_config

    updates = [entry for entry in stack.history() if entry.kind == "update"]
    if not updates:
        raise TargetError(f"stack {stack.name} was never deployed (no update in its history)")
    update = updates[0]
    keys = {f"{PROJECT_NAMESPACE}:{key}": key for key in STACK_KEYS}
    raw = {keys[key]: update.object_values.get(key, value) for key, value in update.config.items() if key in keys}
    outputs = stack.outputs()
    try:
        return parse_stack_config(raw, update.config.get("gcp:project") or outputs.get("project"),
                                  update.config.get("gcp:region") or outputs.get("region"),
                                  source=f"stack {stack.name}'s update {update.version}")
    except ConfigError as exc:
        raise TargetError(f"{exc}\nthis program cannot validate against that config: deploy a valid one "
                          "(`pulumi up`), or validate with the program of the commit that deployed it") from None


def rendered_dask(config: StackConfig) -> RenderedDask:
    """The DaskAutoscaler and worker groups the deploy renders for ``config``: the Pulumi program's own pools
    (``components.dask.worker_pools``) through ``runtime.manifests.dask``'s builders, as ``components.dask``
    calls them. Raises ValueError for pools the builders refuse (as ``pulumi up`` would)."""
    from components.dask import worker_pools
    from runtime.manifests import dask as manifests

    # The builders place the images without reading them (the program passes Pulumi Outputs): a stand-in keeps
    # the images' references in one place, the program's __main__.
    spec = manifests.DaskClusterSpec(image=_IMAGE_NOT_COMPARED, scheduler_image=_IMAGE_NOT_COMPARED,
                                     pools=tuple(worker_pools(config.gpu_pools)))
    return RenderedDask(primary_pool=spec.primary.name, autoscaler=manifests.build_autoscaler(spec),
                        worker_groups={pool.name: manifests.build_worker_group(spec, pool) for pool in spec.pools[1:]})


def stack_settings(stack: PulumiStack) -> dict[str, Any]:
    """Project, region, quota needs, the expected Dask objects and the request queues of the stack's last update
    (``stored_config``)."""
    from components.rendered import Resource
    from components.review.quotas import quota_needs

    config = stored_config(stack)
    uses_vertex_ai = config.vertex.uses_vertex_ai
    try:
        # What the stack reaches at its maxima, from the node pools as deployed (their inputs in the stack's
        # state): the same derivation `gpurt plan` reports before the deploy.
        deployed = [Resource.from_state(r) for r in (stack.export().get("deployment") or {}).get("resources") or []]
        needs = quota_needs(deployed, config.region, config.vertex if uses_vertex_ai else None)
        dask = rendered_dask(config)
    except ValueError as exc:
        raise TargetError(f"stack {stack.name}'s last update holds config this program cannot read: {exc}") from None
    return {
        "project": config.project,
        "region": config.region,
        "quota_needs": needs,
        "scales_from_zero": all(pool.dask_workers_min == 0 for pool in config.gpu_pools),
        "routes_to_vertex": uses_vertex_ai,
        "dask": dask,
        "queues": config.queue_specs(),
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
        rendered_dask=settings["dask"],
        queues=settings["queues"],
    )
