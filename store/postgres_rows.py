"""The PostgreSQL row store: psycopg 3 on a connection pool, no ORM, one statement per state change.

Why the synchronous pool (psycopg_pool.ConnectionPool) and not AsyncConnectionPool: the store has
ONE interface (store/base.py RowStore, synchronous) and ONE conformance suite; the core already
runs every store call off the event loop on StoreIO's executor (store/aio.py), and the lease
heartbeat renews from its own thread (R11), which an event-loop pool would tie back to a loop that
may be busy. A blocking call on a pooled connection in an executor thread keeps the loop free
(R21) with the same code the conformance suite checks. docs/postgres.md says the same.

Connections are in autocommit: a single conditional UPDATE/INSERT ... RETURNING is its own
transaction, one round trip, and its WHERE carries the whole condition, so two replicas can never
both win (the claim is `UPDATE ... WHERE <still claimable> RETURNING *`). A compound step is one
statement of conditional CTEs (store/postgres_steps.py): one round trip, one implicit transaction.
Inside `atomic`, a step's object puts ride in its next row statement, as CTEs.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    Claimed,
    ClaimRead,
    ClaimWrite,
    Fence,
    Grant,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    Timer,
    TurnStart,
    Vote,
)
from chat_approvals.store import postgres_steps as steps
from chat_approvals.store.base import ObjectExists, RowStore, StoreError
from chat_approvals.store.pointer_docs import PointerDocs, row_columns
from chat_approvals.store.postgres_schema import check_schema
from chat_approvals.store.postgres_target import FAULTS, PgTarget, open_pool, parse_target, store_error

_HOLDING = "chat = %s AND card_id = %s AND state = 'claimed' AND worker = %s AND claim_count = %s"
_SWEEP_BATCH = 500
SWEPT = (
    "pointers",
    "grants",
    "refusals",
    "events",
    "sessions",
    "audit",
    "turns",
    "outbox",
    "outbox_leases",
    "timers",
    "timer_leases",
)


@dataclass(frozen=True)
class Ran:
    """A statement's result, read before its connection goes back to the pool."""

    rowcount: int
    rows: list[dict[str, Any]]

    def fetchone(self) -> dict[str, Any] | None:
        return self.rows[0] if self.rows else None


def _held(f: Fence) -> tuple[str, str, str, int]:
    return (f.chat, f.card_id, f.worker, f.token)


