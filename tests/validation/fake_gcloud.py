"""A stand-in for the gcloud CLI at the bootstrap's command seam: it answers the commands ``GcloudSetup`` runs as
the real CLI does, and fails where the real one fails, with the real one's message.

Rules it holds (each one the adapter relies on):

- A missing resource fails with the API's status code after the command group:
  ``ERROR: (gcloud.artifacts.repositories.describe) NOT_FOUND: Requested entity was not found.`` (gcloud's
  ``HttpException`` format; seen verbatim in GoogleCloudPlatform/database-migration-wave-orchestrator#10 for
  ``gcloud.source.repos.clone``). Only that means "missing".
- A call to a disabled API fails too, with ``PERMISSION_DENIED`` and the API's "has not been used in project ...
  before or it is disabled" (Google's SERVICE_DISABLED error, https://cloud.google.com/apis/design/errors): the
  resource may well exist.
- ``gcloud billing projects describe`` prints the project's ProjectBillingInfo
  (https://cloud.google.com/billing/docs/reference/rest/v1/ProjectBillingInfo); for a project without billing,
  ``billingEnabled`` (false) and ``billingAccountName`` (empty) are absent, since proto3's JSON mapping leaves out
  fields at their default (https://protobuf.dev/programming-guides/json/).
- ``gcloud compute regions describe`` and ``project-info describe`` print Compute's ``regions.get`` and
  ``projects.get`` resources (fixtures/gcp), each with ``quotas[]`` of {metric, limit, usage}.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from validation.adapters.bootstrap import CommandFailed

GCP = Path(__file__).parent / "fixtures" / "gcp"


@dataclass
class FakeGcloud:
    """The gcloud CLI over one project: its repositories, billing account, disabled APIs and Compute quotas."""

    project: str
    repositories: set[str] = field(default_factory=set)
    billing_account: str | None = "billingAccounts/01D4EE-079462-DFD6EC"
    disabled_apis: set[str] = field(default_factory=set)
    enabled_apis: set[str] = field(default_factory=lambda: {
        "serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com", "cloudbilling.googleapis.com",
        "artifactregistry.googleapis.com", "compute.googleapis.com"})
    region: dict = field(default_factory=lambda: json.loads((GCP / "region_us-central1.json").read_text()))
    compute_project: dict = field(default_factory=lambda: json.loads((GCP / "compute_project.json").read_text()))
    calls: list[list[str]] = field(default_factory=list)

    def __call__(self, args: Sequence[str], cwd: Path | None, stdin: str | None) -> str:
        self.calls.append(list(args))
        words: list[str] = []
        flags: dict[str, str] = {}
        rest = list(args[1:])
        while rest:  # every flag these commands take has a value: --format=json, --project P
            arg = rest.pop(0)
            if arg.startswith("--"):
                name, eq, value = arg[2:].partition("=")
                flags[name] = value if eq else rest.pop(0)
            else:
                words.append(arg)
        group = f"gcloud.{'.'.join(words[:3])}"
        if words[:2] == ["services", "list"]:
            return "".join(f"{api}\n" for api in sorted(self.enabled_apis - self.disabled_apis))
        if words[:3] == ["artifacts", "repositories", "describe"]:
            self._api("artifactregistry.googleapis.com", "Artifact Registry API", group)
            if words[3] not in self.repositories:
                self._fail(group, "NOT_FOUND: Requested entity was not found.")
            return f"projects/{self.project}/locations/{flags['location']}/repositories/{words[3]}\n"
        if words[:3] == ["billing", "projects", "describe"]:
            self._api("cloudbilling.googleapis.com", "Cloud Billing API", group)
            info = {"name": f"projects/{words[3]}/billingInfo", "projectId": words[3]}
            if self.billing_account:
                info |= {"billingAccountName": self.billing_account, "billingEnabled": True}
            return json.dumps(info, indent=2)
        if words[:3] == ["compute", "regions", "describe"]:
            self._api("compute.googleapis.com", "Compute Engine API", group)
            return json.dumps(self.region)
        if words[:3] == ["compute", "project-info", "describe"]:
            self._api("compute.googleapis.com", "Compute Engine API", group)
            return json.dumps(self.compute_project)
        raise AssertionError(f"the fake gcloud does not know {args}")

    def _api(self, service: str, title: str, group: str) -> None:
        if service in self.disabled_apis:
            self._fail(group, f"PERMISSION_DENIED: {title} has not been used in project 284716533902 before or it "
                              f"is disabled. Enable it by visiting https://console.developers.google.com/apis/api/"
                              f"{service}/overview?project=284716533902 then retry.")

    def _fail(self, group: str, message: str) -> None:
        raise CommandFailed(["gcloud"], f"ERROR: ({group}) {message}\n")
