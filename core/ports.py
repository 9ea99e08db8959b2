"""The async ports the core's services call, owned by the core: `Rows` (the conditional row
writes and their reads), `Objects` (write-once, checksummed blobs), `Steps` (the units of work:
a protocol step's sequential store calls as one), and `Outbox` (audit events waiting for their
webhooks). `store/aio.py` implements them over a backend; the core never imports a store module,
so the only arrow between the two runs store -> core (tests/test_layers.py).

Every write made under a claim carries its `Fence`; every state change is still the backend's
one conditional write (shared/DESIGN.md R10-R14).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    Claimed,
    Fence,
    Grant,
    GrantChange,
    ObjectRef,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    Timer,
    TurnStart,
    Vote,
)

History = tuple[str, bytes, float, float]
"""A history object to write with a step: (key, bytes, seq, ttl)."""


@dataclass(frozen=True)
class Started:
    """A turn's first step: the lease and what the turn starts from, and the chat's history
    bytes when it has one (None when absent or unreadable: the chat starts afresh)."""

    turn: TurnStart
    history: bytes | None = None


@dataclass(frozen=True)
class Offered:
    """The pause step: whether the pointer was written; `error` is what failed and where."""

    written: bool
    error: Exception | None = None
    failed_at: str | None = None  # "snapshot" or "pointer"


@dataclass(frozen=True)
class Loaded:
    """The claim step: the won claim and its stored run's bytes (or why they could not be read;
    raised where the run would have started, as before)."""

    claimed: Claimed | None
    snapshot: bytes | None = None
    error: Exception | None = None


@dataclass(frozen=True)
class Offer:
    """The pause step's writes (R7): the snapshot under `key`, then the pointer made from its
    ref, with its audit events. `turn` (chat, holder): the pointer write also ends that turn;
    `holding`: the pointer replaces the held card (R13)."""

    key: str
    data: bytes
    pointer: Callable[[ObjectRef], Pointer]
    now: float
    audit: Sequence[AuditWrite]
    turn: tuple[str, str] | None = None
    holding: Fence | None = None
    timers: Sequence[Timer] = ()  # issue 33: the card's timers, written before its pointer (best effort)


@dataclass(frozen=True)
class Claim:
    """The claim step (R10, R14): claim the card as `read` with its grant changes and audit
    events (`before` the changes, `after` them); `load`: read the stored run's bytes if won."""

    read: Pointer
    worker: str
    now: float
    lease_until: float
    resume_deadline: float
    changes: Sequence[GrantChange]
    before: Sequence[AuditWrite]
    after: Sequence[AuditWrite]
    load: bool = True


class InstallationRecords(Protocol):
    """Slack installations (issue 31): opaque records by key, encrypted by their writer
    (bots/slack_install.py); the part of `Rows` the Slack front end is handed."""

    async def put_installation(self, key: str, record: str) -> None: ...
    async def installation(self, key: str) -> str | None: ...
    async def delete_installation(self, key: str) -> bool: ...


