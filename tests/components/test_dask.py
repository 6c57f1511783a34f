"""The DaskCluster component under the plan's realistic mocks, built from the production stack's pools:
operator release, custom resources that wait for it, a cluster that a new image never replaces, contract values."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import pytest

import components.review.plan
from components.dask import TYPE, DaskCluster, DaskClusterArgs, worker_pools
from components.review.plan import Recording
from runtime.manifests import dask_operator
from runtime.protocol import contract
from tests.components.infra import children_of, named, of_type, run, stack_config
from tests.components.kube_deploy import FakeKubeApi, deploy

RELEASE = "kubernetes:helm.sh/v3:Release"
DASK_CLUSTER = "kubernetes:kubernetes.dask.org/v1:DaskCluster"
WORKER_GROUP = "kubernetes:kubernetes.dask.org/v1:DaskWorkerGroup"
AUTOSCALER = "kubernetes:kubernetes.dask.org/v1:DaskAutoscaler"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
EMAIL = "gpu-runtime@impulse-gpu-runtime-test.iam.gserviceaccount.com"


class _OptionsMonitor(components.review.plan.RecordingMonitor):
    """The plan's recording monitor, also keeping each registration's dependencies and replace options."""

    options: dict[str, dict[str, Any]] = {}  # noqa: RUF012 - reset per recording below

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        _OptionsMonitor.options[request.name] = {
            "depends_on": set(request.dependencies),
            "replace_on_changes": list(request.replaceOnChanges),
            "delete_before_replace": request.deleteBeforeReplace,
            "ignore_changes": list(request.ignoreChanges),
        }
        return response


def _record(worker_image: str = "registry/worker:v1", scheduler_image: str = "registry/scheduler:v1",
            **args: Any) -> Recording:
    pools = worker_pools(stack_config("production").gpu_pools)
    _OptionsMonitor.options = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(components.review.plan, "RecordingMonitor", _OptionsMonitor)
        return run(
            lambda: DaskCluster(
                "dask", DaskClusterArgs(image=worker_image, scheduler_image=scheduler_image,
                                        pools=pools, runtime_service_account_email=EMAIL, **args)
            )
        )


@pytest.fixture(scope="module")
def recording() -> Recording:
    return _record()


def test_every_resource_is_a_child_of_the_component(recording: Recording) -> None:
    (component,) = [r for r in recording.resources if r.type == TYPE]
    custom = [r for r in recording.resources if r.custom]
    assert custom and children_of(recording, component.name) == custom


def test_operator_chart_is_installed_in_a_namespace_of_its_own(recording: Recording) -> None:
    release = named(recording, RELEASE, "dask-operator").props
    assert release["chart"] == "dask-kubernetes-operator"
    assert release["repositoryOpts"] == {"repo": "https://helm.dask.org"}
    assert release["version"] == version("dask-kubernetes")
    # Not `compute`: the gpu-scheduler may delete Deployments there (queued pools), and RBAC cannot exclude the
    # operator's own Deployment by label, only by namespace.
    assert release["namespace"] == contract.DASK_OPERATOR_NAMESPACE != contract.COMPUTE_NAMESPACE
    namespaces = {r.props["metadata"]["name"]: r.props["metadata"]["labels"]
                  for r in of_type(recording, "kubernetes:core/v1:Namespace")}
    assert namespaces[contract.DASK_OPERATOR_NAMESPACE]["pod-security.kubernetes.io/enforce"] == "restricted"
    policies = of_type(recording, "kubernetes:networking.k8s.io/v1:NetworkPolicy")
    denied = {r.props["metadata"]["namespace"] for r in policies
              if r.props["metadata"]["name"] == "default-deny-ingress"}
    assert contract.DASK_OPERATOR_NAMESPACE in denied


def test_custom_resources_wait_for_the_release_and_only_the_scheduler_revision_replaces(
        recording: Recording) -> None:
    release_urn = named(recording, RELEASE, "dask-operator").urn
    crs = of_type(recording, DASK_CLUSTER) + of_type(recording, WORKER_GROUP) + of_type(recording, AUTOSCALER)
    assert len(crs) == 1 + 2 + 1 + 1  # the cluster, two GPU groups, the CPU group, the autoscaler
    for resource in crs:
        assert release_urn in _OptionsMonitor.options[resource.name]["depends_on"], resource.name
    (cluster,) = of_type(recording, DASK_CLUSTER)
    assert _OptionsMonitor.options[cluster.name]["replace_on_changes"] == ["spec.scheduler.metadata"]
    assert _OptionsMonitor.options[cluster.name]["delete_before_replace"] is True
    label = contract.DASK_SCHEDULER_REVISION_LABEL
    revision = cluster.props["spec"]["scheduler"]["metadata"]["labels"][label]
    for group in of_type(recording, WORKER_GROUP):  # updated in place; their replicas are the gpu-scheduler's
        options = _OptionsMonitor.options[group.name]
        # ... but replaced with the cluster, which the operator makes their owner
        assert (options["replace_on_changes"], options["delete_before_replace"]) == (["metadata.labels"], True)
        assert group.props["metadata"]["labels"][label] == revision
        assert options["ignore_changes"] == ["spec.worker.replicas"]
    (autoscaler,) = of_type(recording, AUTOSCALER)
    assert _OptionsMonitor.options[autoscaler.name]["replace_on_changes"] == ["metadata.labels", "spec"]
    assert autoscaler.props["metadata"]["labels"][label] == revision


def _kube_objects(api: FakeKubeApi) -> set[tuple[str, str, str]]:
    return {key for key in api.objects if key[0] in (dask_operator.CLUSTER_KIND, dask_operator.WORKER_GROUP_KIND,
                                                     dask_operator.AUTOSCALER_KIND)}


def test_a_scheduler_revision_deploy_replaces_the_groups_and_autoscaler_the_cluster_owns(
        recording: Recording) -> None:
    """A Dask or Python bump (with new images, as every deploy has) on a running stack: the cluster is deleted
    first, Kubernetes collects the groups and the autoscaler the operator adopted, and the same update makes all
    of them afresh, each owned by the new cluster, instead of failing to update groups that are gone."""
    api = FakeKubeApi()
    first = deploy(api, {}, recording.resources)
    assert first.error is None
    declared = _kube_objects(api)
    assert len(declared) == 1 + 3 + 1
    digest = "@sha256:" + "c" * 64
    bump = _record("registry/worker:v2" + digest, "registry/scheduler:v2" + digest, scheduler_python="3.12")
    second = deploy(api, first.state, bump.resources)
    assert second.error is None, second.steps
    assert _kube_objects(api) == declared
    cluster_uid = api.get((dask_operator.CLUSTER_KIND, contract.COMPUTE_NAMESPACE, contract.DASK_CLUSTER_NAME))[
        "metadata"]["uid"]
    for key in declared - {(dask_operator.CLUSTER_KIND, contract.COMPUTE_NAMESPACE, contract.DASK_CLUSTER_NAME)}:
        (owner,) = api.get(key)["metadata"]["ownerReferences"]
        assert owner["uid"] == cluster_uid, key
    assert {name for step, name in second.steps if step == "replace"} == {
        r.name for r in [*of_type(bump, DASK_CLUSTER), *of_type(bump, WORKER_GROUP), *of_type(bump, AUTOSCALER)]}


def test_new_images_alone_update_the_groups_in_place_on_the_fake_api(recording: Recording) -> None:
    api = FakeKubeApi()
    first = deploy(api, {}, recording.resources)
    uids = {key: api.get(key)["metadata"]["uid"] for key in _kube_objects(api)}
    digest = "@sha256:" + "d" * 64
    images = _record("registry/worker:v2" + digest, "registry/scheduler:v2" + digest)
    second = deploy(api, first.state, images.resources)
    assert second.error is None
    assert {step for step, _ in second.steps} == {"update"}
    assert {key: api.get(key)["metadata"]["uid"] for key in _kube_objects(api)} == uids  # the same objects


def _changed_paths(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [p for key in sorted(set(old) | set(new))
                for p in _changed_paths(old.get(key), new.get(key), f"{path}.{key}" if path else key)]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [p for i, (a, b) in enumerate(zip(old, new, strict=True)) for p in _changed_paths(a, b, f"{path}[{i}]")]
    return [] if old == new else [path]


def test_new_image_digests_update_the_cluster_in_place_and_mark_no_template_changed(recording: Recording) -> None:
    """A deploy changes both images' digests: the DaskCluster changes nowhere its replace_on_changes looks, so the
    scheduler and the workers keep running; each group's template digest stays, so only the images tell the
    gpu-scheduler which workers to roll."""
    digest = "@sha256:" + "b" * 64
    after = _record("registry/worker:v2" + digest, "registry/scheduler:v2" + digest)
    (old_cluster,), (new_cluster,) = of_type(recording, DASK_CLUSTER), of_type(after, DASK_CLUSTER)
    changed = _changed_paths(old_cluster.props, new_cluster.props)
    assert changed == ["spec.scheduler.spec.containers[0].image", "spec.worker.spec.containers[0].image"]
    replace_on = tuple(_OptionsMonitor.options[new_cluster.name]["replace_on_changes"])
    assert not [path for path in changed if path.startswith(replace_on)]
    before_groups, after_groups = ({r.name: r for r in of_type(rec, WORKER_GROUP)} for rec in (recording, after))
    assert set(after_groups) == set(before_groups)  # the same objects, updated: no second group, no gap
    for name, new_group in after_groups.items():
        old_group = before_groups[name]
        assert _changed_paths(old_group.props, new_group.props) == ["spec.worker.spec.containers[0].image"]
        annotations = new_group.props["spec"]["worker"]["metadata"]["annotations"]
        assert annotations[contract.DASK_WORKER_TEMPLATE_ANNOTATION]


def test_a_new_dask_or_python_version_replaces_the_cluster(recording: Recording) -> None:
    import runtime.manifests.dask as manifests

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifests, "version", lambda package: "2099.1.0")
        new_dask = _record()
    new_python = _record(scheduler_python="3.12")
    label = contract.DASK_SCHEDULER_REVISION_LABEL
    (old_cluster,) = of_type(recording, DASK_CLUSTER)
    assert old_cluster.props["spec"]["scheduler"]["metadata"]["labels"][label].startswith(
        f"dask-{version('distributed')}-py311-")  # docker/scheduler.Dockerfile's base
    for after, start in ((new_dask, "dask-2099.1.0-py311-"), (new_python, f"dask-{version('distributed')}-py312-")):
        (new_cluster,) = of_type(after, DASK_CLUSTER)
        assert new_cluster.props["spec"]["scheduler"]["metadata"]["labels"][label].startswith(start)
        assert _changed_paths(old_cluster.props, new_cluster.props) == [f"spec.scheduler.metadata.labels.{label}"]


def test_cluster_has_a_cpu_scheduler_and_the_a100_pool_as_default_group(recording: Recording) -> None:
    (cluster,) = of_type(recording, DASK_CLUSTER)
    assert cluster.props["metadata"]["name"] == contract.DASK_CLUSTER_NAME
    assert cluster.props["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    (scheduler,) = cluster.props["spec"]["scheduler"]["spec"]["containers"]
    assert contract.GPU_RESOURCE not in scheduler["resources"]["limits"]
    worker = cluster.props["spec"]["worker"]
    (container,) = worker["spec"]["containers"]
    assert container["image"] == "registry/worker:v1"
    assert container["resources"]["limits"][contract.GPU_RESOURCE] == "1"
    assert worker["spec"]["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-tesla-a100"
    assert worker["metadata"]["labels"][contract.DASK_POOL_LABEL] == "a100"


def test_other_pools_are_worker_groups_and_the_autoscaler_bounds_the_primary(recording: Recording) -> None:
    groups = {r.props["metadata"]["name"]: r.props for r in of_type(recording, WORKER_GROUP)}
    assert set(groups) == {"gpu-dask-t4-spot", "gpu-dask-v100", "gpu-dask-cpu"}
    assert groups["gpu-dask-v100"]["spec"]["worker"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu": "true", "cloud.google.com/gke-accelerator": "nvidia-tesla-v100",
    }  # fmt: skip
    (autoscaler,) = of_type(recording, AUTOSCALER)
    assert autoscaler.props["spec"] == {"cluster": contract.DASK_CLUSTER_NAME, "minimum": 0, "maximum": 16}


def test_an_always_up_cpu_worker_runs_what_needs_no_gpu(recording: Recording) -> None:
    [cpu] = [r.props for r in of_type(recording, WORKER_GROUP) if r.props["metadata"]["name"] == "gpu-dask-cpu"]
    worker = cpu["spec"]["worker"]
    assert worker["replicas"] == 1 and worker["metadata"]["labels"][contract.DASK_POOL_LABEL] == contract.CPU_POOL
    pod = worker["spec"]
    [container] = pod["containers"]
    assert contract.GPU_RESOURCE not in container["resources"]["limits"]
    assert "nodeSelector" not in pod and "tolerations" not in pod  # the system nodes: never a GPU node
    command = container["args"]
    assert command[command.index("--resources") + 1] == f"{contract.DASK_CPU_RESOURCE}=1"
    assert {"name": "GPURT_DEVICE", "value": "cpu"} in container["env"]
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_workers_impersonate_the_runtime_account(recording: Recording) -> None:
    (account,) = of_type(recording, "kubernetes:core/v1:ServiceAccount")
    assert account.props["metadata"]["name"] == contract.RUNTIME_SERVICE_ACCOUNT.k8s_service_account
    assert account.props["metadata"]["annotations"] == {"iam.gke.io/gcp-service-account": EMAIL}


def test_compute_namespace_is_locked_down(recording: Recording) -> None:
    [namespace] = [r for r in of_type(recording, "kubernetes:core/v1:Namespace")
                   if r.props["metadata"]["name"] == contract.COMPUTE_NAMESPACE]
    assert namespace.props["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policy_type = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
    policies = {r.props["metadata"]["name"] for r in of_type(recording, policy_type)}
    assert "default-deny-ingress" in policies


def test_outputs_name_the_scheduler_address_and_worker_groups() -> None:
    outputs: dict[str, Any] = {}

    def program() -> None:
        pools = worker_pools(stack_config("staging").gpu_pools)
        cluster = DaskCluster("dask", DaskClusterArgs(image="w:1", scheduler_image="s:1", pools=pools,
                                                      runtime_service_account_email=EMAIL))
        cluster.scheduler_address.apply(lambda value: outputs.setdefault("address", value))
        cluster.worker_groups.apply(lambda value: outputs.setdefault("groups", value))

    run(program)
    assert outputs["address"] == contract.DASK_SCHEDULER_ADDRESS
    primary = stack_config("staging").gpu_pools[0].name
    assert outputs["groups"][primary] == f"{contract.DASK_CLUSTER_NAME}-default"


def test_staging_time_shared_workers_request_disk_that_fits_the_boot_disk() -> None:
    """Four workers time-share each staging T4 node; their scratch must fit the node's 100 GB boot disk."""
    from components.dask import worker_pools
    from runtime.manifests import dask as manifests
    from tests.components.infra import stack_config

    [pool] = stack_config("staging").gpu_pools
    [spec] = worker_pools([pool])
    worker = manifests.build_worker_spec(spec, "img")["spec"]
    [container] = [c for c in worker["containers"] if c["name"] == "worker"]
    request = container["resources"]["requests"]["ephemeral-storage"]
    assert container["resources"]["limits"]["ephemeral-storage"] == request
    volumes = {v["name"]: v["emptyDir"]["sizeLimit"] for v in worker["volumes"]}
    gib = {name: int(size.removesuffix("Gi")) for name, size in volumes.items()}
    assert int(request.removesuffix("Gi")) == gib["scratch"] + gib["tmp"]  # the request covers both volumes

    # GKE's documented reservation for a 100 GB boot disk: min(50, 6 + 35, 100) = 41 GiB for the system and
    # 10 GiB eviction threshold, leaving 49 GiB to pods; the images take IMAGE_RESERVE_GIB of that.
    assert pool.disk_size_gb == 100 and pool.workers_per_node == 4
    assert manifests.pod_disk_gib(100) == 49
    assert pool.workers_per_node * int(request.removesuffix("Gi")) <= 49 - manifests.IMAGE_RESERVE_GIB
    assert gib["scratch"] >= manifests.MIN_SCRATCH_GIB


