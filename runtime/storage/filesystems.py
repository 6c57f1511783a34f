"""fsspec URLs to filesystems, with one correction for Cloud Storage API emulators.

gcsfs's default filesystem (``ExtendedGcsFileSystem``) asks the Storage Control gRPC API for a bucket's
layout before reading or writing it. A GCS emulator (fake-gcs-server, the one in the tests) serves only
the JSON API, so that lookup fails after a minute of retries, and, because a failed lookup is not
remembered, again on every call. Where ``STORAGE_EMULATOR_HOST`` names an emulator, ``gs://`` URLs
therefore get gcsfs's JSON-API filesystem, the one the extended filesystem falls back to anyway.
"""

from __future__ import annotations

import os
from typing import Any, Final

import fsspec
from fsspec.spec import AbstractFileSystem

GCS_EMULATOR_ENV: Final = "STORAGE_EMULATOR_HOST"
GCS_PROTOCOLS: Final = frozenset({"gs", "gcs"})
# Values of STORAGE_EMULATOR_HOST that mean "no emulator" to the Google libraries.
_NO_EMULATOR: Final = frozenset({"", "default"})


def url_to_fs(url: str, **storage_options: Any) -> tuple[AbstractFileSystem, str]:
    """The filesystem of ``url`` and the path within it, as ``fsspec.core.url_to_fs``."""
    protocol, _ = fsspec.core.split_protocol(url)
    if protocol in GCS_PROTOCOLS and os.environ.get(GCS_EMULATOR_ENV, "") not in _NO_EMULATOR:
        from gcsfs.core import GCSFileSystem

        fs = GCSFileSystem(**storage_options)  # the endpoint comes from STORAGE_EMULATOR_HOST
        return fs, fs._strip_protocol(url)
    return fsspec.core.url_to_fs(url, **storage_options)
