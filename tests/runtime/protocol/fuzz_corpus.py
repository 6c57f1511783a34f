"""A seeded corpus of request messages that must all be rejected: every malformed kind, mixed at random.

Each message carries the attribute ``job_id`` ``<prefix>-<index>`` (a tenth of those with a body carry no
attributes at all; the ``forged_attribute`` kind names another job, ``<prefix>-victim-<index>``, there),
and a body that names a job id either names that same id, an unusable one, or none - so every result
maps back to exactly one message, by job id or by ``invalid-<message id>``, and none may name a victim.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from runtime.protocol.messages import MAX_MESSAGE_BYTES

# Messages over the size limit cost a megabyte each to publish: a handful prove the point.
OVERSIZE_MESSAGES: Final = 3
# The body of the reported defect, sent as is right after them: json.loads raised RecursionError on it,
# so it was redelivered until dead-lettered instead of being rejected.
ISSUE_BODY: Final = b"[" * 5000 + b"]" * 5000
# Sizes of the adversarial kind in the mixed corpus (bytes); the first messages also carry each one at the
# size limit, where a quadratic parser would take hours.
ADVERSARIAL_SIZES: Final = (100, 1_000, 16_000)




def _repeat(head: bytes, unit: bytes, size: int, tail: bytes = b"") -> bytes:
    """``head`` + ``unit`` repeated + ``tail``, exactly ``size`` bytes long (``unit`` cut at the end)."""
    body = head + unit * ((size - len(head) - len(tail)) // len(unit) + 1)
    return body[: size - len(tail)] + tail


# Bodies built to make a parser slow rather than wrong, by name, at any size: each is worst for some way
# of scanning JSON (a string scan retried at every quote, a loop per bracket, per escape, per token).
ADVERSARIAL: Final[dict[str, Callable[[int], bytes]]] = {
    # The reported body: a quote, then escaped quotes and no closing quote (quadratic in the old scan).
    "unterminated_escaped_quotes": lambda size: _repeat(b'"', b'\\"', size),
    "object_then_unterminated_escapes": lambda size: _repeat(b'{"job_id": "x", "type": "noop", "session_id": "',
                                                             b'[\\"{', size),
    "bare_quotes": lambda size: _repeat(b"", b'"', size),
    "escaped_backslashes": lambda size: _repeat(b'"', b"\\\\", size, b'"'),
    "unicode_escapes": lambda size: _repeat(b'"', b"\\u0041", size, b'"'),
    "bracket_pairs": lambda size: _repeat(b"[", b"[],", size, b"[]]"),
    "open_brackets": lambda size: _repeat(b"", b"[", size),
    "open_objects": lambda size: _repeat(b"", b'{"a":', size),
    "short_strings": lambda size: _repeat(b"[", b'"a",', size, b'"a"]'),
    "digits": lambda size: _repeat(b"", b"9", size),
    "whitespace": lambda size: _repeat(b"", b" \t\r\n", size, b"{}"),
}


def _listed(job_id: str, job_type: str, params: dict[str, Any], field_name: str, entry: bytes, size: int,
            depth: int = 1) -> bytes:
    """A request whose ``params[field_name]`` is a list (in ``depth`` - 1 more lists) of ``entry`` repeated to
    fill about ``size`` bytes."""
    head, tail = _dumps({"job_id": job_id, "type": job_type, "params": {**params, field_name: None}}).split(b"null")
    count = max(2, (size - len(head) - len(tail) - 2 * depth + 1) // (len(entry) + 1))  # two: never one asset's
    return head + b"[" * depth + b",".join([entry] * count) + b"]" * depth + tail


def _matrix(job_id: str, entry: bytes, size: int) -> bytes:
    """A portfolio_var whose correlation has rows of 256 ``entry`` each, as many rows as fill about ``size``
    bytes up to 256: every entry within the protocol's list bounds, each one an error."""
    row = b"[" + b",".join([entry] * 256) + b"]"
    head, tail = _dumps({"job_id": job_id, "type": "portfolio_var", "params": {**_VAR, "correlation": None}}) \
        .split(b"null")
    rows = min(256, max(1, size // (len(row) + 1)))
    return head + b"[" + b",".join([row] * rows) + b"]" + tail


def _keyed(job_id: str, within_params: bool, size: int) -> bytes:
    """A request with unknown keys ``"0"``, ``"1"``... filling ``size`` bytes, in its params or at its top level."""
    keys, count = [], 0
    length = 80  # the rest of the body, roughly
    while length < size:
        keys.append(f'"{count}":0')
        length += len(keys[-1]) + 1
        count += 1
    inner = ",".join(keys).encode()
    if within_params:
        return b'{"job_id":"' + job_id.encode() + b'","type":"noop","params":{' + inner + b"}}"
    return b'{"job_id":"' + job_id.encode() + b'","type":"noop",' + inner + b"}"


_BASKET: Final = {"spots": [100.0], "weights": [1.0], "volatilities": [0.2]}
_VAR: Final = {"exposures": [1.0], "volatilities": [0.2]}
# Bodies built to make a rejection expensive rather than the parse slow: each invalid part of a request used
# to cost its own validation error, so one megabyte answered with tens of megabytes of error text, over the
# result publish limit (issue #35). By name, for any job id, at any size.
AMPLIFICATION: Final[dict[str, Callable[[str, int], bytes]]] = {
    # The reported body: a correlation row of empty objects.
    "empty_objects_in_a_row": lambda job_id, size: _listed(job_id, "portfolio_var", _VAR, "correlation", b"{}",
                                                           size, depth=2),
    "strings_in_a_matrix": lambda job_id, size: _matrix(job_id, b'"x"', size),
    "numbers_past_a_list_bound": lambda job_id, size: _listed(job_id, "basket_option", _BASKET, "dividend_yields",
                                                              b"0", size),
    "strings_in_a_list": lambda job_id, size: _listed(job_id, "portfolio_var", _VAR, "exposures", b'"x"', size),
    "non_finite_strings_in_a_list": lambda job_id, size: _listed(job_id, "basket_option", _BASKET, "spots",
                                                                 b'"NaN"', size),
    "unknown_params_keys": lambda job_id, size: _keyed(job_id, True, size),
    "unknown_request_keys": lambda job_id, size: _keyed(job_id, False, size),
}


@dataclass(frozen=True)
class FuzzMessage:
    """One message of the corpus: its body, its attributes, and which malformation it carries."""

    index: int
    kind: str
    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)


def _valid(job_id: str, rng: random.Random) -> dict[str, Any]:
    return rng.choice([
        {"job_id": job_id, "type": "noop", "params": {"sleep_s": 0}},
        {"job_id": job_id, "type": "random_walk", "params": {"paths": 1000, "steps": 4, "seed": 7}},
        {"job_id": job_id, "type": "european_option", "params": {"spot": 100, "strike": 95, "paths": 1000}},
        {"job_id": job_id, "type": "portfolio_var",
         "params": {"exposures": [1e6, 2e6], "volatilities": [0.2, 0.3], "paths": 1000}},
    ])


def _dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def _random_bytes(job_id: str, rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(0, 200))


def _truncated(job_id: str, rng: random.Random) -> bytes:
    body = _dumps(_valid(job_id, rng))
    return body[: rng.randint(0, len(body) - 1)]


def _deep_array(job_id: str, rng: random.Random) -> bytes:
    depth = rng.choice([33, 100, 1000, 5000, 10_000])
    return b"[" * depth + b"]" * depth


def _deep_object(job_id: str, rng: random.Random) -> bytes:
    depth = rng.choice([40, 2000, 6000])
    return b'{"job_id": "' + job_id.encode() + b'", "params": ' + b'{"a": ' * depth + b"1" + b"}" * (depth + 1)


def _non_finite(job_id: str, rng: random.Random) -> bytes:
    token = rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"])
    return b'{"job_id": "' + job_id.encode() + b'", "type": "noop", "timeout_s": ' + token + b"}"


def _huge_integer(job_id: str, rng: random.Random) -> bytes:
    digits = rng.choice([33, 4301, 10_000])
    return b'{"job_id": "' + job_id.encode() + b'", "type": "noop", "priority": ' + b"7" * digits + b"}"


def _duplicate_keys(job_id: str, rng: random.Random) -> bytes:
    key = rng.choice(["job_id", "type", "params"])
    value = {"job_id": json.dumps(job_id), "type": '"noop"', "params": "{}"}[key]
    return b'{"job_id": "' + job_id.encode() + b'", "type": "noop", "params": {}, "' + key.encode() + b'": ' \
        + value.encode() + b"}"


def _bad_utf8(job_id: str, rng: random.Random) -> bytes:
    junk = rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"])
    return b'{"job_id": "' + job_id.encode() + b'", "type": "noop", "session_id": "' + junk + b'"}'


def _other_encoding(job_id: str, rng: random.Random) -> bytes:
    return json.dumps(_valid(job_id, rng)).encode(rng.choice(["utf-16", "utf-32", "utf-16-be"]))


def _lone_surrogate(job_id: str, rng: random.Random) -> bytes:
    escape = rng.choice(["\\ud800", "\\udfff", "\\udc00x"])
    return ('{"job_id": "' + job_id + '", "type": "noop", "session_id": "' + escape + '"}').encode()


def _not_an_object(job_id: str, rng: random.Random) -> bytes:
    return _dumps(rng.choice([[job_id], job_id, 42, 1.5, None, True, [], ""]))


def _wrong_types(job_id: str, rng: random.Random) -> bytes:
    body = _valid(job_id, rng)
    key, value = rng.choice([("job_id", 12345), ("type", ["noop"]), ("type", {"name": "noop"}), ("params", "x"),
                             ("params", [1, 2]), ("priority", "high"), ("timeout_s", {}), ("session_id", 9)])
    body[key] = value
    return _dumps(body)


def _loose_types(job_id: str, rng: random.Random) -> bytes:
    """A value of another JSON type than its field's, which lax validation coerced (issue 43), or a session id
    with a control character (sent as its JSON escape: ``\\u0000``, ``\\n``, ``\\u001b``)."""
    job_type, key, value = rng.choice([
        ("european_option", "paths", True), ("european_option", "antithetic", "yes"),
        ("random_walk", "paths", " 1_000 "), ("random_walk", "seed", "7"), ("european_option", "spot", "100"),
        ("noop", "sleep_s", False), ("european_option", "control_variate", 1), ("random_walk", "steps", 2.5),
        ("noop", "session_id", "desk\x00"), ("noop", "session_id", "a\nb"), ("noop", "session_id", "\x1b[2J"),
        ("noop", "timeout_s", "60"),
    ])
    if key in ("session_id", "timeout_s"):
        return _dumps({"job_id": job_id, "type": job_type, key: value})
    return _dumps({"job_id": job_id, "type": job_type, "params": {key: value}})


def _unknown_type(job_id: str, rng: random.Random) -> bytes:
    return _dumps({"job_id": job_id, "type": rng.choice(["quantum_annealing", "", "NOOP", "noop ", "\u0000"])})


def _bad_params(job_id: str, rng: random.Random) -> bytes:
    job_type, params = rng.choice([
        ("noop", {"sleep_s": -1}), ("noop", {"fail": "sometimes"}), ("random_walk", {"paths": 10**12}),
        ("random_walk", {"steps": 0}), ("european_option", {"volatility": 0}), ("asian_option", {"steps": 10**6}),
        ("portfolio_var", {"exposures": [1.0], "volatilities": [0.1, 0.2]}),
        ("portfolio_var", {"exposures": [1.0, 1.0], "volatilities": [0.1, 0.2], "correlation": [[1, 2], [2, 1]]}),
        ("random_walk", {"seed": -1}), ("european_option", {"kind": "straddle"}),
        # positive values below the floors no kernel can price (docs/kernels.md, "Values no kernel can price")
        ("european_option", {"volatility": 1e-200}), ("european_option", {"maturity": 5e-324}),
        ("asian_option", {"volatility": 1e-200}), ("heston_option", {"vol_of_vol": 1e-200}),
        ("basket_option", {"spots": [100.0], "weights": [1.0], "volatilities": [1e-200]}),
    ])
    return _dumps({"job_id": job_id, "type": job_type, "params": params})


def _bad_fields(job_id: str, rng: random.Random) -> bytes:
    body = _valid(job_id, rng)
    key, value = rng.choice([("priority", 10), ("timeout_s", 0), ("timeout_s", 10**9), ("session_id", "s" * 200),
                             ("extra", 1), ("job_id", "has space"), ("job_id", ""), ("job_id", "x" * 200)])
    body[key] = value
    return _dumps(body)


def _missing_fields(job_id: str, rng: random.Random) -> bytes:
    body = _valid(job_id, rng)
    del body[rng.choice(["type", "job_id"])]
    return _dumps(body) if rng.random() < 0.8 else b"{}"


def _mutated(job_id: str, rng: random.Random) -> bytes:
    """A valid request with a few bytes flipped, then refused by one of the others if it stayed valid."""
    body = bytearray(_dumps(_valid(job_id, rng)))
    for _ in range(rng.randint(1, 4)):
        body[rng.randrange(len(body))] = rng.randrange(256)
    return bytes(body) + b"\x00"  # a trailing NUL is never valid JSON, whatever the flips did


def _adversarial(job_id: str, rng: random.Random) -> bytes:
    return ADVERSARIAL[rng.choice(sorted(ADVERSARIAL))](rng.choice(ADVERSARIAL_SIZES))


def _amplification(job_id: str, rng: random.Random) -> bytes:
    return AMPLIFICATION[rng.choice(sorted(AMPLIFICATION))](job_id, rng.choice(ADVERSARIAL_SIZES))


def _forged_attribute(job_id: str, rng: random.Random) -> bytes:
    """A body that is no request, or a request of this message's own id that fails validation; the
    attribute (set in ``corpus``) names a victim."""
    return rng.choice([b"\xff garbage", b"{}", b'{"type": "noop"}', _dumps([job_id]),
                       _dumps({"job_id": job_id, "type": "noop", "params": {"sleep_s": -1}})])


def _oversize(job_id: str, rng: random.Random) -> bytes:
    return b'{"job_id": "' + job_id.encode() + b'", "type": "noop", "session_id": "' + b"a" * MAX_MESSAGE_BYTES \
        + b'"}'


KINDS: Final[dict[str, Callable[[str, random.Random], bytes]]] = {
    fn.__name__.lstrip("_"): fn for fn in (
        _random_bytes, _truncated, _deep_array, _deep_object, _non_finite, _huge_integer, _duplicate_keys,
        _bad_utf8, _other_encoding, _lone_surrogate, _not_an_object, _wrong_types, _loose_types, _unknown_type,
        _bad_params, _bad_fields, _missing_fields, _mutated, _adversarial, _amplification, _forged_attribute)
}


def corpus(count: int, prefix: str, seed: int = 9) -> list[FuzzMessage]:
    """``count`` malformed messages (a few oversize, one of each adversarial body at the size limit),
    reproducible from ``seed``."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    messages = []
    at_limit = [ADVERSARIAL[name](MAX_MESSAGE_BYTES) for name in sorted(ADVERSARIAL)]
    for index in range(count):
        job_id = f"{prefix}-{index}"
        kind = "oversize" if index < OVERSIZE_MESSAGES else kinds[index % len(kinds)]
        make = _oversize if kind == "oversize" else KINDS[kind]
        data = ISSUE_BODY if index == OVERSIZE_MESSAGES else make(job_id, rng)
        if kind == "adversarial" and at_limit:
            data = at_limit.pop()
        # Pub/Sub refuses a message with neither data nor attributes: an empty body keeps its attributes.
        bare = data and rng.random() < 0.1 and kind != "forged_attribute"
        named = f"{prefix}-victim-{index}" if kind == "forged_attribute" else job_id
        attributes = {} if bare else {"job_id": named, "type": rng.choice(["noop", "bogus"])}
        messages.append(FuzzMessage(index, kind, data, attributes))
    return messages
