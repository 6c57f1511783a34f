"""What can go wrong for a user of the client, as exceptions a notebook can catch by kind."""

from __future__ import annotations

from collections.abc import Iterable

from runtime.protocol.messages import JobResult


class ClientError(RuntimeError):
    """Base of the client's own errors (a job's outcome is a ``JobError``)."""


class PlatformNotRunning(ClientError):
    """No platform answers where the client looked; the message says how to start or name one."""


class ClientClosed(ClientError):
    """The client was closed: it takes no new work and its futures get no more results."""


class JobError(Exception):
    """A job ended without a result: ``job_id``, the platform's ``message``, and the full ``result``."""

    def __init__(self, result: JobResult) -> None:
        self.result = result
        self.job_id = result.job_id
        self.message = result.error.message if result.error else result.status.value
        self.kind = result.error.kind.value if result.error else None
        super().__init__(f"job {self.job_id} {result.status.value}: {self.message}")


class JobRejected(JobError):
    """The platform refused the request (invalid parameters, unknown type); it never ran."""


class JobFailed(JobError):
    """The job ran and failed (permanently, or on its last delivery attempt)."""


class JobCancelled(JobError):
    """The job was cancelled before it finished."""


class JobTimeout(TimeoutError):
    """No result arrived in time for ``pending`` jobs; they may still finish (the platform keeps running them)."""

    def __init__(self, pending: Iterable[str], timeout_s: float | None) -> None:
        self.pending = sorted(pending)
        shown = ", ".join(self.pending[:10]) + (f" and {len(self.pending) - 10} more" if len(self.pending) > 10 else "")
        after = f" after {timeout_s:g} s" if timeout_s is not None else ""
        super().__init__(f"no result{after} for {len(self.pending)} job(s): {shown}")
