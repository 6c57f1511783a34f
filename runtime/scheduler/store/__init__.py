"""The result store: job results and artifacts under one fsspec URL (a folder locally, ``gs://`` in the cloud)."""

from runtime.scheduler.store.store import ResultStore, StoreError, StoreUnavailable

__all__ = ["ResultStore", "StoreError", "StoreUnavailable"]
