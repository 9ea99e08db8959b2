"""The pieces every model stands on: the card id shape, the clock, the store's faults, the
strict base model."""

from __future__ import annotations

import re
import time
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, field_validator

from chat_approvals.core.text import NOT_UNICODE, first_invalid

# What core.ids.mint_card_id() produces: "c_" + token_urlsafe(16) (22 url-safe base64 characters).
# Here, not in core.ids, so cards/ (which import only core.models) can check ids on the wire.
_CARD_ID = re.compile(r"c_[A-Za-z0-9_-]{22}")


def is_card_id(value: object) -> bool:
    """True only for a string of the minted shape: checked before a card id is used anywhere
    (an object key, a lookup, a log line), so `/`, `..`, NUL or 5,000 characters never get that far."""
    return isinstance(value, str) and _CARD_ID.fullmatch(value) is not None


class Clock(Protocol):
    """The only source of time in core/ and store/ (here so both layers may see it)."""

    def now(self) -> float: ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class StoreFault(Exception):
    """What the store could not do: every front end maps it once (HTTP 503, a Slack ephemeral,
    a Teams card). Its kinds say what happened: `StoreUnavailable` or `BadObject`."""


class StoreUnavailable(StoreFault):
    """The store failed after its retries; nothing was changed by the failed call (an outage:
    trying again may work). Backends raise subclasses."""


class BadObject(StoreFault):
    """A write-once object is not what the protocol expects: its bytes do not match the checksum
    recorded when it was written, or its key was written before. A fact about the data, not an
    outage: trying again reads the same bytes. Backends raise subclasses."""


_NOT_TEXT = frozenset({float, int, bool, type(None)})


class StrictShape(BaseModel):
    """Strict's rules less its check of each field: for a model that makes all its text valid
    itself, in one pass over its input (AuditEvent), rather than walking it twice."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Strict(StrictShape):
    @field_validator("*", mode="after")
    @classmethod
    def _valid_text(cls, value: Any) -> Any:
        """R20 by construction: no string a model holds (in lists and dicts too) can fail a later
        write (UTF-8, hashing, JSON); core/text.py. Most fields are ASCII strings or numbers, which
        are valid text as they are: looked at first, without a walk (issue 34). So is a model of
        ours held in a field (a pointer's card, an offer's card): it checked its own text when it
        was built, and the walk below never looks inside a model."""
        kind = value.__class__
        if kind is str:
            if value.isascii():
                return value
        elif kind in _NOT_TEXT or isinstance(value, StrictShape):
            return value
        where = first_invalid(value)
        if where is not None:
            raise ValueError(f"{where} {NOT_UNICODE}")
        return value
