"""Clients of a running platform: the scheduler's HTTP API and Pub/Sub job submission."""

from runtime.client.api import ApiClient, ApiError, JobState, Pool
from runtime.client.target import Target, resolve_target

__all__ = ["ApiClient", "ApiError", "JobState", "Pool", "Target", "resolve_target"]
