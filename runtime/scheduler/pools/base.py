"""What a pool backend offers the API and the reconciler."""

from __future__ import annotations

from typing import Final, Protocol

from pydantic import BaseModel, Field

# One pool cannot ask for more workers than this: a typo must not order a thousand GPUs.
MAX_POOL_WORKERS: Final = 256


class ProvisioningRequestInfo(BaseModel):
    """One ProvisioningRequest of a queued pool, as GKE's conditions on it say."""

    name: str
    workers: int = Field(ge=0, description="Workers the request asks capacity for.")
    state: str = Field(description="pending, accepted, provisioned, booking-expired, capacity-revoked or failed.")
    consumed: bool = Field(False, description="Its workers were added to the pool (on its capacity).")
    reason: str = Field("", description="The reason of the condition behind the state, e.g. QuotaExceeded.")
    message: str = ""
    conditions: dict[str, str] = Field(default_factory=dict,
                                       description="Every condition type and its status (True, False, Unknown).")


class ProvisioningInfo(BaseModel):
    """How a queued pool gets its nodes: its requests, and the failure that stopped it asking for more."""

    requests: list[ProvisioningRequestInfo] = Field(default_factory=list)
    failure: str | None = Field(None, description="The last request GKE failed (name: reason: message); no new "
                                "request is made until the pool is scaled or stopped again.")
    max_run_duration_s: int | None = Field(None, description="maxRunDurationSeconds of new requests (None: GKE's "
                                           "default, 7 days).")


class PoolInfo(BaseModel):
    """One pool as the API reports it."""

    id: str
    desired: int = Field(ge=0, description="Workers the pool should have.")
    workers: int = Field(ge=0, description="Workers running now.")
    gpus_per_worker: int = Field(0, ge=0)
    status: str = Field(description="running, scaling or stopped.")
    provisioning: ProvisioningInfo | None = Field(None, description="Queued pools only: the ProvisioningRequests "
                                                  "its nodes come through.")


class PoolError(RuntimeError):
    """A pool operation failed; the message says why."""


class PoolNotFound(PoolError):
    """No pool has that id."""


class PoolBackend(Protocol):
    """Lists, scales and stops pools; ``reconcile`` brings them back to their desired size (leader only)."""

    def list(self) -> list[PoolInfo]:
        """Every pool."""
        ...

    def scale(self, pool_id: str, workers: int) -> PoolInfo:
        """Set the desired workers of ``pool_id``."""
        ...

    def stop(self, pool_id: str) -> PoolInfo:
        """Evict ``pool_id``: desired 0, its workers retire (their tasks move or are retried)."""
        ...

    def stop_all(self) -> list[PoolInfo]:
        """Evict every pool."""
        ...

    def reconcile(self) -> None:
        """Bring each pool to its desired size (restart lost workers, rehydrate after a restart)."""
        ...

    def gpu_slots(self) -> int:
        """Jobs the pools can run at once when at their desired size (sizes the consumer's flow control)."""
        ...


def pool_status(desired: int, workers: int) -> str:
    """``stopped`` at zero, ``running`` at size, ``scaling`` in between."""
    if desired == 0 and workers == 0:
        return "stopped"
    return "running" if desired == workers else "scaling"


def check_workers(workers: int) -> None:
    """Reject a worker count outside 0..MAX_POOL_WORKERS."""
    if not 0 <= workers <= MAX_POOL_WORKERS:
        raise PoolError(f"workers must be between 0 and {MAX_POOL_WORKERS}, not {workers}")
