"""Shared test set-up: no test reaches a real cloud, and CUDA runs only where a GPU exists."""

from __future__ import annotations

import os

# Keep Google client libraries from looking for credentials or metadata servers.
os.environ.setdefault("GOOGLE_CLOUD_PROJECT", "gpurt-test")
os.environ.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
