"""What the store's compound steps take and give back (store/base.py): a grant change, a
session write, a turn's start, a won claim."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chat_approvals.core.models.audit import AuditWrite
from chat_approvals.core.models.fences import ClaimRead
from chat_approvals.core.models.records import Grant, Pointer


@dataclass(frozen=True)
class GrantChange:
    """A grant written (`delete` False) or taken back (`delete` True) with a claim (R14), and its
    audit event: a put's is always written, a delete's only when it removed a row."""

    grant: Grant
    ttl: float
    delete: bool
    audit: AuditWrite


@dataclass(frozen=True)
class ClaimWrite:
    """RowStore.claim_grants' one argument: R10's claim of the card as `read`, and only if it is
    won, the events `before`, the grant changes in order (R14) and the events `after`."""

    read: ClaimRead
    worker: str
    now: float
    lease_until: float
    resume_deadline: float
    changes: Sequence[GrantChange] = ()
    before: Sequence[AuditWrite] = ()
    after: Sequence[AuditWrite] = ()


@dataclass(frozen=True)
class SessionWrite:
    """Point the chat's history at object `key` (as RowStore.put_session: never rolled back)."""

    chat: str
    key: str
    seq: float
    ttl: float


@dataclass(frozen=True)
class TurnStart:
    """What a turn starts from, read in the round trip that took the chat's turn lease: nothing
    when the lease was held by someone else (`taken` False)."""

    taken: bool
    pointer: Pointer | None = None
    grants: tuple[Grant, ...] = ()
    session: str | None = None


@dataclass(frozen=True)
class Claimed:
    """A won claim (the pointer as written, its claim_count the fencing token) and the owner's
    live grants in the chat after the claim's grant changes."""

    pointer: Pointer
    grants: tuple[Grant, ...]
