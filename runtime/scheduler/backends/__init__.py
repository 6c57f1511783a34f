"""Execution backends: where a validated job runs (a Dask cluster, or a Vertex AI custom job)."""

from runtime.scheduler.backends.base import Execution, ExecutionBackend

__all__ = ["Execution", "ExecutionBackend"]
