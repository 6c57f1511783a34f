"""Pure builders of the platform's Kubernetes objects: plain dicts in, plain dicts out, no Pulumi.

The Pulumi components (``components.dask``, ``components.scheduler_workload``, ``components.monitoring``)
apply what these build; tests validate them against Kubernetes and CRD schemas without a cluster; the
validation helper renders the alert rules with ``alerts.render_rules_yaml``.

Modules: ``common`` (labels, security contexts, resources), ``scheduler`` (gpu-scheduler workload),
``network`` (NetworkPolicies), ``dask`` (DaskCluster, worker groups, autoscaler), ``provisioning`` (the
PodTemplate and ProvisioningRequest of a queued pool, which the gpu-scheduler creates at run time),
``dcgm`` (GPU exporter), ``monitors`` (ClusterPodMonitorings), ``alerts`` (rule groups, ClusterRules),
``alert_timescale`` (those rule groups with shorter windows, for the local platform and its alert drill),
``dashboard`` (Grafana).
"""
