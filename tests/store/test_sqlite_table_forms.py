"""The embedded store's table forms (issue 34): the small keyed tables WITHOUT ROWID, no ttl
index on the turns, no AUTOINCREMENT on the audit, so a cycle's commits write fewer pages; a
file made by an earlier release rebuilt to them on open, its rows kept (store/sqlite_rebuild.py);
the sweep naming those tables' rows by their primary keys. R9/R14 (grants), the turn lease, the
audit trail's order and the timers read the same before and after."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

from chat_approvals.core.models import AuditEvent, Grant, Timer
from chat_approvals.store import sqlite_rebuild
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import RETENTION, T0

# The five tables as the releases before issue 34 made them (grants before its turn_id column).
EARLIER = """
CREATE TABLE grants (
  user TEXT NOT NULL, chat TEXT NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,
  card_id TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL, ttl REAL NOT NULL,
  PRIMARY KEY (user, chat, kind, name)
);
CREATE INDEX grants_ttl ON grants(ttl);
CREATE TABLE turns (chat TEXT PRIMARY KEY, holder TEXT NOT NULL, lease_until REAL NOT NULL, ttl REAL NOT NULL);
CREATE INDEX turns_ttl ON turns(ttl);
CREATE TABLE sessions (chat TEXT PRIMARY KEY, key TEXT NOT NULL, seq REAL NOT NULL, ttl REAL NOT NULL);
CREATE INDEX sessions_ttl ON sessions(ttl);
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  chat TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL, actor TEXT NOT NULL,
  card_id TEXT, detail TEXT NOT NULL, ttl REAL NOT NULL
);
CREATE INDEX audit_chat ON audit(chat, seq);
CREATE INDEX audit_ttl ON audit(ttl);
CREATE INDEX audit_at ON audit(at);
CREATE TABLE timers (card_id TEXT NOT NULL, name TEXT NOT NULL, chat TEXT NOT NULL,
  due_at REAL NOT NULL, ttl REAL NOT NULL, fired_at REAL, PRIMARY KEY (card_id, name));
CREATE INDEX timers_due ON timers(due_at) WHERE fired_at IS NULL;
CREATE INDEX timers_ttl ON timers(ttl);
"""
TTL = T0 + RETENTION


def _grant(name: str, card_id: str, expires: float) -> Grant:
    return Grant(user="U1", chat="http:a", kind="site", name=name, card_id=card_id, created_at=T0, expires_at=expires)


def _earlier_file(path: Path) -> None:
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.executescript(EARLIER)
    c.execute("INSERT INTO grants VALUES ('U1', 'http:a', 'site', 'example.org', 'c_1', ?, ?, ?)", (T0, T0 + 3600, TTL))
    c.execute("INSERT INTO turns VALUES ('http:a', 'h-old', ?, ?)", (T0 + 30, T0 + 30))
    c.execute("INSERT INTO sessions VALUES ('http:a', 'sessions/1.json', ?, ?)", (T0, TTL))
    for n in (1, 2, 3):
        c.execute(
            "INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl)"
            " VALUES ('http:a', ?, 'turn', 'U1', NULL, ?, ?)",
            (T0 + n, f'{{"n": {n}}}', TTL),
        )
    c.execute("DELETE FROM audit WHERE seq = 3")  # AUTOINCREMENT remembers 3; a plain rowid would not
    c.execute("INSERT INTO timers VALUES ('c_1', 'remind', 'http:a', ?, ?, NULL)", (T0 + 60, TTL))
    c.close()


def _forms(path: Path) -> dict[str, str]:
    c = sqlite3.connect(path)
    try:
        return {name: sql for name, sql in c.execute("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL")}
    finally:
        c.close()


def test_a_file_of_the_earlier_forms_is_rebuilt_on_open_with_every_row(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    _earlier_file(db)
    rows = SqliteRows(db)
    forms = _forms(db)
    for table in ("grants", "turns", "sessions", "timers"):
        assert "WITHOUT ROWID" in forms[table].upper(), table
    assert "AUTOINCREMENT" not in forms["audit"].upper()
    assert "turns_ttl" not in forms and not any(name.endswith("_old") for name in forms)
    assert {"grants_ttl", "sessions_ttl", "audit_chat", "audit_ttl", "audit_at", "timers_due", "timers_ttl"} <= set(
        forms
    )

    # the rows read as before: the grant (with the column added since), the held turn, the history,
    # the audit in its order, the timer
    assert rows.list_grants("U1", "http:a", T0) == [_grant("example.org", "c_1", T0 + 3600)]
    assert not rows.take_turn("http:a", "h-new", T0 + 1, T0 + 31)  # still held by h-old
    assert rows.take_turn("http:a", "h-new", T0 + 31, T0 + 61)  # lapsed: taken
    assert rows.get_session("http:a") == "sessions/1.json"
    assert [e.detail for e in rows.list_audit("http:a")] == [{"n": 1}, {"n": 2}]
    rows.append_audit(AuditEvent(chat="http:a", at=T0 + 4, kind="turn", actor="U1", detail={"n": 4}), TTL)
    assert [e.detail for e in rows.list_audit("http:a")] == [{"n": 1}, {"n": 2}, {"n": 4}]  # appended last
    assert rows.claim_timers("t", T0 + 60, T0 + 90, T0, 10) == [
        Timer(chat="http:a", card_id="c_1", name="remind", due_at=T0 + 60, ttl=TTL)
    ]
    rows.close()

    # opened again: nothing left to rebuild, the rows still there
    c = sqlite3.connect(db)
    assert not sqlite_rebuild.needed(c)
    c.close()
    again = SqliteRows(db)
    assert [e.detail for e in again.list_audit("http:a")] == [{"n": 1}, {"n": 2}, {"n": 4}]
    again.close()


def test_a_fresh_file_needs_no_rebuild(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    SqliteRows(db).close()
    c = sqlite3.connect(db)
    assert not sqlite_rebuild.needed(c)
    c.close()


def test_the_sweep_removes_expired_rows_of_the_keyed_tables_in_batches(tmp_path: Path) -> None:
    """Past one batch (500) of a WITHOUT ROWID table, by its primary key; live rows stay."""
    rows = SqliteRows(tmp_path / "approvals.db")
    for i in range(600):
        rows.put_grant(_grant(f"s{i}.org", "c", T0 + 1), T0 + 10)
    live = _grant("live.org", "c", T0 + 900)
    rows.put_grant(live, T0 + 1000)
    rows.put_session("http:old", "sessions/o.json", T0, T0 + 10)
    rows.put_session("http:live", "sessions/l.json", T0, T0 + 1000)
    assert rows.take_turn("http:old", "h", T0, T0 + 10)
    rows.put_timers(
        [
            Timer(chat="http:a", card_id="c_old", name="expire", due_at=T0 + 5, ttl=T0 + 10),
            Timer(chat="http:a", card_id="c_live", name="expire", due_at=T0 + 500, ttl=T0 + 1000),
        ]
    )
    assert rows.sweep(T0 + 20) == 600 + 1 + 1 + 1
    assert rows.list_grants("U1", None, T0) == [live]
    assert rows.get_session("http:old") is None and rows.get_session("http:live") == "sessions/l.json"
    assert [t.card_id for t in rows.claim_timers("t", T0 + 600, T0 + 630, T0, 10)] == ["c_live"]
    assert rows.sweep(T0 + 20) == 0
    rows.close()


def _btrees_written(db: Path) -> set[str]:
    """The b-trees whose pages the WAL holds (its frames' page numbers, named by dbstat)."""
    data = (db.parent / (db.name + "-wal")).read_bytes()
    size = struct.unpack(">I", data[8:12])[0]
    c = sqlite3.connect(db)
    names = dict((page, name) for name, page in c.execute("SELECT name, pageno FROM dbstat"))
    c.close()
    pages = {struct.unpack(">I", data[at : at + 4])[0] for at in range(32, len(data) - size, 24 + size)}
    return {names.get(p, f"page {p}") for p in pages}


def test_a_turn_lease_commit_writes_one_btree(tmp_path: Path) -> None:
    """The lease's commit (begin_turn's, before a new turn's agent runs) and its release in the
    pause step write the turns' own b-tree and nothing else: no index beside it."""
    db = tmp_path / "approvals.db"
    rows = SqliteRows(db)
    assert rows.take_turn("http:warm", "h", T0, T0 + 30)
    writer = rows._writer
    assert writer is not None
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    start = rows.begin_turn("http:a", "h", "U1", T0, T0 + 30)
    assert start.taken
    assert _btrees_written(db) == {"turns"}
    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert rows.end_turn("http:a", "h", now=T0 + 1)
    assert _btrees_written(db) == {"turns"}
    rows.close()
