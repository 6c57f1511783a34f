"""Let the Dask scheduler forget finished spans, which it otherwise keeps for as long as it runs.

Dask's scheduler groups tasks into spans (``distributed.spans``). Tasks submitted without a span of
their own go to a "default" span, and a new default span starts whenever the previous one has no
unfinished task left, which for this scheduler (one job per slot, the cluster idle between jobs) is
nearly every job. Spans are never removed, and each keeps the TaskGroups it saw alive after the
scheduler itself forgot them (dask/distributed#7977, open): about 1.8 kB per job (tracemalloc), some
13 MB of resident memory per 10,000 jobs in the process of the Dask scheduler: on the local platform then
the gpu-scheduler's (it has a process of its own now), in the cloud the Dask scheduler's pod.

``forget_finished_spans`` runs on the Dask scheduler (``Client.run_on_scheduler``) and drops every span
tree none of whose TaskGroups the scheduler still knows, once it has been finished for ``SPAN_GRACE_S``:
a worker reports a task's metrics against its span with its next heartbeat, and the scheduler looks the
span up by id then. A heartbeat later still (a worker stalled past the grace) must not fail: Dask closes
a worker whose heartbeat raises, and its lookup raises ``KeyError`` for a removed span. So the spans
extension's heartbeat is wrapped, once, to drop metrics of spans it no longer knows
(``_forgiving_heartbeat``). A span tree with no TaskGroup yet is never removed: nothing says when it
finished.
"""

from __future__ import annotations

import time
from typing import Any, Final

# How long a finished span is kept (seconds): well beyond a worker's heartbeat interval (a few seconds
# even on a large cluster), which may still report metrics against it. What stays is the spans of the
# last grace + period seconds of jobs, so both are kept short.
SPAN_GRACE_S: Final = 30.0
# How often each replica asks the Dask scheduler to forget finished spans (seconds): one small RPC.
PRUNE_PERIOD_S: Final = 15.0


def _forgiving_heartbeat(spans: Any) -> None:
    """Make ``spans.heartbeat`` drop a worker's metrics of spans removed here instead of raising (once)."""
    heartbeat = spans.heartbeat
    if getattr(heartbeat, "forgiving", False):
        return

    def forgiving(ws: Any, data: dict[tuple[Any, ...], float]) -> None:
        heartbeat(ws, {key: value for key, value in data.items() if key[1] in spans.spans})

    forgiving.forgiving = True  # type: ignore[attr-defined]
    spans.heartbeat = forgiving


def _forget_metadata_seen() -> None:
    """Empty the set of span metadata Dask has seen, which it keeps for every job for as long as it runs.

    ``Span._metadata_seen`` is one set for the whole class, not one per span: every graph a client submits
    adds the ``id`` of its metadata, and nothing removes it. A soak showed the set's table growing as a
    +2 MB step of resident memory near 34,600 jobs (tracemalloc: ``distributed/spans.py:178``). The set
    only stops one metadata object being added twice to a span; after it is emptied, the worst case is a
    span listing a collection twice in its metadata (the dashboard's), nothing the platform reads.
    """
    from distributed.spans import Span

    seen = getattr(Span, "_metadata_seen", None)
    if isinstance(seen, set):
        seen.clear()


def forget_finished_spans(dask_scheduler: Any, grace_s: float = SPAN_GRACE_S) -> int:
    """Remove the span trees of the Dask scheduler whose TaskGroups are all forgotten; returns how many spans."""
    spans = dask_scheduler.extensions.get("spans")
    if spans is None:
        return 0
    _forget_metadata_seen()
    live = {id(group) for group in dask_scheduler.task_groups.values()}
    cutoff = time.time() - grace_s
    gone: list[Any] = []
    for root in list(spans.root_spans):
        tree = list(root.traverse_spans())
        groups = [group for span in tree for group in span.groups]
        if not groups:
            continue  # no task yet: nothing says when it finished
        if any(id(group) in live for group in groups):
            continue  # the scheduler still has tasks of it (or may add some)
        if any(group.stop > cutoff for group in groups):
            continue  # finished too recently: a heartbeat may still name it
        gone.extend(tree)
    if not gone:
        return 0
    _forgiving_heartbeat(spans)
    dead = {id(span) for span in gone}
    spans.root_spans[:] = [span for span in spans.root_spans if id(span) not in dead]
    for span in gone:
        spans.spans.pop(span.id, None)
    for index in (spans.spans_search_by_name, spans.spans_search_by_tag):
        for key in list(index):
            kept = [span for span in index[key] if id(span) not in dead]
            if kept:
                index[key] = kept
            else:
                del index[key]
    return len(gone)
