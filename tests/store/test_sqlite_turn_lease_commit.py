"""The turn lease's commit does not wait for its own fsync (store/sqlite_rows.py, begin_turn), and
nothing else loses its fsync: every other commit of the connection stays synchronous=FULL, and the
lease holds against other connections at once."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chat_approvals.store.sqlite_rows import SqliteRows

FULL = 2


def synchronous(rows: SqliteRows) -> int:
    conn: sqlite3.Connection = rows._conn()
    return int(conn.execute("PRAGMA synchronous").fetchone()[0])


def test_after_begin_turn_the_connection_commits_with_full_fsync_again(tmp_path: Path) -> None:
    rows = SqliteRows(tmp_path / "a.db")
    assert synchronous(rows) == FULL
    assert rows.begin_turn("chat", "h1", "u", now=0.0, lease_until=60.0).taken
    assert synchronous(rows) == FULL
    assert not rows.begin_turn("chat", "h2", "u", now=1.0, lease_until=61.0).taken  # refused: still FULL after
    assert synchronous(rows) == FULL
    with rows.atomic():  # nested in a step's transaction: the pragma is left alone
        assert rows.begin_turn("other", "h3", "u", now=1.0, lease_until=61.0).taken
    assert synchronous(rows) == FULL
    rows.close()


def test_the_lease_holds_against_another_connection_at_once(tmp_path: Path) -> None:
    one, two = SqliteRows(tmp_path / "a.db"), SqliteRows(tmp_path / "a.db")
    assert one.begin_turn("chat", "h1", "u", now=0.0, lease_until=60.0).taken
    # another connection (as a replica's) sees the committed lease before any later fsync
    assert not two.take_turn("chat", "h2", now=1.0, lease_until=61.0)
    assert two.take_turn("chat", "h2", now=61.0, lease_until=121.0)  # lapsed: taken
    one.close()
    two.close()
