"""The leader lease on the Kubernetes API: the Lease object the gpu-scheduler's replicas elect on in the cloud.

A ``LeaseStore`` over ``kubernetes.client.CoordinationV1Api``: the elector (``runtime.leases.elector``) writes
through it from the gpu-scheduler's pods, and ``gpurt leader`` reads and releases through it from an operator's
machine. The API server's resourceVersion gives the optimistic writes their conflict (HTTP 409).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from runtime.leases.elector import LEASE_DURATION_S
from runtime.leases.records import LeaseConflict, LeaseRecord
from runtime.protocol import contract


class KubernetesLeaseStore:
    """The Lease object ``name`` in ``namespace``, through ``kubernetes.client.CoordinationV1Api``."""

    def __init__(self, api: Any, namespace: str, name: str = contract.LEADER_LEASE_NAME) -> None:
        self._api = api
        self._namespace = namespace
        self._name = name

    def get(self) -> LeaseRecord | None:
        """Read the Lease; ``None`` on 404."""
        from kubernetes.client.exceptions import ApiException

        try:
            lease = self._api.read_namespaced_lease(self._name, self._namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        spec = lease.spec
        return LeaseRecord(
            holder=spec.holder_identity or None,
            duration_s=float(spec.lease_duration_seconds or LEASE_DURATION_S),
            acquired_at=spec.acquire_time,
            renewed_at=spec.renew_time,
            transitions=spec.lease_transitions or 0,
            version=lease.metadata.resource_version,
        )

    def create(self, record: LeaseRecord) -> LeaseRecord:
        """POST the Lease; 409 becomes ``LeaseConflict``."""
        return self._write(record, create=True)

    def update(self, record: LeaseRecord) -> LeaseRecord:
        """PUT the Lease with its resourceVersion; 409 becomes ``LeaseConflict``."""
        return self._write(record, create=False)

    def _write(self, record: LeaseRecord, *, create: bool) -> LeaseRecord:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=self._name, namespace=self._namespace,
                                         resource_version=None if create else record.version,
                                         labels=dict(contract.SCHEDULER_LABELS)),
            spec=client.V1LeaseSpec(
                holder_identity=record.holder or "",
                lease_duration_seconds=max(1, round(record.duration_s)),
                acquire_time=record.acquired_at,
                renew_time=record.renewed_at,
                lease_transitions=record.transitions,
            ),
        )
        try:
            if create:
                written = self._api.create_namespaced_lease(self._namespace, body)
            else:
                written = self._api.replace_namespaced_lease(self._name, self._namespace, body)
        except ApiException as exc:
            if exc.status == 409:
                raise LeaseConflict(exc.reason) from None
            raise
        return replace(record, version=written.metadata.resource_version)
