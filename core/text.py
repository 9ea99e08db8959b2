"""R20: only valid text crosses an edge.

A lone surrogate (`"\\ud800"`) is valid JSON and a valid Python `str`, but it is not a Unicode
scalar value: UTF-8 encoding, hashing, SQLite and JSON output all refuse it, so a value holding
one fails at whichever write comes first (after a claim, in the worst case). Front ends refuse
such text at the edge (`first_invalid`, `json_text_problem`); the models refuse it by
construction (`ValidText`, and `core.models.Strict` checks every string it holds).

`display_problem` adds what must not reach a person's eyes: C0/C1 controls and the bidi
overrides and isolates that let a reason or a user id spoof the text around it on a card.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator

NOT_UNICODE = "is not valid Unicode text (it holds a lone surrogate)"
# U+202A-202E (embeddings, overrides) and U+2066-2069 (isolates): reorder what a person reads.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str every surrogate is a lone one
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# In JSON a surrogate can only arrive as a \uD800-\uDFFF escape (raw surrogate bytes are not
# UTF-8 and fail decoding): a body without one needs no second look.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")
_SURROGATE_ESCAPE_TEXT = re.compile(_SURROGATE_ESCAPE.pattern.decode())


class InvalidText(ValueError):
    """A string that may not cross this edge; the message names the field and why."""


def is_scalar_text(value: str) -> bool:
    """True when every code point is a Unicode scalar value (encodable as UTF-8)."""
    if value.isascii():  # the common case, and much cheaper than an encode
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scalar_text(value: str) -> str:
    """`value` with each lone surrogate replaced by U+FFFD: for text this process produced (a model's
    reply, a tool's output), which is shown rather than refused."""
    if is_scalar_text(value):
        return value
    return _LONE_SURROGATE.sub("\ufffd", value)


def scalar_json(value: object) -> object:
    """A decoded JSON value with every string (keys too) made `scalar_text`: for what must stay
    readable whatever an older version stored (the audit trail). A value that is valid text
    throughout (the common case) is returned as it is, without a rebuilt copy."""
    if isinstance(value, str):
        return scalar_text(value)
    if _all_valid(value):
        return value
    return _scalar_json(value)


def _scalar_json(value: object) -> object:
    if isinstance(value, str):
        return scalar_text(value)
    if isinstance(value, dict):
        return {_scalar_json(k): _scalar_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scalar_json(v) for v in value]
    return value


def check_text(value: str, where: str) -> str:
    """`value` itself, or InvalidText naming `where`."""
    if not is_scalar_text(value):
        raise InvalidText(f"{where} {NOT_UNICODE}")
    return value


def _valid(value: str) -> str:
    if not is_scalar_text(value):
        raise ValueError(NOT_UNICODE)
    return value


# The one validated string type: a str whose every code point is a Unicode scalar value.
ValidText = Annotated[str, AfterValidator(_valid)]


_NOT_TEXT = frozenset({float, int, bool, type(None)})  # exact types: the walk skips them at once


def _all_valid(value: object) -> bool:
    """first_invalid(value) is None, without building a path per item (the common case: checked on
    every model field and every click's payload)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and not is_scalar_text(item):
                return False
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif item.__class__ in _NOT_TEXT:
            continue
        elif isinstance(item, (dict, Mapping)):  # dict first: a dict needs no ABC check
            for key in item:
                if isinstance(key, str) and not is_scalar_text(key):
                    return False
            stack.extend(item.values())
    return True


def first_invalid(value: object) -> str | None:
    """Where in a decoded JSON value (dicts, lists, strings, scalars) the first string that is not
    valid text sits ("a[1].b", "a key", "the value"), or None. Iterative: depth costs no recursion."""
    if isinstance(value, str):
        return None if is_scalar_text(value) else "the value"
    if _all_valid(value):
        return None
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if not is_scalar_text(item):
                return path or "the value"
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str) and not is_scalar_text(key):
                    return "a key"
                stack.append((child, f"{path}.{key}" if path else str(key)))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(item))
    return None


def json_text_problem(raw: bytes) -> str | None:
    """A refusal for a body that is not UTF-8 (UTF-16, a BOM) or whose JSON holds a lone surrogate
    anywhere, or None (also when it is not JSON at all: the endpoint's own parser says why)."""
    # json.loads(bytes) would also take UTF-16/32 and a BOM; RFC 8259 has UTF-8 only, and one
    # encoding is what every signature, hash and log line assumes.
    if raw.startswith(b"\xef\xbb\xbf"):
        return "the body starts with a byte order mark: send UTF-8 JSON without one"
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return "the body is not UTF-8"
    if _SURROGATE_ESCAPE.search(raw) is None:
        return None  # the common case: one regex scan, no second parse
    try:
        where = first_invalid(json.loads(raw))
    except (ValueError, RecursionError):
        return None
    return None if where is None else f"{where} {NOT_UNICODE}"


def display_problem(value: str, where: str) -> str | None:
    """Why `value` may not be shown to a person as `where` (not valid text, a control character, a
    bidi override or isolate), or None."""
    if not is_scalar_text(value):
        return f"{where} {NOT_UNICODE}"
    if _CONTROL.search(value):
        return f"{where} holds a control character"
    if _BIDI.search(value):
        return f"{where} holds a bidi override or isolate (U+202A-202E, U+2066-2069)"
    return None


def holds_surrogate_escape(json_text: str) -> bool:
    """Whether JSON text (decoded as UTF-8, strictly or with replacement) can decode to a lone
    surrogate: only a \\uD800-\\uDFFF escape can. False: every string in it is valid text, and
    `first_invalid` on the decoded value has nothing to find."""
    return _SURROGATE_ESCAPE_TEXT.search(json_text) is not None