class PostgresRows(RowStore):
    local_reads = False  # every read is a round trip to the server

    def __init__(
        self,
        target: PgTarget | str,
        *,
        check: bool = True,
        configure: Callable[[psycopg.Connection[Any]], None] | None = None,
    ) -> None:
        """`check`: refuse a schema older than this code needs (SchemaTooOld, a ValueError);
        `configure`: called on each new pooled connection."""
        self.target = parse_target(target) if isinstance(target, str) else target
        self.pool: ConnectionPool[Any] = open_pool(self.target, configure)
        self._local = threading.local()
        self._docs = PointerDocs()  # the pointers written and read, by their document's text
        if check:
            try:
                with self.pool.connection() as conn:
                    check_schema(conn, self.target.schema, self.target.shown)
            except FAULTS as e:
                self.pool.close()
                raise ValueError(f"--store {self.target.shown}: cannot reach PostgreSQL ({e})") from None
            except BaseException:
                self.pool.close()
                raise

    # --- connections -------------------------------------------------------------------
    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """This thread's transaction's connection inside `atomic`/a compound step, else a pooled one."""
        held: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        with self.pool.connection() as conn:
            yield conn

    def _exec(self, query: str, args: Sequence[Any] = ()) -> Ran:
        """One statement, its rows read. Off a transaction it commits on its own (autocommit).
        Inside `atomic`, the writes deferred before it (objects' puts) go in front of it, in the
        same statement: one round trip, one implicit transaction."""
        try:
            with self.connection() as conn:
                pending: list[tuple[str, Sequence[Any]]] | None = getattr(self._local, "pending", None)
                if pending:
                    return self._send_with(conn, pending, query, args)
                cur = conn.execute(query.encode(), args)
                rows = cur.fetchall() if cur.description is not None else []
                return Ran(cur.rowcount, rows)
        except FAULTS as e:
            self._after_fault()
            raise store_error(e) from e

    def _send_with(
        self, conn: psycopg.Connection[Any], pending: list[tuple[str, Sequence[Any]]], query: str, args: Sequence[Any]
    ) -> Ran:
        """The deferred writes and this statement as ONE statement, the writes as data-modifying
        CTEs in front of it (store/postgres_steps.py `fold`): one round trip, one implicit
        transaction, all or none. Prepared like any other (prepare_threshold), its parameters
        bound, the bytes in binary: nothing quoted into the text here."""
        text, all_args = steps.fold(pending, query, args)
        pending.clear()
        try:
            cur = conn.execute(text.encode(), all_args)
        except psycopg.errors.UniqueViolation as e:  # a deferred put's key was written before
            raise ObjectExists(str(e).strip()) from e
        rows = cur.fetchall() if cur.description is not None else []
        return Ran(cur.rowcount, rows)

    def defer(self, query: str, args: Sequence[Any]) -> bool:
        """Inside `atomic`: keep a write whose result nobody waits for (an object's put) to send
        with the step's next statement; False (nothing kept) outside. `query`: one plain INSERT,
        UPDATE or DELETE with no WITH of its own (it becomes a CTE of that statement)."""
        pending: list[tuple[str, Sequence[Any]]] | None = getattr(self._local, "pending", None)
        if pending is None or getattr(self._local, "conn", None) is None:
            return False
        pending.append((query, args))
        return True

    def _after_fault(self) -> None:
        """A dropped server leaves every idle pooled connection dead: drop them now (one check each)
        rather than failing one later call per connection. Only off a transaction."""
        if getattr(self._local, "conn", None) is None:
            with contextlib.suppress(Exception):
                self.pool.check()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction on one connection; the calls inside use it (they see `_local.conn`).
        Nested: a savepoint. Any exception inside rolls it back: the step changed nothing."""
        held: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if held is not None:
            try:
                with held.transaction():
                    yield held
            except FAULTS as e:
                raise store_error(e) from e
            return
        try:
            with self.pool.connection() as conn:
                self._local.conn = conn
                try:
                    with conn.transaction():
                        yield conn
                finally:
                    self._local.conn = None
        except FAULTS as e:
            self._after_fault()
            raise store_error(e) from e

    def prefetched(self, key: str) -> tuple[bytes, str] | None:
        """The object `key` (bytes, stored checksum) when this thread's last claim read it along
        (a click's next step reads the snapshot it claimed); once."""
        got: tuple[str, bytes, str] | None = getattr(self._local, "prefetched", None)
        if got is None or got[0] != key:
            return None
        self._local.prefetched = None
        return got[1], got[2]

    def atomic(self) -> contextlib.AbstractContextManager[object]:
        """A step: its objects' puts (store/postgres_objects.py bound to this store) ride in the
        step's next row statement, in one statement and one implicit transaction (the compound steps
        are one statement each: one round trip for the whole step). Puts with no statement after
        them are sent at the end. Nested: part of the outer step; a failed inner step drops the
        puts it kept. Each statement the step sends commits on its own (as on DynamoDB)."""
        return self._step()

    @contextlib.contextmanager
    def _step(self) -> Iterator[None]:
        pending: list[tuple[str, Sequence[Any]]] | None = getattr(self._local, "pending", None)
        if pending is not None:  # nested
            mark = len(pending)
            try:
                yield
            except BaseException:
                del pending[mark:]
                raise
            return
        try:
            with self.pool.connection() as conn:
                self._local.conn, self._local.pending = conn, []
                try:
                    yield
                    if self._local.pending:
                        self._exec("SELECT 1")  # the puts left, in one statement
                finally:
                    self._local.conn = self._local.pending = None
        except FAULTS as e:
            self._after_fault()
            raise store_error(e) from e

    def close(self) -> None:
        self.pool.close()

    def ping(self) -> None:
        """One round trip; StoreError when the database does not answer."""
        self._exec("SELECT 1")

    # --- pointers ----------------------------------------------------------------------
    def _to_pointer(self, row: dict[str, Any] | None) -> Pointer | None:
        """The row as a Pointer: its document validated once per text (store/pointer_docs.py),
        its columns every time."""
        if row is None:
            return None
        location = row["card_location"]
        columns = row_columns(row, json.loads(location) if location else None, row["votes"] or [])
        return self._docs.pointer(row["doc"], columns)

    def _columns(self, p: Pointer) -> tuple[Any, ...]:
        return (
            p.chat,
            p.card_id,
            p.secret_hash,
            p.state,
            p.expires_at,
            p.ttl,
            p.claim_count,
            p.worker,
            p.lease_until,
            p.resume_deadline,
            json.dumps(p.card_location) if p.card_location else None,
            p.answer_key,
            self._docs.document(p),
            Jsonb([v.model_dump() for v in p.votes]),
        )

    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        return self._exec(steps.PUT_POINTER, steps.pointer_args(self._columns(pointer), now)).rowcount == 1

    def get_pointer(self, chat: str) -> Pointer | None:
        return self._to_pointer(self._exec("SELECT * FROM pointers WHERE chat = %s", (chat,)).fetchone())

    def get_pointer_by_card(self, card_id: str) -> Pointer | None:
        return self._to_pointer(self._exec("SELECT * FROM pointers WHERE card_id = %s", (card_id,)).fetchone())

    CLAIM = steps.CLAIM

    def claim(
        self, read: ClaimRead, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        w = ClaimWrite(read, worker, now, lease_until, resume_deadline)
        return self._to_pointer(self._exec(self.CLAIM, steps.claim_args(w)).fetchone())

    def renew(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        cur = self._exec(
            f"UPDATE pointers SET lease_until = %s WHERE {_HOLDING} AND lease_until >= %s",
            (lease_until, *_held(fence), now),
        )
        return cur.rowcount == 1

    def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        query = f"UPDATE pointers SET state = 'done', answer_key = %s, lease_until = NULL WHERE {_HOLDING}"
        if session is None:
            return self._exec(query, (answer_key, *_held(fence))).rowcount == 1
        # one statement: the session moves only if the finish applied (a CTE sees the UPDATE's rows)
        cur = self._exec(
            f"""WITH done AS ({query} RETURNING chat),
                    s AS (INSERT INTO sessions (chat, key, seq, ttl)
                          SELECT %s, %s, %s, %s FROM done
                          ON CONFLICT (chat) DO UPDATE SET key = excluded.key, seq = excluded.seq,
                            ttl = excluded.ttl
                          WHERE sessions.seq <= excluded.seq)
                SELECT count(*) AS n FROM done""",
            (answer_key, *_held(fence), session.chat, session.key, session.seq, session.ttl),
        )
        row = cur.fetchone()
        return row is not None and row["n"] == 1

    def replace(self, fence: Fence, *, new: Pointer) -> bool:
        if new.chat != fence.chat:
            raise ValueError("a chained card stays in its chat")
        cols = self._columns(new)
        cur = self._exec(
            f"""UPDATE pointers SET card_id = %s, sh = %s, state = %s, expires_at = %s, ttl = %s,
                  claim_count = %s, worker = %s, lease_until = %s, resume_deadline = %s, card_location = %s,
                  answer_key = %s, doc = %s, votes = %s
                WHERE {_HOLDING}""",
            (*cols[1:], *_held(fence)),
        )
        return cur.rowcount == 1

    def expire(self, chat: str, card_id: str, now: float, answer_key: str | None = None) -> bool:
        cur = self._exec(
            """UPDATE pointers SET state = 'expired', lease_until = NULL,
                 answer_key = COALESCE(%s, answer_key)
               WHERE chat = %s AND card_id = %s
                 AND (state = 'pending' OR (state = 'claimed' AND lease_until < %s))""",
            (answer_key, chat, card_id, now),
        )
        return cur.rowcount == 1

    def vote(self, *, chat: str, card_id: str, secret_hash: str, vote: Vote, now: float) -> Pointer | None:
        cur = self._exec(
            """UPDATE pointers SET votes = votes || jsonb_build_array(%s::jsonb)
               WHERE chat = %s AND card_id = %s AND sh = %s AND state = 'pending' AND expires_at > %s
                 AND NOT votes @> jsonb_build_array(jsonb_build_object('user', %s::text))
               RETURNING *""",
            (vote.model_dump_json(), chat, card_id, secret_hash, now, vote.user),
        )
        return self._to_pointer(cur.fetchone())

    def set_card_location(self, chat: str, card_id: str, location: dict[str, str]) -> bool:
        cur = self._exec(
            "UPDATE pointers SET card_location = %s WHERE chat = %s AND card_id = %s",
            (json.dumps(location), chat, card_id),
        )
        return cur.rowcount == 1

    def rotate_secret(self, chat: str, card_id: str, old_hash: str, new_hash: str, now: float) -> bool:
        cur = self._exec(
            """UPDATE pointers SET sh = %s
               WHERE chat = %s AND card_id = %s AND sh = %s AND expires_at > %s
                 AND (state = 'pending' OR (state = 'claimed' AND lease_until < %s))""",
            (new_hash, chat, card_id, old_hash, now, now),
        )
        return cur.rowcount == 1

    # --- turn lease --------------------------------------------------------------------
    def take_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        return self._exec(steps.TAKE_TURN, (chat, holder, lease_until, lease_until, now)).rowcount == 1

    def renew_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        cur = self._exec(
            "UPDATE turns SET lease_until = %s, ttl = %s WHERE chat = %s AND holder = %s AND lease_until >= %s",
            (lease_until, lease_until, chat, holder, now),
        )
        return cur.rowcount == 1

    def release_turn(self, chat: str, holder: str) -> bool:
        return self._exec("DELETE FROM turns WHERE chat = %s AND holder = %s", (chat, holder)).rowcount == 1

    # --- grants ------------------------------------------------------------------------
    def put_grant(self, grant: Grant, ttl: float) -> None:
        self._exec(
            """INSERT INTO grants (usr, chat, kind, name, card_id, created_at, expires_at, ttl, turn_id)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)
               ON CONFLICT (usr, chat, kind, name) DO UPDATE SET card_id=excluded.card_id,
                 created_at=excluded.created_at, expires_at=excluded.expires_at, ttl=excluded.ttl,
                 turn_id=excluded.turn_id""",
            (
                grant.user,
                grant.chat,
                grant.kind,
                grant.name,
                grant.card_id,
                grant.created_at,
                grant.expires_at,
                ttl,
                grant.turn_id,
            ),
        )

    def list_grants(self, user: str, chat: str | None, now: float) -> list[Grant]:
        query = "SELECT * FROM grants WHERE usr = %s AND expires_at > %s"
        args: tuple[Any, ...] = (user, now)
        if chat is not None:
            query += " AND chat = %s"
            args += (chat,)
        rows = self._exec(query + ' ORDER BY chat COLLATE "C", kind COLLATE "C", name COLLATE "C"', args).rows
        return [_grant(r) for r in rows]

    def delete_grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        cur = self._exec(
            "DELETE FROM grants WHERE usr = %s AND chat = %s AND kind = %s AND name = %s", (user, chat, kind, name)
        )
        return cur.rowcount == 1

    # --- refusals ----------------------------------------------------------------------
    def record_refusal(self, refusal: Refusal, ttl: float) -> bool:
        cur = self._exec(
            """INSERT INTO refusals (chat, turn_id, kind, name, port, url, at, ttl)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING""",
            (
                refusal.chat,
                refusal.turn_id,
                refusal.kind,
                refusal.name,
                refusal.port,
                refusal.url,
                refusal.at,
                ttl,
            ),
        )
        return cur.rowcount == 1

    def list_refusals(self, chat: str, turn_id: str) -> list[Refusal]:
        rows = self._exec(
            'SELECT * FROM refusals WHERE chat = %s AND turn_id = %s ORDER BY at, kind COLLATE "C", name COLLATE "C"',
            (chat, turn_id),
        ).rows
        return [
            Refusal(
                chat=r["chat"],
                turn_id=r["turn_id"],
                kind=r["kind"],
                name=r["name"],
                port=r["port"],
                url=r["url"],
                at=r["at"],
            )
            for r in rows
        ]

    # --- dedupe ------------------------------------------------------------------------
    def claim_event(self, key: str, now: float, ttl: float) -> bool:
        cur = self._exec(
            """INSERT INTO events (key, ttl) VALUES (%s, %s)
               ON CONFLICT (key) DO UPDATE SET ttl = excluded.ttl WHERE events.ttl < %s""",
            (key, ttl, now),
        )
        return cur.rowcount == 1

    # --- Slack installations (issue 31): opaque records, no expiry -----------------------
    def put_installation(self, key: str, record: str) -> None:
        self._exec(
            """INSERT INTO slack_installations (key, record) VALUES (%s, %s)
               ON CONFLICT (key) DO UPDATE SET record = excluded.record""",
            (key, record),
        )

    def get_installation(self, key: str) -> str | None:
        row = self._exec("SELECT record FROM slack_installations WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row["record"])

    def delete_installation(self, key: str) -> bool:
        return self._exec("DELETE FROM slack_installations WHERE key = %s", (key,)).rowcount == 1

    # --- sessions ----------------------------------------------------------------------
    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        return self._exec(steps.PUT_SESSION, (chat, key, seq, ttl)).rowcount == 1

    def get_session(self, chat: str) -> str | None:
        row = self._exec("SELECT key FROM sessions WHERE chat = %s", (chat,)).fetchone()
        return None if row is None else str(row["key"])

    # --- audit -------------------------------------------------------------------------
    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        self._insert_audit(event, ttl, outbox)

    def _insert_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem]) -> None:
        """The event and its outbox items in ONE statement (a CTE per item): all or nothing."""
        args: list[Any] = [event.chat, event.at, event.kind, event.actor, event.card_id, json.dumps(event.detail), ttl]
        if not outbox:
            self._exec(
                "INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl) VALUES (%s,%s,%s,%s,%s,%s,%s)", args
            )
            return
        values = ", ".join("(%s,%s,%s,%s,%s)" for _ in outbox)
        for o in outbox:
            args += [o.sink, o.id, o.chat, o.body, ttl]
        self._exec(
            f"""WITH a AS (INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl)
                           VALUES (%s,%s,%s,%s,%s,%s,%s) RETURNING seq)
                INSERT INTO outbox (sink, id, chat, body, ttl) VALUES {values}""",
            args,
        )

    def _append_all(self, audit: Sequence[AuditWrite]) -> None:
        """Inside a compound step's transaction an audit row is part of the step: a failed insert
        rolls the step back rather than being logged and skipped (a failed statement aborts a
        PostgreSQL transaction anyway)."""
        for a in audit:
            self._insert_audit(a.event, a.ttl, a.outbox)

    @staticmethod
    def _to_event(r: dict[str, Any]) -> AuditEvent:
        return AuditEvent(
            chat=r["chat"],
            at=r["at"],
            kind=r["kind"],
            actor=r["actor"],
            card_id=r["card_id"],
            detail=json.loads(r["detail"]),
        )

    def list_audit(self, chat: str) -> list[AuditEvent]:
        return [self._to_event(r) for r in self._exec("SELECT * FROM audit WHERE chat = %s ORDER BY seq", (chat,)).rows]

    def list_audit_since(self, since: float) -> list[AuditEvent]:
        rows = self._exec('SELECT * FROM audit WHERE at >= %s ORDER BY at, chat COLLATE "C", seq', (since,)).rows
        return [self._to_event(r) for r in rows]

    # --- compound steps: one statement each (store/postgres_steps.py) -------------------------
    def begin_turn(self, chat: str, holder: str, user: str, now: float, lease_until: float) -> TurnStart:
        row = self._exec(*steps.begin_turn(chat, holder, user, now, lease_until)).fetchone()
        if row is None or not row["taken"]:
            return TurnStart(taken=False)
        grants = tuple(_grant(g) for g in row["grants"] or ())
        return TurnStart(True, self._to_pointer(row["pointer"]), grants, row["session"])

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
        columns = self._columns(pointer) if pointer is not None else None
        row = self._exec(*steps.end_turn(chat, holder, now, columns, audit, session)).fetchone()
        return row is not None and bool(row["written"])

    def claim_grants(self, w: ClaimWrite) -> Claimed | None:
        keys = steps.grant_keys(w)
        if len(set(keys)) != len(keys):  # one grant changed twice: a short transaction, in order
            with self._tx():
                return super().claim_grants(w)
        row = self._exec(*steps.claim_grants(w)).fetchone()
        won = self._to_pointer(row["won"]) if row is not None else None
        if row is None or won is None:
            return None
        if row["snapshot_data"] is not None:  # for this thread's next read of it (PostgresObjects)
            self._local.prefetched = (won.snapshot.key, bytes(row["snapshot_data"]), row["snapshot_sha256"])
        # the statement read the grants as they were: apply its own changes, as a read after it sees
        book = {(g.kind, g.name): g for g in (_grant(x) for x in row["grants"] or ())}
        for c in w.changes:
            if c.grant.user != won.owner or c.grant.chat != won.chat:
                continue
            if c.delete:
                book.pop((c.grant.kind, c.grant.name), None)
            else:
                book[(c.grant.kind, c.grant.name)] = c.grant
        live = sorted((g for g in book.values() if g.expires_at > w.now), key=lambda g: (g.chat, g.kind, g.name))
        return Claimed(won, tuple(live))

    # --- audit outbox ------------------------------------------------------------------
    CLAIM_OUTBOX = """WITH lease AS (
                 INSERT INTO outbox_leases (sink, holder, lease_until, ttl) VALUES (%s, %s, %s, %s)
                 ON CONFLICT (sink) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
                   ttl = excluded.ttl
                 WHERE outbox_leases.holder = excluded.holder OR outbox_leases.lease_until < %s
                 RETURNING sink)
               SELECT sink, id, chat, body FROM outbox
               WHERE sink = %s AND EXISTS (SELECT 1 FROM lease) ORDER BY id LIMIT %s"""

    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        # one statement: the lease (a data-modifying CTE always runs) and, only if it was taken,
        # the sink's oldest items through the (sink, id) primary key
        rows = self._exec(self.CLAIM_OUTBOX, (sink, holder, lease_until, lease_until, now, sink, limit)).rows
        return [OutboxItem(sink=r["sink"], id=r["id"], chat=r["chat"], body=r["body"]) for r in rows]

    def delete_outbox(self, sink: str, item_id: str) -> bool:
        return self._exec("DELETE FROM outbox WHERE sink = %s AND id = %s", (sink, item_id)).rowcount == 1

    # --- durable timers (issue 33) ----------------------------------------------------
    def put_timers(self, timers: Sequence[Timer]) -> None:
        if not timers:
            return
        query = """INSERT INTO timers (card_id, name, chat, due_at, ttl)
               SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::float8[], %s::float8[])
               ON CONFLICT (card_id, name) DO NOTHING"""
        args = (
            [t.card_id for t in timers],
            [t.name for t in timers],
            [t.chat for t in timers],
            [t.due_at for t in timers],
            [t.ttl for t in timers],
        )
        # inside a step (the card's offer): sent with its pointer write, one round trip for the step
        if not self.defer(query, args):
            self._exec(query, args)

    CLAIM_TIMERS = """WITH lease AS (
                 INSERT INTO timer_leases (name, holder, lease_until, ttl) VALUES ('timers', %s, %s, %s)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
                   ttl = excluded.ttl
                 WHERE timer_leases.holder = excluded.holder OR timer_leases.lease_until < %s
                 RETURNING name)
               SELECT card_id, name, chat, due_at, ttl FROM timers
               WHERE fired_at IS NULL AND due_at >= %s AND due_at <= %s AND EXISTS (SELECT 1 FROM lease)
               ORDER BY due_at, card_id COLLATE "C", name COLLATE "C" LIMIT %s"""

    def claim_timers(self, holder: str, now: float, lease_until: float, since: float, limit: int) -> list[Timer]:
        # one statement, as claim_outbox: the lease, and only if it was taken the due timers through
        # the partial index timers_due (those not yet fired)
        rows = self._exec(self.CLAIM_TIMERS, (holder, lease_until, lease_until, now, since, now, limit)).rows
        return [
            Timer(chat=r["chat"], card_id=r["card_id"], name=r["name"], due_at=r["due_at"], ttl=r["ttl"]) for r in rows
        ]

    def fire_timer(self, timer: Timer, now: float) -> bool:
        return (
            self._exec(
                "UPDATE timers SET fired_at = %s WHERE card_id = %s AND name = %s AND fired_at IS NULL",
                (now, timer.card_id, timer.name),
            ).rowcount
            == 1
        )

    # --- sweep -------------------------------------------------------------------------
    def sweep(self, now: float) -> int:
        """Batches of rows past their ttl, found through each table's ttl index (no full scan)."""
        removed = 0
        for table in SWEPT:
            removed += sweep_table(self, table, "ttl", now)
        return removed


def _grant(r: dict[str, Any]) -> Grant:
    return Grant(
        user=r["usr"],
        chat=r["chat"],
        kind=r["kind"],
        name=r["name"],
        card_id=r["card_id"],
        created_at=r["created_at"],
        expires_at=r["expires_at"],
        turn_id=r["turn_id"],
    )


def sweep_query(table: str, column: str) -> str:
    """One batch of `table`'s rows with `column` before %s: found through its index on `column`,
    deleted by their row ids (a TID scan), so neither step reads the whole table."""
    return (
        sql.SQL("DELETE FROM {t} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {t} WHERE {c} < %s ORDER BY {c} LIMIT %s))")
        .format(t=sql.Identifier(table), c=sql.Identifier(column))
        .as_string()
    )


def sweep_table(rows: PostgresRows, table: str, column: str, before: float) -> int:
    query = sweep_query(table, column)
    removed = 0
    while True:
        count = rows._exec(query, (before, _SWEEP_BATCH)).rowcount
        removed += count
        if count < _SWEEP_BATCH:
            return removed


def open_postgres_rows(url: str) -> PostgresRows:
    return PostgresRows(parse_target(url))


__all__ = ["SWEPT", "PostgresRows", "StoreError", "open_postgres_rows", "sweep_query", "sweep_table"]
