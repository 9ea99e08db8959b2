"""The core's async ports (core/ports.py) over a blocking backend: runs blocking store calls
off the event loop (never block aiohttp on a write, a network call or an fsync); the core
calls them as `await rows.claim(pointer=p, worker=w, ...)`.
A backend whose reads are local and never wait on a writer (SQLite in WAL mode) has its reads
run on the loop itself: a thread hop costs 20-50x such a read (issue 12).

The ports are thin: one backend call each, keyword arguments, a `Fence` for every write made
under a claim. Every state change is still the backend's one conditional write.

`Steps` (issue 12): a protocol step whose store calls are sequential anyway (the snapshot PUT
then the pointer write, R7) runs them in ONE executor hop instead of one hop per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from chat_approvals.core import ports
from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
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
    Vote,
)
from chat_approvals.core.ports import Claim, History, Loaded, Offer, Offered, Started
from chat_approvals.store.base import ObjectStore, RowStore
from chat_approvals.store.store_threads import StoreThreads

__all__ = ["Loaded", "Objects", "Offered", "Outbox", "Rows", "Started", "Steps", "StoreIO"]

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


def _hand_over(
    loop: asyncio.AbstractEventLoop, done: asyncio.Future[T], result: T | None, error: BaseException | None
) -> None:
    """From the store's thread: settle `done` on its loop (unless the awaiting task gave up)."""

    def settle() -> None:
        if done.cancelled():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]  # None only with an error

    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits the result
        loop.call_soon_threadsafe(settle)


