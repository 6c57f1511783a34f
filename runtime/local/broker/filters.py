"""Subscription filters: Pub/Sub's attribute filter grammar, parsed once at CreateSubscription.

    filter  := term { ("AND" | "OR") term }        mixing AND and OR needs parentheses, as on the service
    term    := ("NOT" | "-") term | "(" filter ")" | "attributes:" KEY
             | "attributes." KEY ("=" | "!=") STRING | "hasPrefix(" "attributes." KEY "," STRING ")"

KEY is a name (letters, digits, ``_``, ``-``) or a quoted string; STRING is double-quoted, with the
escapes of Google's API filter strings decoded (see ``_ESCAPE``): backslash then one of ``abfnrtv``, a
backslash, a quote or ``?``; ``x`` and two hex digits, three octal digits, ``u`` and four or ``U`` and
eight hex digits (a code point). Any other escape is refused. A message that does not match is
acknowledged on the subscription's behalf: it is never delivered and never counts as backlog.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

from runtime.local.broker.errors import invalid_argument

Predicate = Callable[[Mapping[str, str]], bool]

MAX_FILTER_BYTES: Final = 256  # the service's limit on a filter's length
_TOKEN: Final = re.compile(r"""
    \s*(?:
      (?P<string>"(?:[^"\\]|\\.)*")
    | (?P<op>!=|=|\(|\)|,|:|\.|-)
    | (?P<word>[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)*)
    )""", re.VERBOSE)


def compile_filter(text: str) -> Predicate:
    """The predicate of ``text`` over a message's attributes; INVALID_ARGUMENT if it does not parse."""
    if len(text.encode()) > MAX_FILTER_BYTES:
        raise invalid_argument(f"The filter is longer than {MAX_FILTER_BYTES} bytes.")
    parser = _Parser(_tokens(text), text)
    predicate = parser.filter()
    parser.expect_end()
    return predicate


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            raise invalid_argument(f"Invalid filter: unexpected {text[position:].strip()[:20]!r}.")
        tokens.append(match.group(match.lastgroup or ""))
        position = match.end()
    return tokens


# One escape sequence: a simple one, two hex digits, three octal digits, four or eight hex digits (a code point).
_ESCAPE: Final = re.compile(
    r"\\(?:(?P<simple>[abfnrtv\\'\"?`])|x(?P<hex>[0-9A-Fa-f]{2})|(?P<octal>[0-3][0-7]{2})"
    r"|u(?P<u4>[0-9A-Fa-f]{4})|U(?P<u8>[0-9A-Fa-f]{8})|(?P<bad>.?))", re.DOTALL)
_SIMPLE_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _unquote(token: str) -> str:
    """The value of a quoted string token, its escape sequences decoded; INVALID_ARGUMENT for a bad one."""

    def decode(match: re.Match[str]) -> str:
        if match["simple"] is not None:
            return _SIMPLE_ESCAPES.get(match["simple"], match["simple"])
        if match["bad"] is not None:
            raise invalid_argument(f"Invalid filter: unknown escape sequence {match[0]!r} in {token}.")
        digits = match["hex"] or match["u4"] or match["u8"]
        code = int(digits, 16) if digits else int(match["octal"], 8)
        if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise invalid_argument(f"Invalid filter: {match[0]!r} in {token} is not a character.")
        return chr(code)

    return _ESCAPE.sub(decode, token[1:-1])


class _Parser:
    def __init__(self, tokens: list[str], text: str) -> None:
        self._tokens = tokens
        self._at = 0
        self._text = text

    def _peek(self) -> str | None:
        return self._tokens[self._at] if self._at < len(self._tokens) else None

    def _take(self, *expected: str) -> str:
        token = self._peek()
        if token is None or (expected and token not in expected):
            wanted = " or ".join(repr(e) for e in expected) or "more"
            raise invalid_argument(f"Invalid filter {self._text!r}: expected {wanted}, found {token or 'the end'}.")
        self._at += 1
        return token

    def expect_end(self) -> None:
        if self._peek() is not None:
            raise invalid_argument(f"Invalid filter {self._text!r}: unexpected {self._peek()!r}.")

    def filter(self) -> Predicate:
        terms = [self._term()]
        joiner: str | None = None
        while self._peek() in ("AND", "OR"):
            word = self._take()
            if joiner is not None and word != joiner:
                raise invalid_argument(f"Invalid filter {self._text!r}: use parentheses to mix AND and OR.")
            joiner = word
            terms.append(self._term())
        if len(terms) == 1:
            return terms[0]
        if joiner == "AND":
            return lambda attributes: all(term(attributes) for term in terms)
        return lambda attributes: any(term(attributes) for term in terms)

    def _term(self) -> Predicate:
        token = self._peek()
        if token in ("NOT", "-"):
            self._take()
            inner = self._term()
            return lambda attributes: not inner(attributes)
        if token == "(":
            self._take()
            inner = self.filter()
            self._take(")")
            return inner
        if token == "hasPrefix":
            self._take()
            self._take("(")
            key = self._attribute(".")
            self._take(",")
            prefix = self._string()
            self._take(")")
            return lambda attributes: key in attributes and attributes[key].startswith(prefix)
        self._take("attributes")
        if self._peek() == ":":
            self._take()
            key = self._key()
            return lambda attributes: key in attributes
        self._take(".")
        key = self._key()
        operator = self._take("=", "!=")
        value = self._string()
        if operator == "=":
            return lambda attributes: attributes.get(key) == value
        return lambda attributes: attributes.get(key) != value

    def _attribute(self, separator: str) -> str:
        self._take("attributes")
        self._take(separator)
        return self._key()

    def _key(self) -> str:
        token = self._take()
        if token.startswith('"'):
            return _unquote(token)
        if not re.fullmatch(r"[A-Za-z0-9_-]+", token):
            raise invalid_argument(f"Invalid filter {self._text!r}: {token!r} is not an attribute name.")
        return token

    def _string(self) -> str:
        token = self._take()
        if not token.startswith('"'):
            raise invalid_argument(f"Invalid filter {self._text!r}: expected a quoted string, found {token!r}.")
        return _unquote(token)
