"""The job protocol: what travels on ``gpu-job-request`` and ``gpu-job-result``, as pydantic models.

A request's ``params`` are validated by the model of its ``type`` (``kernels.params``). Message
attributes repeat ``job_id`` and ``type`` so subscribers can filter without parsing the body.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from itertools import islice
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from kernels.params import BY_VALUE, Integer, JobParams, JobType, NoopParams, below_floor, parse_params
from runtime.protocol import strict_json

MAX_MESSAGE_BYTES: Final = 1_000_000  # well under Pub/Sub's 10 MB so a request never fails to publish
MAX_TIMEOUT_S: Final = 24 * 3600.0
# Shortest timeout a request may ask for: a job's round trip to a worker and back takes tens of milliseconds,
# more under load, and a timeout below it would expire on every delivery and end in the dead-letter queue.
MIN_TIMEOUT_S: Final = 1.0
DEFAULT_TIMEOUT_S: Final = 1800.0  # the job-completion SLO: p95 < 30 minutes (docs/architecture.md)
# Anchored for pydantic (whose regex engine's `$` is the end of the text); Python's `$` also matches before a
# final newline, so code outside the models checks ids with ``is_job_id``, a full match, and never `re.match`.
JOB_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_JOB_ID: Final = re.compile(JOB_ID_PATTERN)
SESSION_ID_MAX_LENGTH: Final = 128
# A rejection names this many of its validation errors and counts the rest: a body of many bad list entries
# or unknown keys would otherwise answer with one error each, megabytes of text for a one-megabyte body.
MAX_REPORTED_ERRORS: Final = 10
# Longest error message a result carries (characters); the rest is cut and counted. A worker's exception or
# a rejection quoting its input stays readable and a result stays far below the publish limit.
MAX_ERROR_CHARS: Final = 2_000
# Largest result message (bytes of JSON). A pack publishes up to eight results in one Publish, which Pub/Sub
# caps at 10 MB; a result over this is replaced by a short permanent failure (``runtime.scheduler.outcome``).
MAX_RESULT_BYTES: Final = 1_000_000
# What the retired `priority` field accepted: older clients' requests that carry it stay valid.
_RETIRED_PRIORITY: Final = TypeAdapter(Annotated[Integer, Strict(), Field(ge=0, le=9)])


def is_job_id(value: object) -> bool:
    """Whether ``value`` is a job id the protocol accepts: the whole string, a final newline included."""
    return isinstance(value, str) and _JOB_ID.fullmatch(value) is not None


class JobStatus(StrEnum):
    """Terminal outcome of a job; every status is final for its job id."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


class ErrorKind(StrEnum):
    """Why a job did not succeed, which decides whether it is retried."""

    INVALID = "invalid"          # bad JSON, unknown type, bad params: never retried
    CONFLICT = "conflict"        # the job id already finished another computation: never run, never stored
    TRANSIENT = "transient"      # worker lost, CUDA OOM, timeout: redelivered
    PERMANENT = "permanent"      # the job itself cannot succeed
    CANCELLED = "cancelled"


def _printable(value: str | None) -> str | None:
    # A session id is echoed on results, listed by the API and written into logs and terminals: a NUL, an
    # escape sequence or a line break there would cut or forge what people read (issue 43).
    if value is not None and not value.isprintable():
        raise ValueError("must be printable text (no control characters, escapes or line breaks)")
    return value


def _timeout_floor(value: float) -> float:
    if value < MIN_TIMEOUT_S:
        raise ValueError(below_floor(MIN_TIMEOUT_S, "a job's round trip to a worker takes longer, so it would time "
                                                    "out on every delivery"))
    return value


