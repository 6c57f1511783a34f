"""NVIDIA DCGM exporter on every GPU node: the GPU utilization, temperature, memory and ECC series.

On GKE with managed drivers the NVIDIA libraries live on the host under ``/home/kubernetes/bin/nvidia``;
the exporter mounts them and reads the GPUs directly. It must not claim ``nvidia.com/gpu`` (that would
take the GPU away from the workers), so it needs privileged access to see the devices: the one
container of this project that is privileged, in the one namespace (``monitoring``) that allows it, and
it says so through ``contract.POLICY_EXCEPTION_ANNOTATION``.
"""

from __future__ import annotations

from typing import Final

from runtime.manifests.common import Manifest, Resources, gpu_toleration, metadata
from runtime.protocol import contract

# By digest, as the project's own images are: a tag on nvcr.io can be pushed again. The digest is the one nodes
# report for this tag (a kubelet's status.images lists it as the tag's repo digest); check it, and read the
# digest of a new tag the same way, with `crane digest nvcr.io/nvidia/k8s/dcgm-exporter:<tag>`.
DEFAULT_IMAGE: Final = ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"
                        "@sha256:3d4e0dfa5fc4d7d12689d29fc6b56cd6c610750e8d187a393882e341fbba6c12")
NAME: Final = contract.DCGM_EXPORTER_JOB
POD_LABELS: Final = {"app": NAME}
PORT_NAME: Final = "metrics"
COUNTERS_CONFIGMAP: Final = f"{NAME}-counters"
COUNTERS_DIR: Final = "/etc/dcgm-exporter"
GKE_NVIDIA_HOST_DIR: Final = "/home/kubernetes/bin/nvidia"
# The kubelet's pod-resources socket lets the exporter label each GPU series with the pod using it.
POD_RESOURCES_DIR: Final = "/var/lib/kubelet/pod-resources"
RESOURCES: Final = Resources(cpu_request="100m", memory_request="256Mi", cpu_limit="500m", memory_limit="512Mi")
# `<policy rule id>: <reason>`, the format the policy pack reads from contract.POLICY_EXCEPTION_ANNOTATION.
POLICY_EXCEPTION: Final = (
    "containers-non-root: runs privileged as root to read GPUs it does not claim "
    "(claiming nvidia.com/gpu would take them from the Dask workers)"
)

# The series this project alerts and draws on (name, Prometheus type, help). Profiling (DCGM_FI_PROF_*)
# counters are left out: on shared GPUs they need exclusive profiling access.
COUNTERS: Final = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
)


def counters_csv() -> str:
    """The exporter's collectors file: one ``name, type, help`` line per series."""
    return "".join(f"{name}, {kind}, {help_text}\n" for name, kind, help_text in COUNTERS)


def build_counters_configmap() -> Manifest:
    """The ConfigMap holding the collectors file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(COUNTERS_CONFIGMAP, contract.MONITORING_NAMESPACE),
        "data": {"counters.csv": counters_csv()},
    }


def _host_dir(name: str, path: str) -> Manifest:
    return {"name": name, "hostPath": {"path": path, "type": "Directory"}}


def build_daemonset(image: str = DEFAULT_IMAGE) -> Manifest:
    """The exporter DaemonSet, on GPU nodes only (GKE's accelerator label), tolerating the GPU taint."""
    health = {"httpGet": {"path": "/health", "port": PORT_NAME}, "periodSeconds": 15, "timeoutSeconds": 5}
    container = {
        "name": NAME,
        "image": image,
        "args": ["-f", f"{COUNTERS_DIR}/counters.csv"],
        "ports": [{"name": PORT_NAME, "containerPort": contract.DCGM_EXPORTER_PORT, "protocol": "TCP"}],
        "env": [
            {"name": "DCGM_EXPORTER_LISTEN", "value": f":{contract.DCGM_EXPORTER_PORT}"},
            {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
            {"name": "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE", "value": "device-name"},
            {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"},
        ],
        "resources": RESOURCES.to_manifest(),
        "securityContext": {"privileged": True, "runAsUser": 0},
        "readinessProbe": health,
        "livenessProbe": {**health, "initialDelaySeconds": 30},
        "volumeMounts": [
            {"name": "nvidia", "mountPath": "/usr/local/nvidia", "readOnly": True},
            {"name": "pod-resources", "mountPath": POD_RESOURCES_DIR, "readOnly": True},
            {"name": "counters", "mountPath": COUNTERS_DIR, "readOnly": True},
        ],
    }
    accelerator_present = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]}
            ]
        }
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": metadata(NAME, contract.MONITORING_NAMESPACE, POD_LABELS),
        "spec": {
            "selector": {"matchLabels": dict(POD_LABELS)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {
                    "labels": {**contract.COMMON_LABELS, **POD_LABELS},
                    "annotations": {contract.POLICY_EXCEPTION_ANNOTATION: POLICY_EXCEPTION},
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "affinity": {"nodeAffinity": accelerator_present},
                    "tolerations": [gpu_toleration()],
                    "containers": [container],
                    "volumes": [
                        _host_dir("nvidia", GKE_NVIDIA_HOST_DIR),
                        _host_dir("pod-resources", POD_RESOURCES_DIR),
                        {"name": "counters", "configMap": {"name": COUNTERS_CONFIGMAP}},
                    ],
                },
            },
        },
    }


def build_service() -> Manifest:
    """The ``dcgm-exporter`` Service: the scrape target, named as the GPU runbooks' port-forward expects."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(NAME, contract.MONITORING_NAMESPACE, POD_LABELS),
        "spec": {
            "type": "ClusterIP",
            "selector": dict(POD_LABELS),
            "ports": [
                {
                    "name": PORT_NAME,
                    "port": contract.DCGM_EXPORTER_PORT,
                    "targetPort": PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }
