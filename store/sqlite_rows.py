"""The embedded default row store: SQLite in WAL mode with synchronous=FULL (every commit is
fsync'd before it returns), one statement per state change.

Connections are in autocommit mode (isolation_level=None). Writes, from any thread, take turns
on the store's ONE writer connection (a lock, at most LOCK_WAIT); reads outside a transaction
use a connection per thread and never wait (WAL). A compound step is one transaction begun with
BEGIN IMMEDIATE (a deferred BEGIN followed by a write would fail at once under contention,
SQLITE_BUSY_SNAPSHOT); a single conditional UPDATE/INSERT is its own implicit transaction.
Either then waits for SQLite's lock on the file's WriteGate while another store or process on
the file holds it (store/sqlite_writes.py), and applies or matches nothing.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from chat_approvals.store import sqlite_rebuild, sqlite_writes
from chat_approvals.store.base import RowStore, StoreError
from chat_approvals.store.pointer_docs import SQL_COLUMNS, PointerDocs, plain_columns
from chat_approvals.store.sqlite_writes import connect, connect_writer, write_gate

SCHEMA = """
CREATE TABLE IF NOT EXISTS pointers (
  chat TEXT PRIMARY KEY,
  card_id TEXT NOT NULL,
  sh TEXT NOT NULL,
  state TEXT NOT NULL,
  expires_at REAL NOT NULL,
  ttl REAL NOT NULL,
  claim_count INTEGER NOT NULL,
  worker TEXT,
  lease_until REAL,
  resume_deadline REAL,
  card_location TEXT,
  answer_key TEXT,
  doc TEXT NOT NULL,
  votes TEXT
);
CREATE UNIQUE INDEX IF NOT EXISTS pointers_card ON pointers(card_id);
CREATE INDEX IF NOT EXISTS pointers_ttl ON pointers(ttl);
CREATE TABLE IF NOT EXISTS grants (
  user TEXT NOT NULL, chat TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  card_id TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, ttl REAL NOT NULL,
  turn_id TEXT,
  PRIMARY KEY (user, chat, kind, name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS grants_ttl ON grants(ttl);
CREATE TABLE IF NOT EXISTS refusals (
  chat TEXT NOT NULL, turn_id TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  port INTEGER, url TEXT, at REAL NOT NULL, ttl REAL NOT NULL,
  PRIMARY KEY (chat, turn_id, kind, name)
);
CREATE INDEX IF NOT EXISTS refusals_ttl ON refusals(ttl);
CREATE TABLE IF NOT EXISTS turns (chat TEXT PRIMARY KEY, holder TEXT NOT NULL, lease_until REAL NOT NULL,
  ttl REAL NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (key TEXT PRIMARY KEY, ttl REAL NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (chat TEXT PRIMARY KEY, key TEXT NOT NULL, seq REAL NOT NULL, ttl REAL NOT NULL)
  WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_ttl ON sessions(ttl);
CREATE INDEX IF NOT EXISTS events_ttl ON events(ttl);
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY,
  chat TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL,
  card_id TEXT, detail TEXT NOT NULL, ttl REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_chat ON audit(chat, seq);
CREATE INDEX IF NOT EXISTS audit_ttl ON audit(ttl);
CREATE INDEX IF NOT EXISTS audit_at ON audit(at);
CREATE TABLE IF NOT EXISTS outbox (
  sink TEXT NOT NULL, id TEXT NOT NULL, chat TEXT NOT NULL, body TEXT NOT NULL, ttl REAL NOT NULL,
  PRIMARY KEY (sink, id)
);
CREATE INDEX IF NOT EXISTS outbox_ttl ON outbox(ttl);
CREATE TABLE IF NOT EXISTS slack_installations (key TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS outbox_leases (sink TEXT PRIMARY KEY, holder TEXT NOT NULL, lease_until REAL NOT NULL,
  ttl REAL NOT NULL);
CREATE TABLE IF NOT EXISTS timers (card_id TEXT NOT NULL, name TEXT NOT NULL, chat TEXT NOT NULL,
  due_at REAL NOT NULL, ttl REAL NOT NULL, fired_at REAL, PRIMARY KEY (card_id, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS timers_due ON timers(due_at) WHERE fired_at IS NULL;
CREATE INDEX IF NOT EXISTS timers_ttl ON timers(ttl);
CREATE TABLE IF NOT EXISTS timer_leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, lease_until REAL NOT NULL,
  ttl REAL NOT NULL);
"""

# Columns added after the first release: a database made before gets them on open.
_ADDED = {"pointers": {"votes": "TEXT"}, "grants": {"turn_id": "TEXT"}}
_HOLDING = "chat = ? AND card_id = ? AND state = 'claimed' AND worker = ? AND claim_count = ?"
# What a pointer read returns, in the order _to_pointer reads it.
_POINTER = ", ".join((*SQL_COLUMNS, "card_location", "votes", "doc"))
_SWEEP_BATCH = 500
# What names a row of each table to the sweep: a WITHOUT ROWID table (store/sqlite_rebuild.py
# says why those) by its primary key.
_SWEPT = {
    "pointers": "rowid",
    "grants": "(user, chat, kind, name)",
    "refusals": "rowid",
    "events": "rowid",
    "sessions": "chat",
    "audit": "rowid",
    "turns": "chat",
    "outbox": "rowid",
    "outbox_leases": "rowid",
    "timers": "(card_id, name)",
    "timer_leases": "rowid",
}
_TIMERS_PER_INSERT = 100  # 5 parameters each: well under SQLite's 999 of old builds
_AUDIT_PER_INSERT = 100  # 7 parameters each


_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")


@dataclass(frozen=True)
class Ran:
    """A write's result, read inside its transaction (a RETURNING row included)."""

    rowcount: int
    rows: list[Any]

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows


def _ran(cur: sqlite3.Cursor) -> Ran:
    rows = cur.fetchall()  # first: with RETURNING, rowcount is known once the rows are read
    return Ran(cur.rowcount, rows)


def _held(f: Fence) -> tuple[str, str, str, int]:
    """The parameters of _HOLDING, in its order."""
    return (f.chat, f.card_id, f.worker, f.token)


class SqliteRows(RowStore):
    local_reads = True  # WAL: readers never wait for the writer

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._gate = write_gate(self.path)
        # This store's writes, from any thread, one at a time on ONE connection: SQLite drops a
        # connection's page cache whenever another connection wrote, so with a writer per thread
        # every write re-read its pages, and a thread that lost the race failed its BEGIN and
        # retried. Reads outside a transaction keep a connection per thread (WAL: never wait).
        self._writes = threading.Lock()
        self._writer: sqlite3.Connection | None = None
        self._docs = PointerDocs()  # the pointers written and read, by their document's text
        self._gate.attempt(self._create_schema)

    def _create_schema(self) -> None:
        """Idempotent, so it is simply tried again if another process holds the lock."""
        c = self._conn()
        try:
            c.executescript(SCHEMA)
            if sqlite_rebuild.needed(c):  # a file of an earlier release: its tables' new forms
                sqlite_rebuild.rebuild(c, SCHEMA)
            for table, columns in _ADDED.items():
                have = {r["name"] for r in c.execute(f"PRAGMA table_info({table})")}
                for name, kind in columns.items():
                    if name not in have:
                        c.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
        finally:
            self._gate.ended()

    def _conn(self) -> sqlite3.Connection:
        """Inside this thread's transaction the writer's connection, else the thread's own."""
        if getattr(self._local, "depth", 0) > 0:
            return self._writer  # type: ignore[return-value]  # set while depth > 0
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            conn.row_factory = sqlite3.Row
            self._local.conn = conn
        return conn

    def _write_turn(self) -> sqlite3.Connection:
        """This store's one writer connection, once this thread's turn to write came (at most
        LOCK_WAIT; then SQLite's lock is waited for on the gate, at most LOCK_WAIT again); the
        caller releases `_writes`."""
        if not self._writes.acquire(timeout=sqlite_writes.LOCK_WAIT):
            raise StoreError("sqlite: database is locked (this process's writers)")
        if self._writer is None:
            try:
                self._writer = connect_writer(self.path)
            except BaseException:
                self._writes.release()
                raise
            self._writer.row_factory = sqlite3.Row
        return self._writer

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> Ran | sqlite3.Cursor:
        """One statement. Inside a transaction (which holds the lock) as is; a write on its own
        waits for this store's writer (`_writes`), then for SQLite's lock on the file's WriteGate
        (store/sqlite_writes.py: another store or process on the file), and its result is read
        to its end, so it has committed when this returns."""
        try:
            if getattr(self._local, "depth", 0) > 0:
                return self._writer.execute(sql, args)  # type: ignore[union-attr]  # set while depth > 0
            if not sql.lstrip()[:7].upper().startswith(_WRITES):
                conn = self._conn()
                return self._gate.attempt(lambda: conn.execute(sql, args))
            writer = self._write_turn()
            try:
                return self._gate.attempt(lambda: _ran(writer.execute(sql, args)))
            finally:
                self._gate.ended()
                self._writes.release()
        except sqlite3.OperationalError as e:  # "database is locked" past LOCK_WAIT
            raise StoreError(f"sqlite: {e}") from e

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One transaction, one commit (one fsync): IMMEDIATE takes the write lock up front
        (waiting on busy_timeout), so the statements inside never hit SQLITE_BUSY_SNAPSHOT.
        Any exception inside rolls everything back: the compound step changed nothing.
        Nested (a compound step inside `atomic`): a savepoint, so a failed inner step is undone
        alone and the outer transaction decides about the rest. A nested step that succeeds
        leaves its savepoint for the outer COMMIT to release (one statement less; ROLLBACK TO
        finds the newest savepoint of a name, so a later step at the same depth is undone alone)."""
        depth = getattr(self._local, "depth", 0)
        undo, done = ("ROLLBACK", "COMMIT") if depth == 0 else (f"ROLLBACK TO s{depth}; RELEASE s{depth}", "")
        if depth == 0:  # this store's writer, then SQLite's lock, waited for on the file's WriteGate
            conn = self._write_turn()
            try:
                self._gate.attempt(lambda: conn.execute("BEGIN IMMEDIATE"))
            except BaseException as e:
                self._writes.release()
                if isinstance(e, sqlite3.OperationalError):
                    raise StoreError(f"sqlite: {e}") from e
                raise
        else:
            conn = self._conn()
            try:
                conn.execute(f"SAVEPOINT s{depth}")
            except sqlite3.OperationalError as e:
                raise StoreError(f"sqlite: {e}") from e
        self._local.depth = depth + 1
        try:
            yield conn
            if done:
                conn.execute(done)
        except BaseException as e:
            for statement in undo.split("; "):
                with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have ended it already
                    conn.execute(statement)
            if isinstance(e, sqlite3.OperationalError):
                raise StoreError(f"sqlite: {e}") from e
            raise
        finally:
            self._local.depth = depth
            if depth == 0:
                self._gate.ended()  # the other stores' waiting writers on this file try again now
                self._writes.release()

    def atomic(self) -> contextlib.AbstractContextManager[object]:
        """Everything this thread writes inside, on this store and on objects kept in its file
        (store/sqlite_objects.py bound to it), commits once (one fsync) or not at all."""
        return self._tx()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._writes:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    # --- pointers ----------------------------------------------------------------------
    def _to_pointer(self, row: sqlite3.Row | None) -> Pointer | None:
        """The row (_POINTER's columns, in order) as a Pointer: its document (the pointer as
        written) validated once per text (store/pointer_docs.py), its columns (what changes after
        the card is written) every time, each checked by Pointer's rules. The columns are read
        by position: a Row looks a name up among its columns (fifteen lookups a pointer)."""
        if row is None:
            return None
        *plain, location, votes, doc = row
        # most cards take no votes: their column holds the text `[]` (_columns)
        columns = plain_columns(
            plain,
            None if location is None else json.loads(location),
            [] if not votes or votes == "[]" else json.loads(votes),
        )
        return self._docs.pointer(doc, columns)

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
            json.dumps([v.model_dump() for v in p.votes]),
        )

    def put_pointer(self, pointer: Pointer, now: float) -> bool:
        cur = self._exec(
            """INSERT INTO pointers (chat, card_id, sh, state, expires_at, ttl, claim_count, worker,
                 lease_until, resume_deadline, card_location, answer_key, doc, votes)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)
               ON CONFLICT(chat) DO UPDATE SET card_id=excluded.card_id, sh=excluded.sh,
                 state=excluded.state, expires_at=excluded.expires_at, ttl=excluded.ttl,
                 claim_count=excluded.claim_count, worker=excluded.worker,
                 lease_until=excluded.lease_until, resume_deadline=excluded.resume_deadline,
                 card_location=excluded.card_location, answer_key=excluded.answer_key, doc=excluded.doc,
                 votes=excluded.votes
               WHERE pointers.state IN ('done', 'expired')
                  OR (pointers.expires_at <= ?
                      AND NOT (pointers.state = 'claimed' AND pointers.lease_until >= ?))""",
            (*self._columns(pointer), now, now),
        )
        return cur.rowcount == 1

    def get_pointer(self, chat: str) -> Pointer | None:
        return self._to_pointer(self._exec(f"SELECT {_POINTER} FROM pointers WHERE chat = ?", (chat,)).fetchone())

    def get_pointer_by_card(self, card_id: str) -> Pointer | None:
        return self._to_pointer(self._exec(f"SELECT {_POINTER} FROM pointers WHERE card_id = ?", (card_id,)).fetchone())

    def claim(
        self, read: ClaimRead, *, worker: str, now: float, lease_until: float, resume_deadline: float
    ) -> Pointer | None:
        cur = self._exec(
            f"""UPDATE pointers SET state = 'claimed', worker = ?, lease_until = ?, resume_deadline = ?,
                 claim_count = claim_count + 1
               WHERE chat = ? AND card_id = ? AND sh = ?
                 AND (state = 'pending' OR (state = 'claimed' AND lease_until < ?))
                 AND expires_at > ? AND claim_count = ?
               RETURNING {_POINTER}""",
            (
                worker,
                lease_until,
                resume_deadline,
                read.chat,
                read.card_id,
                read.secret_hash,
                now,
                now,
                read.claim_count,
            ),
        )
        return self._to_pointer(cur.fetchone())

    def renew(self, fence: Fence, *, now: float, lease_until: float) -> bool:
        cur = self._exec(
            f"UPDATE pointers SET lease_until = ? WHERE {_HOLDING} AND lease_until >= ?",
            (lease_until, *_held(fence), now),
        )
        return cur.rowcount == 1

    def finish(self, fence: Fence, *, answer_key: str, session: SessionWrite | None = None) -> bool:
        sql = f"UPDATE pointers SET state = 'done', answer_key = ?, lease_until = NULL WHERE {_HOLDING}"
        if session is None:
            return self._exec(sql, (answer_key, *_held(fence))).rowcount == 1
        with self._tx():
            done = self._exec(sql, (answer_key, *_held(fence))).rowcount == 1
            if done:
                self.put_session(session.chat, session.key, session.seq, session.ttl)
        return done

    def replace(self, fence: Fence, *, new: Pointer) -> bool:
        if new.chat != fence.chat:
            raise ValueError("a chained card stays in its chat")
        cols = self._columns(new)
        cur = self._exec(
            f"""UPDATE pointers SET card_id = ?, sh = ?, state = ?, expires_at = ?, ttl = ?,
                  claim_count = ?, worker = ?, lease_until = ?, resume_deadline = ?, card_location = ?,
                  answer_key = ?, doc = ?, votes = ?
                WHERE {_HOLDING}""",
            (*cols[1:], *_held(fence)),
        )
        return cur.rowcount == 1

    def expire(self, chat: str, card_id: str, now: float, answer_key: str | None = None) -> bool:
        cur = self._exec(
            """UPDATE pointers SET state = 'expired', lease_until = NULL,
                 answer_key = COALESCE(?, answer_key)
               WHERE chat = ? AND card_id = ?
                 AND (state = 'pending' OR (state = 'claimed' AND lease_until < ?))""",
            (answer_key, chat, card_id, now),
        )
        return cur.rowcount == 1

    def vote(self, *, chat: str, card_id: str, secret_hash: str, vote: Vote, now: float) -> Pointer | None:
        cur = self._exec(
            f"""UPDATE pointers SET votes = json_insert(COALESCE(votes, '[]'), '$[#]', json(?))
               WHERE chat = ? AND card_id = ? AND sh = ? AND state = 'pending' AND expires_at > ?
                 AND NOT EXISTS (SELECT 1 FROM json_each(COALESCE(pointers.votes, '[]'))
                                 WHERE json_extract(value, '$.user') = ?)
               RETURNING {_POINTER}""",
            (vote.model_dump_json(), chat, card_id, secret_hash, now, vote.user),
        )
        return self._to_pointer(cur.fetchone())

    def set_card_location(self, chat: str, card_id: str, location: dict[str, str]) -> bool:
        cur = self._exec(
            "UPDATE pointers SET card_location = ? WHERE chat = ? AND card_id = ?",
            (json.dumps(location), chat, card_id),
        )
        return cur.rowcount == 1

    def rotate_secret(self, chat: str, card_id: str, old_hash: str, new_hash: str, now: float) -> bool:
        cur = self._exec(
            """UPDATE pointers SET sh = ?
               WHERE chat = ? AND card_id = ? AND sh = ? AND expires_at > ?
                 AND (state = 'pending' OR (state = 'claimed' AND lease_until < ?))""",
            (new_hash, chat, card_id, old_hash, now, now),
        )
        return cur.rowcount == 1

    # --- turn lease --------------------------------------------------------------------
    def take_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        cur = self._exec(
            """INSERT INTO turns (chat, holder, lease_until, ttl) VALUES (?, ?, ?, ?)
               ON CONFLICT(chat) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
                 ttl = excluded.ttl
               WHERE turns.lease_until < ?""",
            (chat, holder, lease_until, lease_until, now),
        )
        return cur.rowcount == 1

    def renew_turn(self, chat: str, holder: str, now: float, lease_until: float) -> bool:
        cur = self._exec(
            "UPDATE turns SET lease_until = ?, ttl = ? WHERE chat = ? AND holder = ? AND lease_until >= ?",
            (lease_until, lease_until, chat, holder, now),
        )
        return cur.rowcount == 1

    def release_turn(self, chat: str, holder: str) -> bool:
        cur = self._exec("DELETE FROM turns WHERE chat = ? AND holder = ?", (chat, holder))
        return cur.rowcount == 1

    # --- grants ------------------------------------------------------------------------
    def put_grant(self, grant: Grant, ttl: float) -> None:
        self._exec(
            """INSERT INTO grants (user, chat, kind, name, card_id, created_at, expires_at, ttl, turn_id)
               VALUES (?,?,?,?,?,?,?,?,?)
               ON CONFLICT(user, chat, kind, name) DO UPDATE SET card_id=excluded.card_id,
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
        sql = "SELECT * FROM grants WHERE user = ? AND expires_at > ?"
        args: tuple[Any, ...] = (user, now)
        if chat is not None:
            sql += " AND chat = ?"
            args += (chat,)
        rows = self._exec(sql + " ORDER BY chat, kind, name", args).fetchall()
        return [
            Grant(
                user=r["user"],
                chat=r["chat"],
                kind=r["kind"],
                name=r["name"],
                card_id=r["card_id"],
                created_at=r["created_at"],
                expires_at=r["expires_at"],
                turn_id=r["turn_id"],
            )
            for r in rows
        ]

    def delete_grant(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        cur = self._exec(
            "DELETE FROM grants WHERE user = ? AND chat = ? AND kind = ? AND name = ?", (user, chat, kind, name)
        )
        return cur.rowcount == 1

    # --- refusals ----------------------------------------------------------------------
    def record_refusal(self, refusal: Refusal, ttl: float) -> bool:
        cur = self._exec(
            """INSERT INTO refusals (chat, turn_id, kind, name, port, url, at, ttl) VALUES (?,?,?,?,?,?,?,?)
               ON CONFLICT DO NOTHING""",
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
            "SELECT * FROM refusals WHERE chat = ? AND turn_id = ? ORDER BY at, kind, name", (chat, turn_id)
        ).fetchall()
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
            """INSERT INTO events (key, ttl) VALUES (?, ?)
               ON CONFLICT(key) DO UPDATE SET ttl = excluded.ttl WHERE events.ttl < ?""",
            (key, ttl, now),
        )
        return cur.rowcount == 1

    # --- Slack installations (issue 31) -------------------------------------------------
    def put_installation(self, key: str, record: str) -> None:
        self._exec(
            """INSERT INTO slack_installations (key, record) VALUES (?, ?)
               ON CONFLICT(key) DO UPDATE SET record = excluded.record""",
            (key, record),
        )

    def get_installation(self, key: str) -> str | None:
        row = self._exec("SELECT record FROM slack_installations WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row["record"])

    def delete_installation(self, key: str) -> bool:
        return self._exec("DELETE FROM slack_installations WHERE key = ?", (key,)).rowcount == 1

    # --- sessions ----------------------------------------------------------------------
    def put_session(self, chat: str, key: str, seq: float, ttl: float) -> bool:
        cur = self._exec(
            """INSERT INTO sessions (chat, key, seq, ttl) VALUES (?, ?, ?, ?)
               ON CONFLICT(chat) DO UPDATE SET key = excluded.key, seq = excluded.seq, ttl = excluded.ttl
               WHERE sessions.seq <= excluded.seq""",
            (chat, key, seq, ttl),
        )
        return cur.rowcount == 1

    def get_session(self, chat: str) -> str | None:
        row = self._exec("SELECT key FROM sessions WHERE chat = ?", (chat,)).fetchone()
        return None if row is None else str(row["key"])

    # --- audit -------------------------------------------------------------------------
    def append_audit(self, event: AuditEvent, ttl: float, outbox: Sequence[OutboxItem] = ()) -> None:
        write = [AuditWrite(event=event, ttl=ttl, outbox=tuple(outbox))]
        if not outbox:
            self._append_all(write)
            return
        with self._tx():
            self._append_all(write)

    def _append_all(self, audit: Sequence[AuditWrite]) -> None:
        """Inside a compound step's transaction an audit row is part of the step: a failed
        insert rolls the step back rather than being logged and skipped (the base's rule).
        All of them one INSERT (rows numbered in the order given), their outbox items one more:
        each statement hands the GIL back and waits to win it again from a busy event loop."""
        for at in range(0, len(audit), _AUDIT_PER_INSERT):
            part = audit[at : at + _AUDIT_PER_INSERT]
            self._exec(
                "INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl) VALUES "
                + ",".join(["(?,?,?,?,?,?,?)"] * len(part)),
                tuple(
                    v
                    for a in part
                    for v in (a.event.chat, a.event.at, a.event.kind, a.event.actor, a.event.card_id,
                              json.dumps(a.event.detail), a.ttl)
                ),
            )  # fmt: skip
        outbox = [(o.sink, o.id, o.chat, o.body, a.ttl) for a in audit for o in a.outbox]
        if outbox:
            try:
                self._conn().executemany("INSERT INTO outbox (sink, id, chat, body, ttl) VALUES (?,?,?,?,?)", outbox)
            except sqlite3.OperationalError as e:
                raise StoreError(f"sqlite: {e}") from e

    # --- compound steps: the base's sequence of calls, in one transaction (one commit) ------
    def begin_turn(self, chat: str, holder: str, user: str, now: float, lease_until: float) -> TurnStart:
        with self._tx():
            return super().begin_turn(chat, holder, user, now, lease_until)

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
        with self._tx():
            return super().end_turn(chat, holder, now=now, pointer=pointer, audit=audit, session=session)

    def claim_grants(self, w: ClaimWrite) -> Claimed | None:
        with self._tx():
            return super().claim_grants(w)

    @staticmethod
    def _to_event(r: sqlite3.Row) -> AuditEvent:
        return AuditEvent(
            chat=r["chat"],
            at=r["at"],
            kind=r["kind"],
            actor=r["actor"],
            card_id=r["card_id"],
            detail=json.loads(r["detail"]),
        )

    def list_audit(self, chat: str) -> list[AuditEvent]:
        rows = self._exec("SELECT * FROM audit WHERE chat = ? ORDER BY seq", (chat,)).fetchall()
        return [self._to_event(r) for r in rows]

    def list_audit_since(self, since: float) -> list[AuditEvent]:
        rows = self._exec("SELECT * FROM audit WHERE at >= ? ORDER BY at, chat, seq", (since,)).fetchall()
        return [self._to_event(r) for r in rows]

    # --- audit outbox ------------------------------------------------------------------
    def claim_outbox(self, sink: str, holder: str, now: float, lease_until: float, limit: int) -> list[OutboxItem]:
        cur = self._exec(
            "INSERT INTO outbox_leases (sink, holder, lease_until, ttl) VALUES (?,?,?,?) "
            "ON CONFLICT(sink) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until, "
            "ttl = excluded.ttl WHERE outbox_leases.holder = excluded.holder OR outbox_leases.lease_until < ?",
            (sink, holder, lease_until, lease_until, now),
        )
        if cur.rowcount != 1:
            return []
        rows = self._exec(
            "SELECT sink, id, chat, body FROM outbox WHERE sink = ? ORDER BY id LIMIT ?", (sink, limit)
        ).fetchall()
        return [OutboxItem(sink=r["sink"], id=r["id"], chat=r["chat"], body=r["body"]) for r in rows]

    def delete_outbox(self, sink: str, item_id: str) -> bool:
        return self._exec("DELETE FROM outbox WHERE sink = ? AND id = ?", (sink, item_id)).rowcount == 1

    # --- durable timers (issue 33) ----------------------------------------------------
    def put_timers(self, timers: Sequence[Timer]) -> None:
        """One INSERT of every timer (a card has a few): one statement is atomic on its own, so
        it needs no transaction or savepoint of its own."""
        if not timers:
            return
        if len(timers) > _TIMERS_PER_INSERT:  # past SQLite's bound on a statement's parameters
            with self._tx():
                for at in range(0, len(timers), _TIMERS_PER_INSERT):
                    self.put_timers(timers[at : at + _TIMERS_PER_INSERT])
            return
        self._exec(
            "INSERT INTO timers (card_id, name, chat, due_at, ttl) VALUES "
            + ",".join(["(?,?,?,?,?)"] * len(timers))
            + " ON CONFLICT(card_id, name) DO NOTHING",
            tuple(v for t in timers for v in (t.card_id, t.name, t.chat, t.due_at, t.ttl)),
        )

    def claim_timers(self, holder: str, now: float, lease_until: float, since: float, limit: int) -> list[Timer]:
        cur = self._exec(
            "INSERT INTO timer_leases (name, holder, lease_until, ttl) VALUES ('timers',?,?,?) "
            "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until, "
            "ttl = excluded.ttl WHERE timer_leases.holder = excluded.holder OR timer_leases.lease_until < ?",
            (holder, lease_until, lease_until, now),
        )
        if cur.rowcount != 1:
            return []
        rows = self._exec(  # the partial index timers_due holds only the timers not yet fired
            "SELECT * FROM timers WHERE fired_at IS NULL AND due_at >= ? AND due_at <= ? "
            "ORDER BY due_at, card_id, name LIMIT ?",
            (since, now, limit),
        ).fetchall()
        return [
            Timer(chat=r["chat"], card_id=r["card_id"], name=r["name"], due_at=r["due_at"], ttl=r["ttl"]) for r in rows
        ]

    def fire_timer(self, timer: Timer, now: float) -> bool:
        cur = self._exec(
            "UPDATE timers SET fired_at = ? WHERE card_id = ? AND name = ? AND fired_at IS NULL",
            (now, timer.card_id, timer.name),
        )
        return cur.rowcount == 1

    # --- sweep -------------------------------------------------------------------------
    def sweep(self, now: float) -> int:
        removed = 0
        for table, key in _SWEPT.items():
            while True:
                cur = self._exec(
                    f"DELETE FROM {table} WHERE {key} IN (SELECT {key.strip('()')} FROM {table} WHERE ttl < ? LIMIT ?)",
                    (now, _SWEEP_BATCH),
                )
                removed += cur.rowcount
                if cur.rowcount < _SWEEP_BATCH:
                    break
        return removed