class JobRequest(BaseModel):
    """One job request. ``job_id`` is the client's idempotency key."""

    # Strict, as the params' models are (kernels.params): a number is a JSON number, a name a string.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)

    job_id: str = Field(pattern=JOB_ID_PATTERN)
    type: Annotated[JobType, BY_VALUE]
    params: JobParams = Field(default=None, validate_default=False)  # type: ignore[assignment]
    session_id: Annotated[str | None, AfterValidator(_printable)] = Field(
        None, max_length=SESSION_ID_MAX_LENGTH, description=(
            "The client's session, printable text: echoed on the result, and the key to list and collect a "
            "session's jobs (GET /jobs?session_id=, gpurt jobs list --session)."))
    timeout_s: Annotated[float, Field(le=MAX_TIMEOUT_S), AfterValidator(_timeout_floor)] = DEFAULT_TIMEOUT_S
    # Strict: "false" as a string would be true for a lax bool, and answer from the cache a request that opted out.
    cache: StrictBool = Field(True, description=(
        "Whether an earlier successful result of the same computation and kernel version may answer this request "
        "(docs/scheduler.md, \"Result cache\"); false runs it again."))

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_priority(cls, data: Any) -> Any:
        # `priority` left the protocol (docs/scheduler.md, "Priority"); an older client still sends it, so a value
        # the old protocol accepted is accepted and dropped, and any other is refused as it always was.
        if not isinstance(data, dict) or "priority" not in data:
            return data
        try:
            _RETIRED_PRIORITY.validate_python(data["priority"])
        except ValidationError as exc:
            raise ValueError(f"{_describe(exc, 'priority')} (priority no longer orders jobs and may be left out)") \
                from None
        return {key: value for key, value in data.items() if key != "priority"}

    @model_validator(mode="before")
    @classmethod
    def _params_for_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and "type" in data:
            try:
                job_type = JobType(data["type"])
            except ValueError:
                return data  # the field validator reports the unknown type
            params = data.get("params")
            if not isinstance(params, BaseModel):
                try:
                    params = parse_params(job_type, params)
                except ValidationError as exc:  # name the field as the request has it: params.<field>
                    raise ValueError(_describe(exc, "params")) from None
                data = {**data, "params": params}
        return data

    @model_validator(mode="after")
    def _can_finish_in_time(self) -> JobRequest:
        # A job that takes at least its timeout times out on every delivery alike: refused now, never retried.
        if isinstance(self.params, NoopParams) and self.params.sleep_s >= self.timeout_s:
            raise ValueError(f"params.sleep_s ({self.params.sleep_s:g} s) must be shorter than timeout_s "
                             f"({self.timeout_s:g} s): the job would time out on every delivery")
        return self

    def attributes(self) -> dict[str, str]:
        """Pub/Sub message attributes for this request."""
        return {"job_id": self.job_id, "type": self.type.value}

    def to_message(self, extra_attributes: Mapping[str, str] | None = None) -> tuple[bytes, dict[str, str]]:
        """This request as it goes on the wire: its JSON body and attributes, plus ``extra_attributes``.

        The one encoding of a request, for the scheduler's tools, the drills and the users' client alike.
        Unset optional fields (``None``) are left out rather than sent as ``null``: ``parse_request`` reads
        both the same, and the body stays as small as the user wrote it.
        """
        # ``cache`` only when it opts out: a body stays as small as the user wrote it, and the same as before the
        # field existed.
        body = self.model_dump_json(exclude_none=True, exclude=None if not self.cache else {"cache"})
        return body.encode(), {**self.attributes(), **(extra_attributes or {})}

    def digest(self) -> str:
        """The ``request_digest`` a result answering this request carries: of the body ``to_message`` encodes."""
        return request_digest(self.to_message()[0])

    def computation_digest(self) -> str:
        """SHA-256 (hex) of what this request computes: its type and validated params, as canonical JSON.

        Two bodies that differ only in spelling (key order, whitespace, ``100`` for ``100.0``, a default left
        out) or in what does not change the answer (``session_id``, ``timeout_s``) compute the same; the result
        of one may answer the other. Any other difference is another computation (docs/scheduler.md, "What a
        result's digest proves").
        """
        params = self.params.model_dump(mode="json") if self.params is not None else None
        canonical = json.dumps({"type": self.type.value, "params": params}, sort_keys=True, separators=(",", ":"),
                               allow_nan=False)
        return hashlib.sha256(canonical.encode()).hexdigest()


def request_digest(data: bytes) -> str:
    """SHA-256 of a request body, in hex: what a result names as the request it answers (``JobResult.answering``)."""
    return hashlib.sha256(data).hexdigest()


class JobError(BaseModel):
    """The error of a result that did not succeed; ``message`` is cut to ``MAX_ERROR_CHARS`` characters."""

    kind: ErrorKind
    message: str

    @field_validator("message")
    @classmethod
    def _bounded(cls, message: str) -> str:
        return cut(message, MAX_ERROR_CHARS)


def cut(text: str, limit: int) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters)"


class JobMetrics(BaseModel):
    """Measurements of one run: seconds from publish to start, run time, device, throughput."""

    queue_wait_s: float | None = None
    run_s: float | None = None
    device: str | None = None
    paths_per_s: float | None = None
    backend: str | None = Field(None, description="Where it ran: dask (a GKE pool) or vertex (a custom job).")
    spilled_after_s: float | None = Field(None, description="Seconds it waited for a GKE GPU before it ran on "
                                          "Vertex AI instead (overflow); unset when it did not spill.")


