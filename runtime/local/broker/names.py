"""Resource names: ``projects/{project}/topics/{id}`` and ``projects/{project}/subscriptions/{id}``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from runtime.local.broker.errors import invalid_argument

# Pub/Sub's documented id rule: 3-255 characters, a letter first, then letters, digits and - _ . ~ + %;
# ids starting with "goog" are reserved.
_ID = re.compile(r"[A-Za-z][A-Za-z0-9\-_.~+%]{2,254}")
_NAME = re.compile(r"projects/(?P<project>[^/]+)/(?P<kind>topics|subscriptions|snapshots)/(?P<id>[^/]+)")
# What a subscription's topic becomes once the topic is deleted (the real service's sentinel).
DELETED_TOPIC = "_deleted-topic_"


@dataclass(frozen=True)
class ResourceName:
    """A parsed, validated resource name."""

    project: str
    kind: str
    id: str

    @property
    def path(self) -> str:
        """The full resource name."""
        return f"projects/{self.project}/{self.kind}/{self.id}"


def parse(name: str, kind: str) -> ResourceName:
    """Parse ``name`` as a resource of ``kind`` ("topics", "subscriptions", "snapshots") or refuse it."""
    match = _NAME.fullmatch(name)
    if match is None or match["kind"] != kind or not _ID.fullmatch(match["id"]) or match["id"].startswith("goog"):
        raise invalid_argument(f"Invalid [{kind}] name: (name={name})")
    return ResourceName(match["project"], kind, match["id"])


def parse_project(project: str) -> str:
    """Parse ``projects/{project}`` (the parent of list requests) and return the project id."""
    match = re.fullmatch(r"projects/([^/]+)", project)
    if match is None:
        raise invalid_argument(f"Invalid [projects] name: (name={project})")
    return match[1]
