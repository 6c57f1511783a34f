"""Job files, read the one way ``gpurt run`` and ``gpurt submit`` share: through the scheduler's own parser.

A job file is a request message as a user writes it. It goes through ``runtime.protocol.messages.parse_request``,
the function the gpu-scheduler runs on every message it receives, so a file is held to the same rules
(strict JSON, size and nesting limits, the same models) and the same bad file gives the same one-line error
from either command.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpurt.cli.common import UserError

if TYPE_CHECKING:  # pydantic and the protocol are imported where used, so `gpurt --help` stays fast
    from runtime.protocol.messages import JobRequest

# Edits a job body (a JSON object) before it is validated: ``gpurt submit``'s --param, --job-id, --session...
Amend = Callable[[dict[str, Any]], None]


def read_job_file(path: Path) -> bytes:
    """The bytes of the job file ``path``; a ``UserError`` when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def parse_job(data: bytes, source: Path | None = None, defaults: Mapping[str, Any] | None = None,
              amend: Amend | None = None) -> JobRequest:
    """The request in ``data`` (read from ``source``, if a file), through the scheduler's ``parse_request``.

    ``defaults`` fill the keys the body leaves out; ``amend`` edits the decoded body before it is validated
    (flags that add to a file or override it). A body that is not a JSON object is left as it is for
    ``parse_request`` to refuse, so its error is the one ``gpurt run`` gives. Raises ``UserError`` naming
    ``source`` and the parser's reason.
    """
    from runtime.protocol import strict_json
    from runtime.protocol.messages import InvalidRequest, parse_request

    if amend is not None:
        try:
            body = strict_json.loads(data)
        except strict_json.JsonRejected:
            body = None  # parse_request says why, in its own words
        if isinstance(body, dict):
            amend(body)
            data = json.dumps(body).encode()
    try:
        return parse_request(data, defaults)
    except InvalidRequest as exc:
        where = f" in {source}" if source is not None else ""
        raise UserError(f"invalid job{where}: {exc}") from None
