"""JSON from untrusted bytes, with explicit limits, failing only with ``JsonRejected``.

``json.loads`` alone is not safe on a message from the wire: it recurses once per nesting level (a body
of 5,000 ``[`` raises ``RecursionError``), turns ``1e400`` into ``inf`` and accepts ``NaN``/``Infinity``,
raises a plain ``ValueError`` for an integer of more than 4,300 digits, keeps the last of duplicate keys
silently, guesses UTF-16/32 from the first bytes, and lets lone surrogates (``"\\ud800"``) through into
strings that cannot be encoded again. Each of these is checked here, before or while parsing, so the
caller sees one exception type with a readable reason.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import accumulate
from typing import Any, Final

# Deepest nesting accepted. A job request needs 4 (body > params > correlation > row); 32 leaves room
# for any future params while staying far below the interpreter's recursion limit (1000).
MAX_DEPTH: Final = 32
# Longest integer literal accepted, in characters. Every integer of the protocol fits in 19 digits
# (seeds < 2**63); longer ones are refused before Python converts them (quadratic in the digit count).
MAX_INT_CHARS: Final = 32
# Most values (numbers, strings, arrays, objects...) a body may hold, counted before parsing. The largest
# request a kernel can use is a portfolio_var of 256 assets: a 256 x 256 correlation matrix and two vectors,
# about 66,000 values. A megabyte of ``{},`` is 330,000 objects: refused here, before the parser builds them
# and the request's model reports each one.
MAX_VALUES: Final = 100_000
# Most keys one object may have. The widest request object (a basket's params) has about twenty fields, and
# a model reports each unknown key as an error of its own: 90,000 of them took half a second and 70 MB.
MAX_KEYS: Final = 64

# One token of the nesting scan: a string literal (escapes included) or a bracket. The string's closing
# quote is optional, so an unterminated string consumes the rest of the text in one match instead of
# failing and being tried again at each later quote (which made the scan quadratic in a body of ``"``
# followed by many ``\\"``). Its parts are disjoint character classes, so no match ever backtracks:
# every character is looked at once.
_TOKEN: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|([\[\]{},])', re.DOTALL)
# What each token does to the depth; "" is a string literal (the bracket group did not take part), "," a
# separator between values.
_STEP: Final = {"": 0, "[": 1, "{": 1, "]": -1, "}": -1, ",": 0}
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class JsonRejected(ValueError):
    """The bytes are not JSON this parser accepts; the message says why."""


def loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse ``data`` as UTF-8 JSON within the limits above; raises ``JsonRejected`` and nothing else."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonRejected(f"body is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    depth, values = _shape(text)
    if depth > max_depth:
        raise JsonRejected(f"body nests deeper than {max_depth} levels")
    if values > MAX_VALUES:
        raise JsonRejected(f"body holds more than {MAX_VALUES:,} values (about {values:,})")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant,
                           parse_float=_finite_float, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"body is not valid JSON: {exc}") from None
    _check_strings(value)
    return value


def _shape(text: str) -> tuple[int, int]:
    """Deepest bracket nesting outside string literals, and an upper bound on the values the text holds (one
    per separator and per container, plus one), in one linear scan and without recursion.

    The regex engine finds the tokens and ``accumulate`` sums the steps, both in C: a Python loop per token
    took twice as long on a 1 MB body of ``[]``. An unterminated string
    hides the brackets after it: the text is not valid JSON then, and the parser that runs next says so,
    in linear time too.
    """
    tokens = _TOKEN.findall(text)
    depth = max(accumulate(map(_STEP.__getitem__, tokens), initial=0))
    return depth, 1 + tokens.count(",") + tokens.count("[") + tokens.count("{")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len(pairs) > MAX_KEYS:
        raise JsonRejected(f"body has an object of {len(pairs):,} keys, more than {MAX_KEYS}")
    result = dict(pairs)
    if len(result) != len(pairs):
        repeated = sorted(key for key, count in Counter(key for key, _ in pairs).items() if count > 1)
        raise JsonRejected(f"body repeats key(s) {', '.join(map(repr, repeated))[:200]}: ambiguous")
    return result


def _no_constant(name: str) -> float:
    raise JsonRejected(f"body contains {name}, which is not a JSON number")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise JsonRejected(f"number {literal[:40]} is out of range")
    return value


def _bounded_int(literal: str) -> int:
    if len(literal) > MAX_INT_CHARS:
        raise JsonRejected(f"integer of {len(literal)} digits is out of range")
    return int(literal)


def _check_strings(value: Any) -> None:
    """Refuse lone surrogates in any string (key or value), walking the parsed value without recursion."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item):
                raise JsonRejected("body contains a lone UTF-16 surrogate escape (\\ud800-\\udfff)")
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
