"""A leader lease in a JSON file, for scheduler replicas that share one machine (the local platform).

It is the Kubernetes Lease's stand-in with the same compare-and-swap contract: every write holds an
exclusive ``flock`` on a sibling lock file, re-reads the record, refuses a stale version, and lands
the new record with ``os.replace`` (readers never see half a file). Timing stays the elector's, so
the local replicas elect, renew and take over exactly as the pods do.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from runtime.leases.records import LeaseConflict, LeaseRecord

LOCK_SUFFIX: Final = ".lock"


class FileLeaseStore:
    """The lease record in ``path``; a ``LeaseStore`` safe across processes on one host."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def get(self) -> LeaseRecord | None:
        """The current record, or ``None`` when no candidate has created it yet."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return None
        return _decode(json.loads(text))

    def create(self, record: LeaseRecord) -> LeaseRecord:
        """Create the lease; ``LeaseConflict`` if another candidate already did."""
        with self._locked():
            if self.path.exists():
                raise LeaseConflict("lease exists")
            return self._write(record, version=1)

    def update(self, record: LeaseRecord) -> LeaseRecord:
        """Replace the lease if its version is still ``record.version``; ``LeaseConflict`` otherwise."""
        with self._locked():
            current = self.get()
            if current is None or current.version != record.version:
                raise LeaseConflict("lease changed since it was read")
            return self._write(record, version=int(current.version or 0) + 1)

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self.path)

    def _write(self, record: LeaseRecord, version: int) -> LeaseRecord:
        written = replace(record, version=str(version))
        write_atomically(self.path, json.dumps(_encode(written)))
        return written


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive ``flock`` on ``path``'s sibling lock file: one writer at a time across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + LOCK_SUFFIX), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if the holder dies mid-write
        yield
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str) -> None:
    """Land ``text`` in ``path`` with ``os.replace``: readers see the old file or the new one, never half."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _encode(record: LeaseRecord) -> dict[str, Any]:
    return {
        "holder": record.holder,
        "duration_s": record.duration_s,
        "acquired_at": record.acquired_at.isoformat() if record.acquired_at else None,
        "renewed_at": record.renewed_at.isoformat() if record.renewed_at else None,
        "transitions": record.transitions,
        "version": record.version,
    }


def _decode(data: dict[str, Any]) -> LeaseRecord:
    def stamp(key: str) -> datetime | None:
        value = data.get(key)
        return datetime.fromisoformat(value) if value else None

    return LeaseRecord(holder=data.get("holder"), duration_s=float(data["duration_s"]),
                       acquired_at=stamp("acquired_at"), renewed_at=stamp("renewed_at"),
                       transitions=int(data.get("transitions", 0)), version=data.get("version"))
