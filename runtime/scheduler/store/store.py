"""Job results and artifacts kept under an fsspec root.

Layout under the root URL::

    results/<job_id>.json          the terminal JobResult (the idempotency record of a job)
    artifacts/<job_id>/<name>      larger outputs (distributions, plots)
    published/<job_id>             marker: the result was published on gpu-job-result
    cancel/<job_id>                marker: cancellation was requested (seen by every replica), holding when
                                   (epoch seconds); it expires after ``CANCEL_MARKER_TTL_S``
    sessions/<session>/<job_id>    marker: the job was started for this session (the request's session_id)
    cache/<key>                    the result cache's index: the id of a job whose succeeded result answers
                                   the computation and kernel version of ``key`` (runtime.scheduler.result_cache)

Writes go to a temporary name and are then moved into place, so a reader never sees half a result on a
local disk; on object stores (gs://) a single-object upload is atomic already. Artifacts are written
before the result, so a result that exists always has its artifacts.

A store that cannot be reached, read or written raises ``StoreUnavailable``. A view made with
``waiting_out_outages`` hands each such failure to a handler (the scheduler's ``StoreHealth``), which
blocks until the store is back, and then tries the operation again: that is how a running job keeps its
result through an outage instead of giving its message back.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import os
import posixpath
import re
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Final, TypeVar
from urllib.parse import quote

from fsspec.spec import AbstractFileSystem

from runtime.protocol.contract import MESSAGE_RETENTION_S
from runtime.protocol.messages import JobResult, is_job_id
from runtime.storage.filesystems import url_to_fs

# Artifact names become object keys: keep them to one path segment of safe characters.
_ARTIFACT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# Folders a job writes to; the health probe writes to each, since one of them alone may be read-only.
_JOB_FOLDERS: Final = ("results", "published", "artifacts")

# Writes go through "<name>.<hex>.tmp" files (and the probe writes ".probe-<hex>.tmp" ones); a write that
# failed and could not remove its file leaves one in one of these places.
_TEMPORARY: Final = ".tmp"
# Where: each folder, and how many levels of subfolders below it (a job's artifact folder).
_TEMPORARY_PLACES: Final = (("results", 0), ("published", 0), ("artifacts", 1), ("cancel", 0), ("cache", 0))
# The sweep removes temporaries older than this (seconds): far beyond the milliseconds a write takes.
STALE_TEMPORARY_S: Final = 900.0
# A session's folder is its id, %-escaped, up to this length (a file name's limit is 255 bytes); longer, its hash.
_MAX_SESSION_KEY: Final = 128
# Folders remembered as existing, at most: the shared ones, and the artifact folder of each recent job
# (one per job, so remembering them all grew with every job the scheduler ran). Past it, the memory
# starts again: the next write to each folder asks the filesystem once more.
MAX_KNOWN_FOLDERS: Final = 256
# How long a cancel marker stands (seconds): as long as the request subscription keeps a message. A cancel may
# come before its job's request is received (it waits in the subscription, or is still being published), so a
# marker for a job no replica knows is kept; past this, no request it could stop is left, and the sweep
# removes it (issue 43: `DELETE /jobs/<any id>` left a marker for ever).
CANCEL_MARKER_TTL_S: Final = float(MESSAGE_RETENTION_S)

# A result cache key: a SHA-256 in hex (runtime.scheduler.result_cache.cache_key), so always one safe path segment.
_CACHE_KEY: Final = re.compile(r"[0-9a-f]{64}")

_T = TypeVar("_T")


class StoreError(RuntimeError):
    """The store could not be read or written (unreachable bucket, permissions, bad name)."""


class StoreUnavailable(StoreError):
    """The store itself failed (unreachable, read-only, full): trying again later may succeed.

    A bad job id or artifact name raises the plain ``StoreError``: no wait makes it valid.
    """


OutageHandler = Callable[[StoreUnavailable], None]


class ResultStore:
    """Results and artifacts of jobs under ``url``; safe to share between threads."""

    def __init__(self, url: str, fs: AbstractFileSystem | None = None, clock: Callable[[], float] = time.time) -> None:
        if fs is None:
            fs, root = url_to_fs(url)
        else:
            root = fs._strip_protocol(url)
        self.url = url.rstrip("/")
        self._fs: AbstractFileSystem = fs
        self._root = root.rstrip("/")
        self._atomic_rename = "file" in _protocols(fs)
        # Folders known to exist: a job's writes need not ask the filesystem again (set add is atomic).
        self._made_dirs: set[str] = set()
        self._on_outage: OutageHandler | None = None
        self._clock = clock  # wall-clock seconds: a cancel marker's time is read by every replica

    def waiting_out_outages(self, handler: OutageHandler) -> ResultStore:
        """This store, but every operation that fails with ``StoreUnavailable`` calls ``handler`` and tries again.

        ``handler`` returns once the store should work again, or raises to give up. The view shares this
        store's filesystem and folder cache.
        """
        view = copy.copy(self)
        view._on_outage = handler
        return view

    def probe(self) -> None:
        """Write and remove a small object in every folder a job writes to; raises ``StoreUnavailable`` if any fails."""
        for folder in _JOB_FOLDERS:
            path = f"{self._root}/{folder}/.probe-{uuid.uuid4().hex}{_TEMPORARY}"
            self._write(path, b"probe")
            try:
                self._fs.rm(path)
            except OSError as exc:
                raise StoreUnavailable(f"cannot remove {self._url_of(path)}: {exc}") from exc

    # --- results -----------------------------------------------------------------------------------

    def put(self, result: JobResult) -> None:
        """Store ``result`` as the job's terminal record (replacing an earlier one)."""
        data = result.model_dump_json().encode()
        self._riding(lambda: self._write(self._result_path(result.job_id), data))

    def get(self, job_id: str) -> JobResult | None:
        """The stored result of ``job_id``, or ``None`` if it has none."""
        path = self._result_path(job_id)
        data = self._riding(lambda: self._read(path))
        return None if data is None else JobResult.model_validate_json(data)

    def exists(self, job_id: str) -> bool:
        """Whether ``job_id`` has a stored result."""
        return self._riding(lambda: self._exists(self._result_path(job_id)))

    # --- publication marker ------------------------------------------------------------------------

    def mark_published(self, job_id: str) -> None:
        """Record that the stored result of ``job_id`` went out on the result topic."""
        path = self._marker_path(job_id)
        self._riding(lambda: self._write(path, b"", atomic=False))  # empty: nothing to see half-written

    def is_published(self, job_id: str) -> bool:
        """Whether the stored result of ``job_id`` was published."""
        return self._riding(lambda: self._exists(self._marker_path(job_id)))

    # --- cancellation marker ----------------------------------------------------------------------

    def request_cancel(self, job_id: str) -> None:
        """Record that ``job_id`` should stop (or never start), for whichever replica has it, for
        ``CANCEL_MARKER_TTL_S`` from now."""
        path = self._cancel_path(job_id)
        stamp = f"{self._clock():.3f}".encode()
        self._riding(lambda: self._write(path, stamp))

    def cancel_requested(self, job_id: str) -> bool:
        """Whether cancellation of ``job_id`` was requested less than ``CANCEL_MARKER_TTL_S`` ago."""
        path = self._cancel_path(job_id)
        stamp = self._riding(lambda: self._read(path))
        return stamp is not None and not self._expired(stamp)

    def sweep_cancel_markers(self) -> int:
        """Remove the cancel markers older than ``CANCEL_MARKER_TTL_S``; returns how many.

        One listing of ``cancel/`` and one read per marker: markers are written only by ``DELETE /jobs/{id}``
        (token holders) and live a week at most, so the folder stays small.
        """
        folder = f"{self._root}/cancel"
        try:
            paths = self._fs.ls(folder, detail=False)
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise StoreUnavailable(f"cannot list {self._url_of(folder)}: {exc}") from exc
        removed = 0
        for path in paths:
            if path.endswith(_TEMPORARY):
                continue  # a write under way (the temporary sweep takes a stale one)
            stamp = self._read(path)
            # Gone already (another replica's sweep was first) or not removable now: the next sweep tries.
            if stamp is not None and self._expired(stamp):
                with contextlib.suppress(OSError):
                    self._fs.rm(path)
                    removed += 1
        return removed

    def _expired(self, stamp: bytes) -> bool:
        # A marker without a readable time (an empty one, from before markers held it) counts as expired.
        try:
            requested_at = float(stamp)
        except ValueError:
            return True
        return not self._clock() - requested_at < CANCEL_MARKER_TTL_S

    # --- result cache index ------------------------------------------------------------------------

    def put_cache_entry(self, key: str, job_id: str) -> None:
        """Index ``job_id``'s stored result under the result cache's ``key`` (replacing an earlier entry)."""
        path = self._cache_path(key)
        data = _checked(job_id).encode()
        self._riding(lambda: self._write(path, data))

    def cached_job(self, key: str) -> str | None:
        """The job id indexed under the result cache's ``key``, or ``None`` when there is none (or it is no job id)."""
        path = self._cache_path(key)
        data = self._riding(lambda: self._read(path))
        if data is None:
            return None
        job_id = data.decode(errors="replace")
        return job_id if is_job_id(job_id) else None

    # --- sessions ----------------------------------------------------------------------------------

    def add_to_session(self, session_id: str, job_id: str) -> None:
        """Record that ``job_id`` was started for ``session_id`` (the request's), so the session can list it."""
        path = f"{self._session_dir(session_id)}/{_checked(job_id)}"
        self._riding(lambda: self._write(path, b"", atomic=False))  # empty: nothing to see half-written

    def session_jobs(self, session_id: str) -> list[str]:
        """The ids of the jobs started for ``session_id``, sorted; empty for a session the store never saw."""
        folder = self._session_dir(session_id)

        def listing() -> list[str]:
            try:
                # refresh: a cached listing (gcsfs keeps one) would miss the jobs started since
                names = self._fs.ls(folder, detail=False, refresh=True)
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise StoreUnavailable(f"cannot list {self._url_of(folder)}: {exc}") from exc
            return sorted({name for name in map(posixpath.basename, names) if is_job_id(name)})

        return self._riding(listing)

    # --- artifacts ---------------------------------------------------------------------------------

    def put_artifacts(self, job_id: str, artifacts: dict[str, bytes]) -> dict[str, str]:
        """Write ``artifacts`` of ``job_id``; returns name -> URL for the result's ``artifacts``."""
        urls: dict[str, str] = {}
        for name, data in artifacts.items():
            if not _ARTIFACT_NAME.fullmatch(name):
                raise StoreError(f"artifact name {name!r} is not a safe file name")
            path = posixpath.join(self._job_dir(job_id), name)
            self._riding(functools.partial(self._write, path, data))
            urls[name] = self._url_of(path)
        return urls

    def get_artifact(self, job_id: str, name: str) -> bytes:
        """The bytes of artifact ``name`` of ``job_id``."""
        if not _ARTIFACT_NAME.fullmatch(name):
            raise StoreError(f"artifact name {name!r} is not a safe file name")
        path = posixpath.join(self._job_dir(job_id), name)
        data = self._riding(lambda: self._read(path))
        if data is None:
            raise StoreError(f"cannot read {self._url_of(path)}: no such artifact")
        return data

    # --- internals ---------------------------------------------------------------------------------

    def _riding(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation``; with an outage handler, wait out each ``StoreUnavailable`` and run it again."""
        while True:
            try:
                return operation()
            except StoreUnavailable as exc:
                if self._on_outage is None:
                    raise
                self._on_outage(exc)

    def _read(self, path: str) -> bytes | None:
        try:
            with self._fs.open(path, "rb") as handle:
                return bytes(handle.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {self._url_of(path)}: {exc}") from exc

    def _result_path(self, job_id: str) -> str:
        return f"{self._root}/results/{_checked(job_id)}.json"

    def _marker_path(self, job_id: str) -> str:
        return f"{self._root}/published/{_checked(job_id)}"

    def _cancel_path(self, job_id: str) -> str:
        return f"{self._root}/cancel/{_checked(job_id)}"

    def _cache_path(self, key: str) -> str:
        if not _CACHE_KEY.fullmatch(key):
            raise StoreError(f"cache key {key!r} is not a SHA-256 in hex")
        return f"{self._root}/cache/{key}"

    def _session_dir(self, session_id: str) -> str:
        return f"{self._root}/sessions/{_session_key(session_id)}"

    def _job_dir(self, job_id: str) -> str:
        return f"{self._root}/artifacts/{_checked(job_id)}"

    def _url_of(self, path: str) -> str:
        return self.url + path[len(self._root):]

    def _exists(self, path: str) -> bool:
        try:
            return bool(self._fs.exists(path))
        except OSError as exc:
            raise StoreUnavailable(f"cannot reach {self._url_of(path)}: {exc}") from exc

    def _write(self, path: str, data: bytes, atomic: bool = True) -> None:
        folder = posixpath.dirname(path)
        try:
            try:
                self._write_in(folder, path, data, atomic)
            except FileNotFoundError:
                self._made_dirs.discard(folder)  # removed behind our back: make it again
                self._write_in(folder, path, data, atomic)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {self._url_of(path)}: {exc}") from exc

    def _write_in(self, folder: str, path: str, data: bytes, atomic: bool) -> None:
        if folder not in self._made_dirs:
            self._fs.makedirs(folder, exist_ok=True)
            if len(self._made_dirs) >= MAX_KNOWN_FOLDERS:
                self._made_dirs.clear()
            self._made_dirs.add(folder)
        if not (atomic and self._atomic_rename):
            self._fs.pipe_file(path, data)
            return
        staging = f"{path}.{uuid.uuid4().hex}{_TEMPORARY}"
        try:
            self._fs.pipe_file(staging, data)
            self._fs.mv(staging, path)
        except OSError:
            # A full disk creates the file and then fails to fill it: without this, every failed write
            # left a zero-byte temporary behind. Removing can fail too (the store is down): the sweep
            # takes what is left.
            with contextlib.suppress(OSError):
                self._fs.rm(staging)
            raise

    def sweep_temporary(self, older_than_s: float = STALE_TEMPORARY_S) -> int:
        """Remove temporary files older than ``older_than_s`` that failed writes left; returns how many.

        Only a store that writes through temporaries (a local folder) has any. A temporary lives for the
        milliseconds of one write, so one older than the bound belongs to a write that is over.
        """
        if not self._atomic_rename:
            return 0
        cutoff = time.time() - older_than_s
        removed = 0
        for path in _stale_temporaries(self._root, cutoff):
            # Gone already (another replica's sweep was first) or not removable now: the next sweep tries.
            with contextlib.suppress(OSError):
                self._fs.rm(path)
                removed += 1
        return removed


def _stale_temporaries(root: str, cutoff: float) -> Iterator[str]:
    """Temporary files under the local folder ``root`` last changed before ``cutoff``, read one entry at a time.

    Not ``fs.glob``: it lists every stored result and artifact folder at once, with a dict of details
    each, so every sweep took memory in proportion to the results stored (a step of several MB in the
    scheduler's resident memory every sweep of a soak).
    """
    for folder, depth in _TEMPORARY_PLACES:
        yield from _scan(posixpath.join(root, folder), depth, cutoff)


def _scan(folder: str, depth: int, cutoff: float) -> Iterator[str]:
    try:
        entries = os.scandir(folder)
    except FileNotFoundError:
        return  # nothing written there yet
    except OSError as exc:
        raise StoreUnavailable(f"cannot list {folder}: {exc}") from exc
    with entries:
        for entry in entries:
            if entry.name.endswith(_TEMPORARY) and entry.is_file(follow_symlinks=False):
                with contextlib.suppress(FileNotFoundError):  # renamed into place meanwhile
                    if entry.stat(follow_symlinks=False).st_mtime <= cutoff:
                        yield entry.path
            elif depth and entry.is_dir(follow_symlinks=False):
                yield from _scan(entry.path, depth - 1, cutoff)


def _checked(job_id: str) -> str:
    # Job ids are validated by the protocol already; this keeps a path from ever escaping the root.
    if not is_job_id(job_id):
        raise StoreError(f"job id {job_id!r} is not a valid job id")
    return job_id


def _session_key(session_id: str) -> str:
    """One path segment for any session id: the id %-escaped (dots and tildes too, so never ``..`` and never
    a hash's ``~`` prefix) when that is short enough, else ``~`` and its SHA-256."""
    quoted = quote(session_id, safe="").replace(".", "%2E").replace("~", "%7E")
    if 0 < len(quoted) <= _MAX_SESSION_KEY:
        return quoted
    return "~" + hashlib.sha256(session_id.encode()).hexdigest()


def _protocols(fs: AbstractFileSystem) -> set[str]:
    protocol = fs.protocol
    return set(protocol) if isinstance(protocol, tuple | list) else {protocol}
