"""Tasks handed to Dask sealed: a worker that cannot import a task's function fails that task, not itself.

Dask pickles a task's function by reference (its module and name). A worker unpickles each task as it reads
it from its stream to the Dask scheduler, and if that raises (the function's module is missing from the
worker's image: an image built without it, or the two images of a rollout out of step) the stream's handler
dies and the worker closes, with every task it held; under a nanny or on Kubernetes it restarts and is
handed the same task again. Seen with distributed 2026.7.1: ``ModuleNotFoundError`` in
``Worker.handle_scheduler``, then the worker process gone.

So the gpu-scheduler submits every task as ``pickle.loads(sealed)``: a function every Python has, and bytes.
Loading those bytes *makes the call* (pickle's REDUCE opcode calls a callable with its arguments; it is how
any object is rebuilt), so the task's real function is imported inside the running task, where a missing
module is that task's exception and the worker goes on. The bytes are made here, from the gpu-scheduler's
own functions and arguments, and read only by the platform's own workers.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any


class _Call:
    """Pickles as the call ``function(*args, **kwargs)`` itself: unpickling it returns the call's result."""

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._function = function
        self._args = args
        self._kwargs = kwargs

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        # functools.partial, itself pickled by reference to the standard library, carries the keywords
        target = functools.partial(self._function, **self._kwargs) if self._kwargs else self._function
        return target, self._args


def seal(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> bytes:
    """The bytes whose ``pickle.loads`` runs ``function(*args, **kwargs)`` and returns its result."""
    return pickle.dumps(_Call(function, args, kwargs), protocol=pickle.HIGHEST_PROTOCOL)


def submit_sealed(client: Any, function: Callable[..., Any], /, *args: Any, key: str,
                  resources: dict[str, int] | None = None, **kwargs: Any) -> Any:
    """``client.submit(function, *args, **kwargs)`` as a sealed task (``pure=False``: a job may run again)."""
    return client.submit(pickle.loads, seal(function, *args, **kwargs), key=key, pure=False, resources=resources)
