"""How a job can fail, as exceptions the scheduler maps onto the protocol's error kinds."""

from __future__ import annotations


class JobFailure(Exception):
    """Base of job failures raised by kernels and entry points."""


class TransientJobError(JobFailure):
    """Worth retrying: a lost worker, a CUDA out-of-memory after every smaller chunk, a timeout."""


class PermanentJobError(JobFailure):
    """Retrying cannot help: the job itself is wrong in a way validation could not see."""


class JobCancelled(JobFailure):
    """The job stopped cooperatively because it was asked to."""
