"""``Client``: submit jobs to a running platform and get futures back.

The client finds its platform as the ``gpurt`` CLI does (explicit arguments, then ``GPURT_*`` and
``PUBSUB_EMULATOR_HOST`` variables, then the state ``gpurt local up`` leaves): the local platform with no
configuration at all, a Google Cloud project with ``project=`` (or ``GPURT_PROJECT``) and Application
Default Credentials or Workload Identity. It publishes requests to ``gpu-job-request`` (or to the topic of
the queue it is given, ``queue=``) and reads results through ONE private subscription of ``gpu-job-result``
(created on open, deleted on close, expiring by itself a day after a crashed process stops using it),
handing each result to the future of its job id: no other reader of results loses a message to it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gpurt.client.errors import ClientClosed, ClientError, PlatformNotRunning
from gpurt.client.futures import JobFuture, as_completed, gather, wait
from gpurt.client.jobs import Job
from gpurt.client.results import Result
from runtime.access.target import NO_PLATFORM, PROJECT_ENV, Target, resolve_target
from runtime.protocol.messages import DEFAULT_TIMEOUT_S, JobRequest, JobResult
from runtime.protocol.queues import DEFAULT_QUEUE, QueueSpec, request_topic

if TYPE_CHECKING:
    from runtime.access.control_api import JobState

# The client's private result subscriptions (``gpurt submit``'s too, which submits through the client), told apart
# in listings from those the Pub/Sub plumbing opens itself (gpu-job-result-cli-…: the drills, the soak benchmark).
SUBSCRIPTION_PREFIX: Final = "gpu-job-result-client-"
# How long an emulator may take to accept a connection before the platform counts as not running.
CONNECT_TIMEOUT_S: Final = 3.0

log = logging.getLogger(__name__)


class Client:
    """A connection to one platform; use as a context manager, or call ``close()`` when done."""

    def __init__(self, project: str | None = None, *, api_url: str | None = None, token: str | None = None,
                 emulator_host: str | None = None, local_dir: Path | None = None,
                 session_id: str | None = None, queue: str = DEFAULT_QUEUE, target: Target | None = None) -> None:
        """Resolve the platform (arguments win over the environment and the local state) and open the subscription.

        ``target`` is a platform resolved already, named in full with its broker tokens (a ``LocalPlatform``'s
        ``target()``: the demo and the benchmarks, whose platform's state is not where the environment points);
        it comes alone, without ``project``, ``api_url``, ``token``, ``emulator_host`` or ``local_dir``.

        ``queue`` names the request queue this client's jobs go to (a desk's, declared in stack config
        ``queues``; ``urgent`` for operators): its own topic, published to with the queue's own credentials
        (docs/python-api.md, "Queues"). Raises ``ValueError`` for a name no queue can have, and
        ``PlatformNotRunning`` with one line saying how to start or name a platform.
        """
        from runtime.access.transport import ResultSubscription, make_clients

        QueueSpec(queue)  # a name no queue can have is refused before anything is opened (QueueError)
        if target is not None and any(arg is not None for arg in (project, api_url, token, emulator_host, local_dir)):
            raise ValueError("target= names the platform in full: give it without project, api_url, token, "
                             "emulator_host or local_dir")
        found = target or resolve_target(api_url=api_url, token=token, project=project, local_dir=local_dir)
        emulator = emulator_host or found.emulator_host
        if emulator is None and target is None and not (project or os.environ.get(PROJECT_ENV)):
            from runtime.access.local_state import LOCAL_DIR_ENV, default_local_dir

            # a notebook's folder is often not the one `gpurt local up` ran in: say where we looked
            raise PlatformNotRunning(f"{NO_PLATFORM} (no local platform state in {local_dir or default_local_dir()}; "
                                     f"{LOCAL_DIR_ENV} names another folder)")
        if emulator is not None:
            _check_listening(emulator, found)
        if emulator != found.emulator_host:  # the state's broker tokens are for the state's broker alone
            found = dataclasses.replace(found, emulator_host=emulator, emulator_token=None, emulator_user_token=None,
                                        emulator_queue_tokens={})
        self.target = found
        self.queue = queue
        self.session_id = session_id or f"client-{uuid.uuid4().hex[:12]}"
        self._lock = threading.Lock()
        self._futures: dict[str, JobFuture] = {}
        self._closed = False
        self._clients = make_clients(self.target.project, emulator, self.target.emulator_user_token,
                                     publish_token=self.target.emulator_queue_tokens.get(queue))
        self._subscription = ResultSubscription(self._clients, self._on_result, prefix=SUBSCRIPTION_PREFIX)
        try:
            self._subscription.__enter__()
        except Exception as exc:
            self._clients.close()
            raise PlatformNotRunning(f"cannot subscribe to results in project {self.target.project}: {exc}") from None

    @property
    def subscription(self) -> str:
        """The private result subscription's full name (gone after ``close()``)."""
        return self._subscription.name

    # --- submitting --------------------------------------------------------------------------------

    def submit(self, job: Job | JobRequest, job_id: str | None = None, *,
               timeout_s: float | None = None, cache: bool = True) -> JobFuture:
        """Publish ``job`` and return its future; an id is generated unless given.

        Submitting an id this client already has returns its future; an id the platform has finished
        before is answered from its result store, not run again. A job that computes what an earlier successful
        one did, with the same kernels, is answered from the result cache (``Result.cached``) unless ``cache`` is
        False (docs/python-api.md, "Cached results").
        """
        return self._submit([self._request(job, job_id, timeout_s, cache)])[0]

    def map(self, jobs: Iterable[Job | JobRequest], job_ids: Sequence[str] | None = None, *,
            timeout_s: float | None = None, cache: bool = True) -> list[JobFuture]:
        """Submit many jobs in one batch of publishes; futures in the order of ``jobs``."""
        jobs = list(jobs)
        if job_ids is not None and len(job_ids) != len(jobs):
            raise ValueError(f"job_ids has {len(job_ids)} ids for {len(jobs)} jobs")
        ids: Sequence[str | None] = job_ids if job_ids is not None else [None] * len(jobs)
        return self._submit([self._request(job, i, timeout_s, cache) for job, i in zip(jobs, ids, strict=True)])

    async def submit_async(self, job: Job | JobRequest, job_id: str | None = None, *,
                           timeout_s: float | None = None, cache: bool = True) -> Result:
        """Submit ``job`` and await its ``Result`` without blocking the event loop."""
        import asyncio

        future = await asyncio.to_thread(self.submit, job, job_id, timeout_s=timeout_s, cache=cache)
        return await future

    def state(self, job_id: str) -> str | None:
        """Where the platform says ``job_id`` stands: ``running``, ``unfinished`` (started, no result yet) or its
        result's status; None while it has not started it (queued, or never published)."""
        from runtime.access.control_api import ApiClient, ApiError

        self._check_open()
        with ApiClient(self.target.api_url, self.target.token) as api:
            try:
                return api.get_job(job_id).state or "unknown"
            except ApiError as exc:
                if exc.status == 404:
                    return None
                raise ClientError(f"cannot look up job {job_id}: {exc}") from None

    def cancel(self, job_id: str) -> bool:
        """Ask the platform to stop ``job_id``; False if it had already finished. Its future then ends ``cancelled``."""
        from runtime.access.control_api import ApiClient, ApiError

        self._check_open()
        with ApiClient(self.target.api_url, self.target.token) as api:
            try:
                api.cancel_job(job_id)
            except ApiError as exc:
                if exc.status == 409:  # already finished: nothing to cancel, as concurrent.futures answers
                    return False
                raise ClientError(f"cannot cancel {job_id}: {exc}") from None
        return True

    # --- sessions ----------------------------------------------------------------------------------

    def jobs(self, session_id: str | None = None) -> dict[str, str]:
        """Every job labelled with a session (default: this client's ``session_id``), by job id, with its state:
        ``running``, ``unfinished`` (started, no result yet) or its result's status.

        A session is a label any publisher may put on a request, so the listing may hold jobs this client never
        sent (docs/python-api.md, "Sessions").
        """
        return {job.job_id: job.state or "unknown" for job in self._session(session_id)}

    def collect(self, job_ids: Iterable[str] | None = None, *, session_id: str | None = None) -> list[Result]:
        """The results of finished jobs, in job id order: by default of the requests this client sent; with
        ``job_ids``, of those jobs; with ``session_id``, of every job labelled with that session, anyone's.

        A result of this client's own request is taken only when it answers the body this client published
        (its ``request_digest``). A notebook that reopens its work without the old futures names the ids it
        kept (``collect(ids)``), or asks for the whole session knowing that anyone who may publish requests
        can add a job to it.
        """
        if isinstance(job_ids, str):  # a lone id would be read as its characters
            raise TypeError("collect takes a list of job ids; for a whole session: collect(session_id=...)")
        if job_ids is not None and session_id is not None:
            raise ValueError("collect takes job_ids or session_id, not both")
        if session_id is not None:
            return [Result(job.result) for job in self._session(session_id) if job.result is not None]
        self._check_open()
        with self._lock:
            own = dict(self._futures)
        wanted = sorted(set(job_ids) if job_ids is not None else own)
        found: list[Result] = []
        lookups: list[str] = []
        for job_id in wanted:
            future = own.get(job_id)
            if future is not None and future.done():
                found.append(future.outcome())
            elif job_id not in own or job_ids is not None:
                lookups.append(job_id)  # one of ours not yet answered is left to its future unless named
        for job_id, raw in self._stored_results(lookups).items():
            future = own.get(job_id)
            # one of ours counts only if the stored result answers our own body (not, say, an earlier one's)
            if future is None or future._complete(raw):
                found.append(Result(raw))
        return sorted(found, key=lambda result: result.job_id)

    def _stored_results(self, job_ids: Sequence[str]) -> dict[str, JobResult]:
        """The stored results of ``job_ids`` that have one (a running or unknown job has none yet)."""
        from runtime.access.control_api import ApiClient, ApiError

        if not job_ids:
            return {}
        results: dict[str, JobResult] = {}
        with ApiClient(self.target.api_url, self.target.token) as api:
            for job_id in job_ids:
                try:
                    state = api.get_job(job_id)
                except ApiError as exc:
                    if exc.status == 404:  # not started, or dropped: nothing to collect yet
                        continue
                    raise ClientError(f"cannot look up job {job_id}: {exc}") from None
                if state.result is not None:
                    results[job_id] = state.result
        return results

    def _session(self, session_id: str | None) -> list[JobState]:
        from runtime.access.control_api import ApiClient, ApiError

        self._check_open()
        session = session_id or self.session_id
        with ApiClient(self.target.api_url, self.target.token) as api:
            try:
                return api.session_jobs(session)
            except ApiError as exc:
                raise ClientError(f"cannot list the jobs of session {session}: {exc}") from None

    # --- waiting (the module's functions, for Dask-style client.gather) -----------------------------

    @staticmethod
    def gather(futures: Iterable[JobFuture], timeout: float | None = None, return_exceptions: bool = False,
               progress: bool | None = None) -> list[Any]:
        """See ``client.gather``."""
        return gather(futures, timeout, return_exceptions, progress)

    as_completed = staticmethod(as_completed)
    wait = staticmethod(wait)

    # --- lifecycle ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Delete the private subscription and release the connections; pending futures get ``ClientClosed``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pending = [f for f in self._futures.values() if not f.done()]
        self._subscription.__exit__(None, None, None)
        self._clients.close()
        for future in pending:
            future._abandon(ClientClosed(
                f"the client was closed before the result of {future.job_id} arrived; the job may still finish: "
                f"submit the same id from a new Client to get its result"))

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._futures)} jobs"
        return f"<Client project={self.target.project!r} via {self.target.source}: {state}>"

    # --- internals ---------------------------------------------------------------------------------

    def _request(self, job: Job | JobRequest, job_id: str | None, timeout_s: float | None,
                 cache: bool) -> JobRequest:
        if isinstance(job, JobRequest):
            # ``cache=False`` opts out; the default leaves a request's own ``cache`` as it is.
            changes = {k: v for k, v in (("job_id", job_id), ("timeout_s", timeout_s),
                                         ("cache", None if cache else False)) if v is not None}
            return JobRequest.model_validate({**job.model_dump(), **changes}) if changes else job
        if not isinstance(job, Job):
            raise TypeError(f"submit takes a job (EuropeanOption(...), OptionBook([...]), ...) or a JobRequest, "
                            f"not {type(job).__name__}")
        request = job.request(job_id or f"{job.job_type.value}-{uuid.uuid4().hex[:12]}", session_id=self.session_id,
                              timeout_s=timeout_s if timeout_s is not None else DEFAULT_TIMEOUT_S)
        return request if cache else request.model_copy(update={"cache": False})

    def _submit(self, requests: list[JobRequest]) -> list[JobFuture]:
        from runtime.access.transport import publish_requests

        futures: list[JobFuture] = []
        new: list[JobRequest] = []
        with self._lock:
            self._check_open()
            for request in requests:
                future = self._futures.get(request.job_id)
                if future is None:
                    # Registered before the publish: a fast result must find its future.
                    future = self._futures[request.job_id] = JobFuture(request.job_id, self, request.digest())
                    new.append(request)
                futures.append(future)
        if new:
            try:
                message_ids = publish_requests(self._clients, new, queue=self.queue)
            except Exception as exc:
                with self._lock:
                    for request in new:
                        self._futures.pop(request.job_id, None)
                raise ClientError(f"could not publish {len(new)} job(s) to {self._destination()}: "
                                  f"{_refusal(exc)}") from None
            for request, message_id in zip(new, message_ids, strict=True):
                self._futures[request.job_id].message_id = message_id
        return futures

    def _destination(self) -> str:
        """Where this client publishes, for an error message: the queue and its topic when not the default."""
        if self.queue == DEFAULT_QUEUE:
            return f"project {self.target.project}"
        return f"queue {self.queue} (topic {request_topic(self.queue)}) of project {self.target.project}"

    def _on_result(self, raw: JobResult) -> None:
        future = self._futures.get(raw.job_id)  # dict reads are atomic; other users' results find none
        if future is not None and not future._complete(raw):
            log.info("ignored a result for %s that answers no request of this client (digest %s)", raw.job_id,
                     raw.request_digest)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("this client is closed; open a new one: Client()")


def _refusal(exc: Exception) -> str:
    """Why Pub/Sub refused a publish, in words that say what to do for the refusals a queue name causes."""
    from google.api_core.exceptions import NotFound, PermissionDenied

    if isinstance(exc, NotFound):
        return f"no such topic: the platform declares no such queue (stack config `queues`) ({exc.message})"
    if isinstance(exc, PermissionDenied):
        return f"not allowed: only the queue's members may publish to it ({exc.message})"
    return str(exc)


def _check_listening(host_port: str, found: Target) -> None:
    """Fail in a second with how to start the platform, where gRPC would retry for a minute."""
    host, _, port = host_port.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S):
            return
    except (OSError, ValueError):
        pass
    raise PlatformNotRunning(f"the platform is not running: nothing answers at {host_port} (from {found.source}); "
                             f"start it with `gpurt local up`")
