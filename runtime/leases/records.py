"""The leader lease as a record, the store it lives behind, and the store's in-memory stand-in.

The elector (``runtime.leases.elector``) writes the record through a ``LeaseStore`` (the Kubernetes API in the
cloud: ``runtime.leases.kubernetes``; a file on one machine: ``runtime.leases.file``); ``gpurt leader`` and
validation read it through the same interface without the elector. Writes are optimistic: each carries the
version it read.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease's spec the election uses, plus the store's version for optimistic writes."""

    holder: str | None
    duration_s: float
    acquired_at: datetime | None = None
    renewed_at: datetime | None = None
    transitions: int = 0
    version: str | None = None


class LeaseConflict(Exception):
    """Someone else wrote the lease since we read it (HTTP 409 / create of an existing lease)."""


class LeaseStore(Protocol):
    """Reads and writes the one lease record."""

    def get(self) -> LeaseRecord | None:
        """The current record, or ``None`` if the lease does not exist."""
        ...

    def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the lease; raises ``LeaseConflict`` if it exists."""
        ...

    def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the lease if its version is still ``record.version``; raises ``LeaseConflict`` otherwise."""
        ...


class InMemoryLeaseStore:
    """A lease in a dict with compare-and-swap semantics: the single-process stand-in for the API server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._record: LeaseRecord | None = None
        self._counter = 0

    def get(self) -> LeaseRecord | None:
        """The current record."""
        with self._lock:
            return self._record

    def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the record unless it exists."""
        with self._lock:
            if self._record is not None:
                raise LeaseConflict("lease exists")
            return self._store(record)

    def update(self, record: LeaseRecord) -> LeaseRecord:
        """Compare-and-swap on the version."""
        with self._lock:
            if self._record is None or self._record.version != record.version:
                raise LeaseConflict("lease changed since it was read")
            return self._store(record)

    def _store(self, record: LeaseRecord) -> LeaseRecord:
        self._counter += 1
        self._record = replace(record, version=str(self._counter))
        return self._record
