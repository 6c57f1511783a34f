"""Execution backends: where a validated job runs (a Dask cluster, or a Vertex AI custom job)."""

from scheduler.backends.base import Execution, ExecutionBackend

__all__ = ["Execution", "ExecutionBackend"]
