"""Pointers read back from their rows without validating their card again (issue 34).

A pointer row keeps the pointer as written (its JSON document: the card, the snapshot's ref, the
turn) and, in columns, what changes afterwards (state, claim, lease, answer, location, votes).
The document never changes once written, and validating it (the card's every field, R20 on every
string) is most of what a read costs: a click reads its card's pointer twice (the checks, then the
claim's RETURNING row), each once more validating the card the pause step had just written.

So a store keeps the pointers it wrote, and the ones it read, under their document's text: a read
whose document is known validates only the columns (`PointerColumns`, the same strict rules) and
copies them onto the known pointer. Models are frozen, so the pointers share their card safely.
A document not known (written by another process, or long ago) is validated as before, then kept.
Bounded in count and in text (a card may carry a tool call's input): the oldest go first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from pydantic import create_model

from chat_approvals.core.models import Pointer
from chat_approvals.core.models.base import Strict

KEPT = 512  # documents: a burst's cards are read back within seconds of being written
KEPT_CHARS = 2_000_000  # their text in all (a card's document is about 1-3 KB; a tool card's input is capped)


# What a pointer row keeps in columns: the fields that change after the card is written.
COLUMNS = (
    "card_id", "secret_hash", "state", "expires_at", "ttl", "claim_count", "worker", "lease_until",
    "resume_deadline", "answer_key", "card_location", "votes",
)  # fmt: skip
# Those fields checked as Pointer checks them: each with Pointer's own type, on Strict's rules (R20).
_FIELDS: dict[str, Any] = {name: (Pointer.model_fields[name].annotation, ...) for name in COLUMNS}
PointerColumns = create_model("PointerColumns", __base__=Strict, **_FIELDS)


# A SQL pointer row's plain columns (SQLite's and PostgreSQL's), as SQL names them, in COLUMNS'
# order; card_location and votes, which each backend stores its own way, follow them.
_PLAIN = COLUMNS[:-2]
SQL_COLUMNS = tuple("sh" if name == "secret_hash" else name for name in _PLAIN)


def row_columns(row: Any, card_location: dict[str, str] | None, votes: list[Any]) -> dict[str, Any]:
    """PointerColumns' fields from a SQL pointer row read by column name; the JSON columns come decoded."""
    return plain_columns([row[name] for name in SQL_COLUMNS], card_location, votes)


def plain_columns(plain: Sequence[Any], card_location: dict[str, str] | None, votes: list[Any]) -> dict[str, Any]:
    """PointerColumns' fields from SQL_COLUMNS' values in their order (a row read by position:
    a name looked up in a row costs more than its place); the JSON columns come decoded."""
    columns = dict(zip(_PLAIN, plain, strict=True))
    columns["card_location"], columns["votes"] = card_location, votes
    return columns


class PointerDocs:
    """Validated pointers by the text of their stored document (safe from any thread)."""

    def __init__(self, kept: int = KEPT, kept_chars: int = KEPT_CHARS) -> None:
        self._kept, self._kept_chars = kept, kept_chars
        self._docs: dict[str, Pointer] = {}
        self._chars = 0
        self._lock = threading.Lock()  # adding and dropping; a lookup is one dict read

    def document(self, p: Pointer) -> str:
        """`p`'s document as stored, with `p` kept under it (its read-back needs no card check)."""
        doc = p.model_dump_json()
        self._keep(doc, p)
        return doc

    def pointer(self, doc: str, columns: dict[str, Any]) -> Pointer:
        """The pointer of a row: `doc` validated once per text, `columns` (PointerColumns' fields
        as read from the row, the JSON ones decoded) every time; a ValidationError as for the
        whole pointer when either is invalid."""
        known = self._docs.get(doc)
        if known is None:
            known = Pointer.model_validate_json(doc)
            self._keep(doc, known)
        # the validated fields as they are (dict(model) would walk them through __iter__)
        return known.model_copy(update=PointerColumns.model_validate(columns).__dict__)

    def __len__(self) -> int:
        return len(self._docs)

    def _keep(self, doc: str, p: Pointer) -> None:
        with self._lock:
            if doc not in self._docs:
                self._chars += len(doc)
            self._docs[doc] = p
            while len(self._docs) > self._kept or self._chars > self._kept_chars:
                oldest = next(iter(self._docs))
                del self._docs[oldest]
                self._chars -= len(oldest)
