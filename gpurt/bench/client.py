"""What the client costs: small jobs through the client, the CLI's path and the raw Pub/Sub client, in one run.

Each path publishes the same number of noop jobs to one running platform and waits for every result on a
private subscription of its own. Throughput is jobs over wall time, publish to last result; client CPU is
this process's CPU time (every thread: publisher, subscriber, parsing) over the same span, per job. Each
path creates and deletes its own result subscription inside its span. The platform's own processes are
not counted: they are the same for every path. The paths, measured in this order after a warm-up:

- raw: google-cloud-pubsub alone, a JSON body built by hand, results matched by their ``job_id`` attribute
  with no parsing: the floor any client pays;
- cli: what ``gpurt submit --wait`` does, per batch: each body through the scheduler's parser
  (``parse_request``, as the command reads a job file), then the ``Client`` (``map``, then ``gather``);
- client: typed jobs (``Noop()``) through ``Client.map`` then ``gather``.

The raw path stays raw on purpose: it is the floor the two others are compared with.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gpurt.client.futures import gather
from gpurt.client.jobs import Job, Noop
from gpurt.client.session import Client
from runtime.access.target import Target
from runtime.access.transport import (
    TEMP_SUBSCRIPTION_ACK_DEADLINE_S,
    TEMP_SUBSCRIPTION_TTL_S,
    PubSubClients,
    make_clients,
)
from runtime.protocol.contract import REQUEST_TOPIC, RESULT_TOPIC
from runtime.protocol.messages import JobRequest, parse_request

if TYPE_CHECKING:
    from google.cloud.pubsub_v1.subscriber.message import Message

PATHS: Final = ("raw", "cli", "client")
# Jobs run once before the measured paths, so that none of them pays for the platform's first jobs.
WARM_UP_JOBS: Final = 20
# The goal: the client costs at most this much more CPU per job than the raw client.
CLIENT_OVERHEAD_GOAL: Final = 0.10

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class PathFigures:
    """One path's run: ``jobs`` noop jobs, the wall time and this process's CPU time they took."""

    path: str
    jobs: int
    wall_s: float
    cpu_s: float

    @property
    def jobs_per_s(self) -> float:
        """Throughput, publish to last result."""
        return self.jobs / self.wall_s

    @property
    def cpu_ms_per_job(self) -> float:
        """Client CPU per job, in milliseconds."""
        return 1000 * self.cpu_s / self.jobs


def measure(target: Target, jobs: int, timeout_s: float, progress: Progress | None = None) -> list[PathFigures]:
    """Run ``jobs`` noop jobs through each path against ``target`` (an emulator or a project), raw first."""
    report = progress or (lambda path, done: None)
    clients = make_clients(target.project, target.emulator_host, target.emulator_token)
    try:
        with Client(target=target) as client:
            gather(client.map([Noop()] * WARM_UP_JOBS), timeout=timeout_s, progress=False)
        return [_timed("raw", jobs, lambda: _raw(clients, jobs, timeout_s, report)),
                _timed("cli", jobs, lambda: _cli(target, jobs, timeout_s, report)),
                _timed("client", jobs, lambda: _client(target, jobs, timeout_s, report))]
    finally:
        clients.close()


def _timed(path: str, jobs: int, run: Callable[[], None]) -> PathFigures:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return PathFigures(path, jobs, time.perf_counter() - wall, time.process_time() - cpu)


def _ids(path: str, jobs: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"bench-{path}-{run}-{i}" for i in range(jobs)]


def _raw(clients: PubSubClients, jobs: int, timeout_s: float, report: Progress) -> None:
    ids = _ids("raw", jobs)
    wanted, lock, arrived = set(ids), threading.Lock(), threading.Event()

    def on_message(message: Message) -> None:
        job_id = message.attributes.get("job_id")
        message.ack()
        with lock:
            if job_id in wanted:
                wanted.discard(job_id)
                report("raw", jobs - len(wanted))
                if not wanted:
                    arrived.set()

    name = clients.subscription(f"bench-raw-{uuid.uuid4().hex[:12]}")
    clients.subscriber.create_subscription(request={
        "name": name, "topic": clients.topic(RESULT_TOPIC), "ack_deadline_seconds": TEMP_SUBSCRIPTION_ACK_DEADLINE_S,
        "expiration_policy": {"ttl": {"seconds": TEMP_SUBSCRIPTION_TTL_S}}})
    streaming = clients.subscriber.subscribe(name, callback=on_message)
    try:
        topic = clients.topic(REQUEST_TOPIC)
        futures = [clients.publisher.publish(topic, json.dumps({"job_id": i, "type": "noop"}).encode(),
                                             job_id=i, type="noop") for i in ids]
        for future in futures:
            future.result(timeout=timeout_s)
        if not arrived.wait(timeout_s):
            raise TimeoutError(f"raw path: {len(wanted)} of {jobs} results missing after {timeout_s:g} s")
    finally:
        streaming.cancel()
        clients.subscriber.delete_subscription(request={"subscription": name})


def _cli(target: Target, jobs: int, timeout_s: float, report: Progress) -> None:
    bodies = [json.dumps({"job_id": i, "type": "noop"}).encode() for i in _ids("cli", jobs)]
    _through_client(target, "cli", lambda: [parse_request(body) for body in bodies], timeout_s, report)


def _client(target: Target, jobs: int, timeout_s: float, report: Progress) -> None:
    ids = _ids("client", jobs)
    _through_client(target, "client", lambda: [Noop()] * jobs, timeout_s, report, ids)


def _through_client(target: Target, path: str, jobs: Callable[[], Sequence[Job | JobRequest]], timeout_s: float,
                    report: Progress, job_ids: list[str] | None = None) -> None:
    """Make the jobs, submit them with ``Client.map`` and gather every result, counting arrivals for ``path``."""
    done = [0]
    lock = threading.Lock()

    def count(_: object) -> None:
        with lock:
            done[0] += 1
            report(path, done[0])

    # Opened and closed inside the measured span, as the raw path creates and deletes its subscription.
    with Client(target=target) as client:
        futures = client.map(jobs(), job_ids=job_ids)
        for future in futures:
            future.add_done_callback(count)
        gather(futures, timeout=timeout_s, progress=False)