def test_a_boot_disk_too_small_for_its_workers_names_the_pool() -> None:
    from components.dask import worker_pools
    from tests.components.infra import stack_config

    [pool] = stack_config("staging").gpu_pools
    small = pool.model_copy(update={"disk_size_gb": 50})
    with pytest.raises(ValueError, match=r"gpuPools\[t4-spot\].diskSizeGb: a 50 GB boot disk leaves .* GiB of "
                                         r"scratch for each of 4 workers"):
        worker_pools([small])


def test_the_operators_crds_are_the_locked_packages_applied_before_the_operator(recording: Recording) -> None:
    """Helm never upgrades a chart's crds/: the program applies the locked dask-kubernetes package's own CRDs
    (so a bump in uv.lock upgrades them), the release skips them and waits for them."""
    from importlib.resources import files

    import yaml

    from runtime.manifests.helm_values import OPERATOR_CRD_DIR

    crds = {r.props["metadata"]["name"]: r for r in of_type(recording, CRD)}
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # 900 KB of schemas
    parsed = [yaml.load(f.read_text(), Loader=loader)
              for f in (files("dask_kubernetes") / OPERATOR_CRD_DIR).iterdir() if f.name.endswith(".yaml")]
    shipped = {crd["metadata"]["name"]: crd for crd in parsed}
    assert set(crds) == set(shipped) == {f"{plural}.{dask_operator.GROUP}" for plural in (
        "daskclusters", "daskworkergroups", "daskautoscalers", "daskjobs")}
    for name, resource in crds.items():
        assert resource.props["spec"] == shipped[name]["spec"]  # the package's schema, unchanged
        assert resource.props["metadata"]["annotations"]["pulumi.com/patchForce"] == "true"
    release = named(recording, RELEASE, "dask-operator")
    assert release.props["skipCrds"] is True
    assert {crd.urn for crd in crds.values()} <= set(_OptionsMonitor.options[release.name]["depends_on"])


