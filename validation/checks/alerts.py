"""Alert rules are loaded: ClusterRules of managed Prometheus in the cluster, or (locally) the rules pass promtool."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from validation.adapters.kube import KubeApi
from validation.runner import Check, CheckFailed, CheckSkipped

# Managed Service for Prometheus' cluster-wide rules (the Monitoring component deploys them).
CLUSTER_RULES = ("monitoring.googleapis.com", "v1", "clusterrules")
# promtool parses a few dozen rules in well under a second; this only guards against a hung binary.
PROMTOOL_TIMEOUT_S = 60.0


def _default_rules() -> str:
    from runtime.manifests.alerts import render_rules_yaml

    return render_rules_yaml()


def alert_names(rules_yaml: str) -> set[str]:
    """Alert names of a rules file (``groups[].rules[].alert``)."""
    document = yaml.safe_load(rules_yaml) or {}
    return {rule["alert"] for group in document.get("groups", []) for rule in group.get("rules", []) if "alert" in rule}


def rules_in_cluster(kube: KubeApi, render: Callable[[], str] = _default_rules) -> Check:
    """Every alert the project renders is present in the cluster's ClusterRules."""

    def run() -> str:
        expected = alert_names(render())
        objects = kube.list_custom_objects(*CLUSTER_RULES[:2], None, CLUSTER_RULES[2])
        loaded = {rule["alert"] for obj in objects for group in obj.get("spec", {}).get("groups", [])
                  for rule in group.get("rules", []) if "alert" in rule}
        missing = sorted(expected - loaded)
        if missing:
            raise CheckFailed(f"{len(missing)} alert(s) not loaded as ClusterRules: {', '.join(missing)}",
                              "deploy the monitoring component (pulumi up)")
        return f"{len(expected)} alerts loaded from {len(objects)} ClusterRules object(s)"

    return Check("alerts.loaded", run)


def rules_pass_promtool(render: Callable[[], str] = _default_rules, promtool: str = "promtool") -> Check:
    """The rendered rules are valid for Prometheus (``promtool check rules``)."""

    def run() -> str:
        binary = shutil.which(promtool)
        if binary is None:
            raise CheckSkipped(f"{promtool} is not installed (Debian package prometheus; `make system-deps`)")
        rules = render()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "gpu-runtime-rules.yaml"
            path.write_text(rules)
            proc = subprocess.run([binary, "check", "rules", str(path)], capture_output=True, text=True,
                                  timeout=PROMTOOL_TIMEOUT_S, check=False)
        if proc.returncode != 0:
            raise CheckFailed(f"promtool rejects the rules: {(proc.stderr or proc.stdout).strip()[:400]}",
                              "fix runtime/manifests/alerts (promtool check rules shows the line)")
        return f"{len(alert_names(rules))} alerts pass promtool check rules"

    return Check("alerts.loaded", run)