class Rows(Protocol):
    """The rows port: async, keyword-only calls over the backend's conditional writes."""

    async def put_pointer(self, pointer: Pointer, *, now: float) -> bool: ...
    async def pointer(self, *, chat: str) -> Pointer | None: ...
    async def pointer_by_card(self, card_id: str) -> Pointer | None: ...
    async def claim(
        self, read: Pointer, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        """R10: claim the card as `read` (its id, secret hash and claim count are the condition)."""

    def renew_now(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        """Synchronous on purpose: the heartbeat thread calls it (R11)."""

    async def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool: ...
    async def replace(self, fence: Fence, *, new: Pointer) -> bool: ...
    async def expire(self, *, chat: str, card_id: str, now: float) -> bool: ...
    async def set_card_location(self, *, chat: str, card_id: str, location: dict[str, str]) -> bool: ...
    async def rotate_secret(self, read: Pointer, *, new_hash: str, now: float) -> bool:
        """R19: only while `read` is still the chat's answerable card with the same secret."""

    async def take_turn(self, *, chat: str, holder: str, now: float, lease_until: float) -> bool: ...
    def renew_turn_now(self, *, chat: str, holder: str, now: float, lease_until: float) -> bool:
        """Synchronous on purpose: the heartbeat thread calls it."""

    async def release_turn(self, *, chat: str, holder: str) -> bool: ...
    async def put_grant(self, grant: Grant, *, ttl: float) -> None: ...
    async def grants(self, *, user: str, chat: str | None, now: float) -> list[Grant]: ...
    async def delete_grant(self, *, user: str, chat: str, kind: SubjectKind, name: str) -> bool: ...
    async def record_refusal(self, refusal: Refusal, *, ttl: float) -> bool: ...
    async def refusals(self, *, chat: str, turn_id: str) -> list[Refusal]: ...
    async def vote(self, read: Pointer, *, vote: Vote, now: float) -> Pointer | None:
        """One approver's vote on the card as `read` (its id and secret hash are the condition)."""

    async def claim_event(self, key: str, *, now: float, ttl: float) -> bool: ...
    async def append_audit(self, event: AuditEvent, *, ttl: float) -> None: ...
    async def audit(self, *, chat: str) -> list[AuditEvent]: ...
    async def audit_since(self, *, since: float) -> list[AuditEvent]: ...
    async def put_session(self, *, chat: str, key: str, seq: float, ttl: float) -> bool: ...
    async def session(self, *, chat: str) -> str | None: ...
    async def sweep(self, *, now: float) -> int: ...
    async def put_timers(self, timers: Sequence[Timer]) -> None: ...
    async def claim_timers(
        self, *, holder: str, now: float, lease_until: float, since: float, limit: int
    ) -> list[Timer]: ...
    async def fire_timer(self, timer: Timer, *, now: float) -> bool: ...

    # Slack installations (issue 31): opaque records, encrypted by their writer (bots/slack_install.py).
    async def put_installation(self, key: str, record: str) -> None: ...
    async def installation(self, key: str) -> str | None: ...
    async def delete_installation(self, key: str) -> bool: ...


class Objects(Protocol):
    """The objects port: write-once, checksummed blobs."""

    async def put(self, key: str, data: bytes) -> ObjectRef: ...
    async def get(self, ref: ObjectRef) -> bytes: ...
    async def get_key(self, key: str) -> bytes | None: ...
    async def sweep(self, *, older_than: float) -> int: ...


class Steps(Protocol):
    """The units of work: each protocol step's sequential store calls as one (one executor hop;
    one commit where the backend has one). Audit writes arrive built (core/protocol/audit.py) and are
    written with the state change they record."""

    async def start_turn(
        self, *, chat: str, holder: str, user: str, now: float, lease_until: float, history: bool
    ) -> Started: ...

    async def offer(self, step: Offer) -> Offered:
        """R7: snapshot (a confirmed PUT) -> pointer (conditional) with its audit events, in that order."""

    async def claim(self, step: Claim) -> Loaded:
        """R10's claim with its grants and audit events, then, if won, the stored run's bytes."""

    async def complete(self, fence: Fence, *, answer_key: str, answer: bytes, history: History | None = None) -> bool:
        """R12: the answer (a confirmed PUT), the history object (best effort), then finish."""

    async def end_turn(self, *, chat: str, holder: str, now: float, history: History | None) -> None:
        """An answered turn's last step: the history object (best effort), then end_turn."""

    async def audit(self, write: AuditWrite) -> None:
        """One audit event on its own, with its outbox items, in one write."""


class Outbox(Protocol):
    """Audit events waiting for their webhooks (written with the events themselves)."""

    async def claim(self, *, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        """Up to `limit` of `sink`'s items, leased to `holder` until `lease_until`, oldest first."""

    async def delete(self, *, sink: str, item_id: str) -> bool: ...


@dataclass(frozen=True)
class Ports:
    """The four ports over one store."""

    rows: Rows
    objects: Objects
    steps: Steps
    outbox: Outbox


class Store(Protocol):
    """What the core is handed: a store that gives its ports and is closed by whoever opened it."""

    def ports(self) -> Ports: ...
    def close(self) -> None: ...