def test_the_crds_are_parsed_once_per_process_and_each_caller_gets_its_own_copy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A render reads the CRDs twice and the tests render dozens of times: the 900 KB of YAML is parsed once (a
    second of CPU each time it was not), and no caller's change to its copy reaches the next one."""
    import yaml

    from runtime.manifests.helm_values import dask_operator_crds

    parse = yaml.load
    parsed: list[object] = []
    monkeypatch.setattr(yaml, "load", lambda *args, **kwargs: parsed.append(args) or parse(*args, **kwargs))
    first = dask_operator_crds()
    parses = len(parsed)  # none when an earlier test of this process parsed them already
    first[0]["metadata"]["name"] = "changed"
    first[0]["spec"]["versions"].clear()
    second = dask_operator_crds()

    assert len(parsed) == parses
    assert second[0]["metadata"]["name"] != "changed" and second[0]["spec"]["versions"]
    assert [crd["metadata"]["name"] for crd in second[1:]] == [crd["metadata"]["name"] for crd in first[1:]]


def test_the_dask_scheduler_has_a_disruption_budget_in_compute(recording: Recording) -> None:
    (budget,) = of_type(recording, "kubernetes:policy/v1:PodDisruptionBudget")
    assert budget.props["metadata"]["namespace"] == contract.COMPUTE_NAMESPACE
    assert budget.props["spec"]["maxUnavailable"] == 0