class JobResult(BaseModel):
    """One job's outcome, published on ``gpu-job-result`` and kept in the result store."""

    model_config = ConfigDict(extra="forbid")

    job_id: str
    status: JobStatus
    type: JobType | None = None
    session_id: str | None = Field(None, description="The request's session, echoed back.")
    attempt: int = Field(1, ge=1)
    result: dict[str, Any] | None = None
    metrics: JobMetrics = Field(default_factory=JobMetrics)
    error: JobError | None = None
    artifacts: dict[str, str] = Field(default_factory=dict, description="Artifact name -> fsspec URL.")
    finished_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    request_digest: str | None = Field(None, description=(
        "SHA-256 (hex) of the request body this result answers: a client takes a result only when it names "
        "the body the client published (docs/scheduler.md, \"What a result's digest proves\")."))
    request_message_id: str | None = Field(None, description="The Pub/Sub message id of the request it answers.")
    computation_digest: str | None = Field(None, description=(
        "SHA-256 (hex) of the computation this result is the outcome of (``JobRequest.computation_digest``): "
        "a stored result answers a later request for its job id only when it names the same computation."))
    kernel_version: str | None = Field(None, description=(
        "The version of the kernels that computed a succeeded result (``kernels.version.KERNEL_VERSION``): the "
        "result cache answers only requests of the same version."))
    cached: bool = Field(False, description=(
        "True when this result was answered from the result cache: a copy of the earlier result ``cached_from``, "
        "not a new run (docs/scheduler.md, \"Result cache\")."))
    cached_from: str | None = Field(None, description="The job id whose stored result a cached result copies.")

    def attributes(self) -> dict[str, str]:
        """Pub/Sub message attributes for this result."""
        return {"job_id": self.job_id, "status": self.status.value}

    def answering(self, data: bytes, message_id: str | None) -> JobResult:
        """This result as the answer to the request message of body ``data`` and id ``message_id``."""
        return self.model_copy(update={"request_digest": request_digest(data), "request_message_id": message_id})


class InvalidRequest(ValueError):
    """A message that can never become a job; carries the best job_id it could find."""

    def __init__(self, message: str, job_id: str | None = None) -> None:
        super().__init__(message)
        self.job_id = job_id


def parse_request(data: bytes, defaults: Mapping[str, Any] | None = None) -> JobRequest:
    """Parse a request message body; raises ``InvalidRequest`` with a readable reason, and nothing else.

    Whatever the bytes (any size, nesting, number, encoding), the outcome is a request or an
    ``InvalidRequest``: the consumer acks those with a ``rejected`` result, so an exception of any other
    type here would be taken for an infrastructure failure and redelivered until dead-lettered.
    ``defaults`` fills the keys a body leaves out (``gpurt run`` names a job file's job by the file).
    """
    if len(data) > MAX_MESSAGE_BYTES:
        raise InvalidRequest(f"message is {len(data)} bytes, the limit is {MAX_MESSAGE_BYTES}")
    try:
        raw = strict_json.loads(data)
    except strict_json.JsonRejected as exc:
        raise InvalidRequest(str(exc)) from None
    job_id = raw.get("job_id") if isinstance(raw, dict) else None
    job_id = job_id if isinstance(job_id, str) else None
    if not isinstance(raw, dict):
        raise InvalidRequest("body must be a JSON object", job_id)
    try:
        return JobRequest.model_validate({**(defaults or {}), **raw})
    except ValidationError as exc:
        reason = _describe(exc)
    except ValueError as exc:
        reason = str(exc)
    # Raised outside the handler, so the rejection does not hold the pydantic error as its ``__context__``
    # (``from None`` only hides it): that error keeps each validator's ValueError with its traceback in
    # pydantic-core's own storage, which the garbage collector does not traverse (``gc.get_referents`` of a
    # ValidationError shows its traceback only), so a cycle through it was never freed (issue 43: 8 KB per
    # rejected request, 8 MB per 0.9 MB body).
    raise InvalidRequest(reason, job_id)


def _describe(exc: ValidationError, within: str = "") -> str:
    """``field.path: reason`` for each of the first ``MAX_REPORTED_ERRORS`` errors, and how many more there were;
    a validator's own ValueError keeps its message unprefixed."""
    parts = []
    for error in islice(exc.errors(include_url=False, include_input=False, include_context=True),
                        MAX_REPORTED_ERRORS):
        where = ".".join(str(p) for p in (within, *error["loc"]) if p != "")
        message = str(error["ctx"]["error"]) if error["type"] == "value_error" else error["msg"]
        parts.append(f"{where}: {message}" if where else message)
    if (more := exc.error_count() - MAX_REPORTED_ERRORS) > 0:
        parts.append(f"and {more:,} more error(s)")
    return "; ".join(parts)
