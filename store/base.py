"""The one store interface every backend implements, and the errors it raises.

Every method is synchronous and blocking: backends are plain sqlite3, boto3 or psycopg calls. The core
runs them on an executor (`store.aio.StoreIO`), and the lease heartbeat calls `renew` from its
own thread, so a busy event loop cannot starve it (R11).

Every state change is ONE conditional write; a method that reports `False`/`None` changed
nothing. No method does a read-modify-write in the client.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from abc import ABC, abstractmethod
from collections.abc import Sequence

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    BadObject,
    Claimed,
    ClaimRead,
    ClaimWrite,
    Fence,
    Grant,
    ObjectRef,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    StoreUnavailable,
    SubjectKind,
    Timer,
    TurnStart,
    Vote,
)

log = logging.getLogger(__name__)


class StoreError(StoreUnavailable):
    """A backend fault that outlasted its retries. Nothing was changed by the failed call."""


class ObjectExists(BadObject):
    """A write-once object key was written before."""


class CorruptObject(BadObject):
    """An object's bytes do not match the checksum recorded when it was written."""


class RowStore(ABC):
    # True when a read is a local lookup that does not wait on writers (SQLite in WAL mode: an
    # indexed read of a hot page, ~10 us). The async ports then run reads on the event loop
    # instead of paying a thread hop (~0.2-0.5 ms here) for them. Writes always hop (fsync).
    local_reads: bool = False

    # --- pointers (R7-R13): one row per chat -------------------------------------------
    @abstractmethod
    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        """Create the chat's open request, only if it has none: the row is absent, done,
        expired, or past its logical expiry (R7)."""

    @abstractmethod
    def get_pointer(self, chat: str) -> Pointer | None: ...

    @abstractmethod
    def get_pointer_by_card(self, card_id: str) -> Pointer | None:
        """The pointer whose CURRENT card is `card_id` (a strongly consistent read)."""

    @abstractmethod
    def claim(
        self, read: ClaimRead, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        """R10: hash AND id match AND (pending OR (claimed AND lease < now)) AND expires_at > now
        AND claim_count = read.claim_count; sets claimed, worker, lease, deadline, count+1.
        Returns the pointer as written (its claim_count is the fencing token), else None."""

    @abstractmethod
    def renew(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        """Extend the lease; only while holding it (claimed, same worker and token, lease live)."""

    @abstractmethod
    def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        """R12: holding -> done, with where the final answer is. `session`: only if it applied,
        point the chat's history at the resumed turn's (as put_session), in the same write where
        the backend allows it."""

    @abstractmethod
    def replace(self, fence: Fence, *, new: Pointer) -> bool:
        """R13: holding -> the chained request (new card id, new secret hash, pending, count 0)."""

    @abstractmethod
    def expire(self, chat: str, card_id: str, now: float, answer_key: str | None = None) -> bool:
        """Mark expired: id matches AND state is pending or claimed with a lapsed lease.
        (A live lease is never expired from under its worker.)"""

    @abstractmethod
    def vote(self, *, chat: str, card_id: str, secret_hash: str, vote: Vote, now: float) -> Pointer | None:
        """Record one approver's vote (a card that needs a quorum): ONE conditional write, only while
        `card_id` is the chat's card with `secret_hash`, pending, not past expiry, and `vote.user` has
        not voted on it. Returns the pointer as written (votes in the order they were recorded);
        None when nothing changed: already voted, or the card is no longer open (read it to tell)."""

    @abstractmethod
    def set_card_location(self, chat: str, card_id: str, location: dict[str, str]) -> bool:
        """Record where the card was posted, while `card_id` is still the chat's card."""

    @abstractmethod
    def rotate_secret(self, chat: str, card_id: str, old_hash: str, new_hash: str, now: float) -> bool:
        """R19: a card shown again gets a new secret, never the old one re-read. Applies only while
        `card_id` is the chat's card, its hash is `old_hash`, it is answerable (pending, or claimed
        with a lapsed lease) and not past expiry. The old secret stops working."""

    # --- the per-chat turn lease: one turn per chat across replicas ---------------------
    @abstractmethod
    def take_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        """Hold the chat's turn: only if nobody holds it (absent, released, or its lease lapsed)."""

    @abstractmethod
    def renew_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        """Extend the turn lease; only while `holder` holds it and it has not lapsed."""

    @abstractmethod
    def release_turn(self, chat: str, holder: str) -> bool:
        """Give the turn back; only `holder` can."""

    # --- grants (R14) ------------------------------------------------------------------
    @abstractmethod
    def put_grant(self, grant: Grant, ttl: float) -> None:
        """Create or refresh the grant (user, chat, kind, name); the sweep deletes it after `ttl`.
        A grant with a `turn_id` (a `once` grant) is listed like any other: callers decide."""

    @abstractmethod
    def list_grants(self, user: str, chat: str | None, now: float) -> list[Grant]:
        """Live grants of `user` in `chat` (or in every chat when None), sorted by chat, kind, name."""

    @abstractmethod
    def delete_grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool: ...

    # --- per-turn refusals (written by the egress gate, read by the approval tool) -----
    @abstractmethod
    def record_refusal(self, refusal: Refusal, ttl: float) -> bool:
        """Idempotent per (chat, turn, kind, name): True only for the first record."""

    @abstractmethod
    def list_refusals(self, chat: str, turn_id: str) -> list[Refusal]: ...

    # --- delivery dedupe (Slack retries, Teams redeliveries) ----------------------------
    @abstractmethod
    def claim_event(self, key: str, now: float, ttl: float) -> bool:
        """True for the first delivery of `key`, False for every later one (until ttl)."""

    # --- audit trail (append-only) -----------------------------------------------------
    @abstractmethod
    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        """Append the event and, in the same write where the backend allows it, its outbox items
        (one per audit sink). Where it does not, the outbox items are written first: an event in
        the trail always has its outbox items (an outbox item without its event is possible)."""

    @abstractmethod
    def list_audit(self, chat: str) -> list[AuditEvent]:
        """In the order they were appended."""

    @abstractmethod
    def list_audit_since(self, since: float) -> list[AuditEvent]:
        """Every chat's events with `at >= since`, sorted by (at, chat, append order). An export
        (it may scan the table), not a protocol path."""

    # --- audit outbox (at-least-once delivery to webhooks) ------------------------------
    @abstractmethod
    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        """Take (or renew) the sink's delivery lease, one conditional write: only if nobody else
        holds it or their lease lapsed. Holding it: up to `limit` of the sink's items, oldest
        first (append order, so per-chat order). Not holding it: []. The holder gives the lease
        up by renewing it into the past (`lease_until < now`)."""

    @abstractmethod
    def delete_outbox(self, sink: str, item_id: str) -> bool:
        """The item was delivered: remove it. False when it was already gone."""

    # --- conversation history (what a later turn in the chat remembers) ----------------
    @abstractmethod
    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        """Point the chat's history at object `key`, only if `seq` is not older than the stored
        one (a slower turn never rolls the history back)."""

    @abstractmethod
    def get_session(self, chat: str) -> str | None:
        """The object key of the chat's latest history, if any."""

    # --- durable timers (issue 33): reminders, escalation, expiry ------------------------
    @abstractmethod
    def put_timers(self, timers: Sequence[Timer]) -> None:
        """Schedule a card's timers. A timer already stored (same card and name), fired or not,
        is left as it is: scheduling again never fires anything twice."""

    @abstractmethod
    def claim_timers(self, holder: str, now: float, lease_until: float, since: float, limit: int) -> list[Timer]:
        """Take (or renew) the timers' lease, one conditional write, as claim_outbox does: only if
        nobody else holds it or their lease lapsed. Holding it: up to `limit` timers not yet fired
        with `since <= due_at <= now`, earliest first, read through an index on the due time (never
        a scan of every card). Not holding it: []. Given up by renewing into the past."""

    @abstractmethod
    def fire_timer(self, timer: Timer, now: float) -> bool:
        """Mark the timer fired, one conditional write: True exactly once per scheduled timer,
        False for every later call (and for a timer never scheduled). A fired timer is no longer
        listed by claim_timers."""

    # --- Slack installations (issue 31): Bolt's InstallationStore on this store ---------
    # Opaque records by key (bots/slack_install.py builds both and seals the tokens inside, R19);
    # no expiry: an installation lasts until it is replaced or Slack says it was removed.
    @abstractmethod
    def put_installation(self, key: str, record: str) -> None:
        """Create or replace the record under `key`."""

    @abstractmethod
    def get_installation(self, key: str) -> str | None:
        """The record under `key`, or None (a strongly consistent read)."""

    @abstractmethod
    def delete_installation(self, key: str) -> bool:
        """Remove the record; False when there was none."""

    # --- physical expiry ---------------------------------------------------------------
    @abstractmethod
    def sweep(self, now: float) -> int:
        """Delete every row whose physical expiry (ttl) is before `now`; returns how many."""

    # --- compound steps (issue 12): several of the calls above in ONE round trip -------------
    # The defaults below compose the single calls (a backend without multi-item writes); a
    # backend that can overrides them with one transaction. Each state change inside is still
    # the same one conditional write as its single call.

    def begin_turn(self, chat: str, holder: str, user: str, now: float, lease_until: float) -> TurnStart:
        """take_turn and, only if it was taken, what the turn starts from: the chat's pointer,
        `user`'s live grants in the chat and the chat's history key."""
        if not self.take_turn(chat, holder, now, lease_until):
            return TurnStart(taken=False)
        return TurnStart(True, self.get_pointer(chat), tuple(self.list_grants(user, chat, now)), self.get_session(chat))

    def end_turn(
        self,
        chat: str,
        holder: str,
        *,
        now: float,
        pointer: Pointer | None = None,
        audit: Sequence[AuditWrite] = (),
        session: SessionWrite | None = None,
    ) -> bool:
        """End the turn `holder` holds: write `pointer` as put_pointer does (R7; its `audit` only
        when it was written), point the history at `session` as put_session does, and release
        the turn lease (release_turn). Returns whether the pointer was written (True without one).
        On a fault nothing is promised about the lease beyond release_turn's own (it lapses)."""
        written = True
        try:
            if pointer is not None:
                written = self.put_pointer(pointer, now)
                if written:
                    self._append_all(audit)
            if session is not None:
                self.put_session(session.chat, session.key, session.seq, session.ttl)
        finally:
            self.release_turn(chat, holder)
        return written

    def claim_grants(self, w: ClaimWrite) -> Claimed | None:
        """R10's claim, exactly as `claim`, and only if it was won: the events `before`, the
        grant changes in order (R14), the events `after`, all in the claim's write where the
        backend allows it; then the owner's live grants in the chat (as list_grants at `now`).
        None when the claim was lost: then nothing else was written. The events are written
        together after the grant changes, in that order (one statement where the backend can)."""
        won = self.claim(
            w.read, worker=w.worker, now=w.now, lease_until=w.lease_until, resume_deadline=w.resume_deadline
        )
        if won is None:
            return None
        audit = list(w.before)
        for c in w.changes:
            g = c.grant
            if c.delete:
                if self.delete_grant(g.user, g.chat, g.kind, g.name):
                    audit.append(c.audit)
            else:
                self.put_grant(g, c.ttl)
                audit.append(c.audit)
        self._append_all([*audit, *w.after])
        return Claimed(won, tuple(self.list_grants(won.owner, won.chat, w.now)))

    def atomic(self) -> contextlib.AbstractContextManager[object]:
        """A step's writes (rows, and objects kept in the same database) in one commit where the
        backend has transactions; elsewhere each write stays its own (the default: nothing)."""
        return contextlib.nullcontext()

    def _append_all(self, audit: Sequence[AuditWrite]) -> None:
        for a in audit:
            try:
                self.append_audit(a.event, a.ttl, a.outbox)
            except StoreUnavailable as e:  # the audit trail never blocks the protocol
                log.warning("audit append failed: %s", e)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


def verified(key: str, data: bytes, stored: str | None, expected: str | None) -> bytes:
    """An object's bytes, checked against the checksum stored beside them and, when the caller
    holds one (its ObjectRef), against that too; CorruptObject on any mismatch."""
    actual = hashlib.sha256(data).hexdigest()
    if actual != stored or (expected is not None and actual != expected):
        raise CorruptObject(f"checksum mismatch for {key}")
    return data


class ObjectStore(ABC):
    """Write-once blobs (snapshots, answers), checksummed."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> ObjectRef:
        """Write `data` under a new key; return only once the write is confirmed durable.
        Raises ObjectExists if the key was written before."""

    @abstractmethod
    def get(self, ref: ObjectRef) -> bytes:
        """Read and verify against `ref.sha256`; raises CorruptObject on a mismatch,
        KeyError when absent."""

    @abstractmethod
    def get_key(self, key: str) -> bytes | None:
        """Read by key alone (verified against the checksum stored beside it); None when absent."""

    @abstractmethod
    def sweep(self, older_than: float) -> int:
        """Delete objects written before `older_than`, and the leftovers of interrupted writes
        from before it; returns how many."""