class StoreIO:
    """The rows, the objects, and the threads their calls run on."""

    def __init__(self, rows: RowStore, objects: ObjectStore, workers: int = 4) -> None:
        self.rows = rows
        self.objects = objects
        self._threads = StoreThreads(workers)
        self._local_reads = bool(getattr(rows, "local_reads", False))

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn` on the store's threads (store/store_threads.py). The thread hands its result
        straight to the loop (one call_soon_threadsafe) rather than through an executor's
        chained futures, and goes back to its queue at once. A call cancelled before its thread
        took it does not run (as with an executor)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[T] = loop.create_future()
        # the caller's context variables go with the call, as with asyncio.to_thread: the
        # OpenTelemetry context among them (an instrumented client's spans in the store's thread
        # stay in the caller's trace, as OpenTelemetry's wrapper on an executor's submit made them)
        context = contextvars.copy_context()

        def job(ready: Callable[[], None]) -> None:
            if done.cancelled():  # the awaiting task gave up before this thread took the call
                ready()
                return
            try:
                result = context.run(fn, *args, **kwargs)
            except BaseException as e:  # handed to the awaiting task, as an executor does
                ready()
                _hand_over(loop, done, None, e)
            else:
                ready()
                _hand_over(loop, done, result, None)

        self._threads.submit(job)
        return await done

    async def read(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """A small rows read (one row, or a user's grants, a turn's refusals): on the loop itself
        when the backend's reads are local and never wait on a writer (`RowStore.local_reads`,
        SQLite), else one hop like `run` (a network call). Listings that grow without bound (a
        chat's audit) use `run`."""
        if self._local_reads:
            return fn(*args, **kwargs)
        return await self.run(fn, *args, **kwargs)

    def ports(self) -> ports.Ports:
        return ports.Ports(Rows(self), Objects(self), Steps(self), Outbox(self))

    def close(self) -> None:
        self._threads.shutdown()
        self.rows.close()


class Rows(ports.Rows):
    """The rows port: async, keyword-only calls over the backend's conditional writes."""

    def __init__(self, io: StoreIO) -> None:
        self._io = io
        self._b = io.rows

    # --- pointers ----------------------------------------------------------------------
    async def put_pointer(self, pointer: Pointer, *, now: float) -> bool:
        return await self._io.run(self._b.put_pointer, pointer, now)

    async def pointer(self, *, chat: str) -> Pointer | None:
        return await self._io.read(self._b.get_pointer, chat)

    async def pointer_by_card(self, card_id: str) -> Pointer | None:
        return await self._io.read(self._b.get_pointer_by_card, card_id)

    async def claim(
        self, read: Pointer, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        """R10: claim the card as `read` (its id, secret hash and claim count are the condition)."""
        return await self._io.run(
            functools.partial(
                self._b.claim,
                ClaimRead(read.chat, read.card_id, read.secret_hash, read.claim_count),
                worker=worker,
                now=now,
                lease_until=lease_until,
                resume_deadline=resume_deadline,
            )
        )

    def renew_now(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        """Synchronous on purpose: the heartbeat thread calls it (R11)."""
        return self._b.renew(fence, now=now, lease_until=lease_until)

    async def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        return await self._io.run(functools.partial(self._b.finish, fence, answer_key=answer_key, session=session))

    async def replace(self, fence: Fence, *, new: Pointer) -> bool:
        return await self._io.run(functools.partial(self._b.replace, fence, new=new))

    async def expire(self, *, chat: str, card_id: str, now: float) -> bool:
        return await self._io.run(self._b.expire, chat, card_id, now)

    async def set_card_location(self, *, chat: str, card_id: str, location: dict[str, str]) -> bool:
        return await self._io.run(self._b.set_card_location, chat, card_id, location)

    async def rotate_secret(self, read: Pointer, *, new_hash: str, now: float) -> bool:
        """R19: only while `read` is still the chat's answerable card with the same secret."""
        return await self._io.run(self._b.rotate_secret, read.chat, read.card_id, read.secret_hash, new_hash, now)

    # --- the per-chat turn lease ---------------------------------------------------------
    async def take_turn(self, *, chat: str, holder: str, now: float, lease_until: float) -> bool:
        return await self._io.run(self._b.take_turn, chat, holder, now, lease_until)

    def renew_turn_now(self, *, chat: str, holder: str, now: float, lease_until: float) -> bool:
        """Synchronous on purpose: the heartbeat thread calls it."""
        return self._b.renew_turn(chat, holder, now, lease_until)

    async def release_turn(self, *, chat: str, holder: str) -> bool:
        return await self._io.run(self._b.release_turn, chat, holder)

    # --- grants, refusals, events, audit, sessions ---------------------------------------
    async def put_grant(self, grant: Grant, *, ttl: float) -> None:
        await self._io.run(self._b.put_grant, grant, ttl)

    async def grants(self, *, user: str, chat: str | None, now: float) -> list[Grant]:
        return await self._io.read(self._b.list_grants, user, chat, now)

    async def delete_grant(self, *, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        return await self._io.run(self._b.delete_grant, user, chat, kind, name)

    async def record_refusal(self, refusal: Refusal, *, ttl: float) -> bool:
        return await self._io.run(self._b.record_refusal, refusal, ttl)

    async def refusals(self, *, chat: str, turn_id: str) -> list[Refusal]:
        return await self._io.read(self._b.list_refusals, chat, turn_id)

    async def vote(self, read: Pointer, *, vote: Vote, now: float) -> Pointer | None:
        """One approver's vote on the card as `read` (its id and secret hash are the condition)."""
        return await self._io.run(
            self._b.vote, chat=read.chat, card_id=read.card_id, secret_hash=read.secret_hash, vote=vote, now=now
        )

    async def claim_event(self, key: str, *, now: float, ttl: float) -> bool:
        return await self._io.run(self._b.claim_event, key, now, ttl)

    async def append_audit(self, event: AuditEvent, *, ttl: float) -> None:
        await self._io.run(self._b.append_audit, event, ttl)

    async def audit(self, *, chat: str) -> list[AuditEvent]:
        return await self._io.run(self._b.list_audit, chat)

    async def audit_since(self, *, since: float) -> list[AuditEvent]:
        return await self._io.run(self._b.list_audit_since, since)

    async def put_session(self, *, chat: str, key: str, seq: float, ttl: float) -> bool:
        return await self._io.run(self._b.put_session, chat, key, seq, ttl)

    async def session(self, *, chat: str) -> str | None:
        return await self._io.read(self._b.get_session, chat)

    async def sweep(self, *, now: float) -> int:
        return await self._io.run(self._b.sweep, now)

    # --- durable timers (issue 33) -------------------------------------------------------
    async def put_timers(self, timers: Sequence[Timer]) -> None:
        await self._io.run(self._b.put_timers, list(timers))

    async def claim_timers(
        self, *, holder: str, now: float, lease_until: float, since: float, limit: int
    ) -> list[Timer]:
        return await self._io.run(self._b.claim_timers, holder, now, lease_until, since, limit)

    async def fire_timer(self, timer: Timer, *, now: float) -> bool:
        return await self._io.run(self._b.fire_timer, timer, now)

    async def put_installation(self, key: str, record: str) -> None:
        await self._io.run(self._b.put_installation, key, record)

    async def installation(self, key: str) -> str | None:
        return await self._io.read(self._b.get_installation, key)

    async def delete_installation(self, key: str) -> bool:
        return await self._io.run(self._b.delete_installation, key)


class Objects(ports.Objects):
    """The objects port: write-once, checksummed blobs."""

    def __init__(self, io: StoreIO) -> None:
        self._io = io
        self._b = io.objects

    async def put(self, key: str, data: bytes) -> ObjectRef:
        return await self._io.run(self._b.put, key, data)

    async def get(self, ref: ObjectRef) -> bytes:
        return await self._io.run(self._b.get, ref)

    async def get_key(self, key: str) -> bytes | None:
        return await self._io.run(self._b.get_key, key)

    async def sweep(self, *, older_than: float) -> int:
        return await self._io.run(self._b.sweep, older_than)


class Outbox(ports.Outbox):
    """The outbox port: what the audit webhooks deliver (core/ports.py)."""

    def __init__(self, io: StoreIO) -> None:
        self._io = io
        self._b = io.rows

    async def claim(self, *, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        return await self._io.run(self._b.claim_outbox, sink, holder, now, lease_until, limit)

    async def delete(self, *, sink: str, item_id: str) -> bool:
        return await self._io.run(self._b.delete_outbox, sink, item_id)


def claim_read(p: Pointer) -> ClaimRead:
    return ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count)


class Steps(ports.Steps):
    """Protocol steps, each ONE executor hop over the sequential calls it makes."""

    def __init__(self, io: StoreIO) -> None:
        self._io = io

    async def start_turn(
        self, *, chat: str, holder: str, user: str, now: float, lease_until: float, history: bool
    ) -> Started:
        rows, objects = self._io.rows, self._io.objects

        def step() -> Started:
            start = rows.begin_turn(chat, holder, user, now, lease_until)
            raw = None
            if history and start.taken and start.session:
                try:
                    raw = objects.get_key(start.session)
                except Exception as e:  # a lost or unreadable history: start the chat afresh
                    log.warning("history of %s not restored: %s", chat, e)
            return Started(start, raw)

        return await self._io.run(step)

    async def offer(self, step: Offer) -> Offered:
        """R7: snapshot (a confirmed PUT) -> pointer (conditional) with its audit events, in that
        order; with `step.turn` the pointer write is end_turn's, with `step.holding` replace's."""
        rows, objects = self._io.rows, self._io.objects
        now, audit, turn, holding = step.now, step.audit, step.turn, step.holding

        def hop() -> Offered:
            try:
                with rows.atomic():  # objects kept in the rows' SQLite file: one commit for all
                    return writes()
            except Exception as e:  # the commit itself failed: nothing was written
                return Offered(False, e, "pointer")

        def writes() -> Offered:
            try:
                ref = objects.put(step.key, step.data)
            except Exception as e:  # any fault of the object store: no pointer, no card
                return Offered(False, e, "snapshot")
            p = step.pointer(ref)
            if step.timers:  # before the pointer (a timer whose card never got one does nothing)
                try:
                    rows.put_timers(step.timers)
                except StoreUnavailable as e:  # the card still works; it is just not reminded
                    log.warning("timers of card %s not stored: %s", p.card_id, e)
            try:
                if turn is not None:
                    written = rows.end_turn(turn[0], turn[1], now=now, pointer=p, audit=audit)
                    return Offered(written)
                written = rows.replace(holding, new=p) if holding is not None else rows.put_pointer(p, now)
            except Exception as e:
                return Offered(False, e, "pointer")
            if written:
                for a in audit:
                    try:
                        rows.append_audit(a.event, a.ttl, a.outbox)
                    except StoreUnavailable as e:  # the audit trail never blocks the protocol
                        log.warning("audit append failed: %s", e)
            return Offered(written)

        return await self._io.run(hop)

    async def claim(self, step: Claim) -> Loaded:
        """R10's claim with its grants and audit events (claim_grants), then, if won, the stored
        run's bytes (the snapshot is write-once, so reading it after the claim changes nothing)."""
        rows, objects = self._io.rows, self._io.objects

        def hop() -> Loaded:
            won = rows.claim_grants(
                ClaimWrite(
                    claim_read(step.read),
                    step.worker,
                    step.now,
                    step.lease_until,
                    step.resume_deadline,
                    step.changes,
                    step.before,
                    step.after,
                )
            )
            if won is None or not step.load:
                return Loaded(won)
            try:
                return Loaded(won, objects.get(won.pointer.snapshot))
            except Exception as e:
                return Loaded(won, None, e)

        return await self._io.run(hop)

    async def complete(
        self,
        fence: Fence,
        *,
        answer_key: str,
        answer: bytes,
        history: History | None = None,
    ) -> bool:
        """R12: the answer (a confirmed PUT), the history object when there is one (best effort),
        then finish, pointing the chat's history at it in the same write. `history`: (key, bytes,
        seq, ttl)."""
        rows, objects = self._io.rows, self._io.objects

        def step() -> bool:
            with rows.atomic():  # objects kept in the rows' SQLite file: one commit for all
                objects.put(answer_key, answer)
                session = None
                if history is not None:
                    key, data, seq, ttl = history
                    try:
                        session = SessionWrite(fence.chat, objects.put(key, data).key, seq, ttl)
                    except Exception as e:
                        log.warning("history of %s not saved: %s", fence.chat, e)
                return rows.finish(fence, answer_key=answer_key, session=session)

        return await self._io.run(step)

    async def end_turn(self, *, chat: str, holder: str, now: float, history: History | None) -> None:
        """An answered turn's last step: the history object (best effort), then end_turn with the
        session row pointing at it."""
        rows, objects = self._io.rows, self._io.objects

        def step() -> None:
            session = None
            if history is not None:
                key, data, seq, ttl = history
                try:
                    session = SessionWrite(chat, objects.put(key, data).key, seq, ttl)
                except Exception as e:
                    log.warning("history of %s not saved: %s", chat, e)
            rows.end_turn(chat, holder, now=now, session=session)

        await self._io.run(step)

    async def audit(self, write: AuditWrite) -> None:
        await self._io.run(self._io.rows.append_audit, write.event, write.ttl, write.outbox)
