"""Brings an embedded store's file made by an earlier release to the current table forms.

Issue 34 changed some tables' forms so that a cycle's commits write fewer pages to the WAL
(each page is one more frame written and fsync'd): the small keyed tables (grants, turns,
sessions, timers) became WITHOUT ROWID (the row lives in its primary key's b-tree: one b-tree
written instead of two), the turns' ttl index went (a turn's row is deleted when the turn ends,
so the sweep reads a few rows without it), and the audit's `seq` lost AUTOINCREMENT (which wrote
the sqlite_sequence table on every append; `seq` still orders a chat's events, as a new row's
rowid is always above every row left).

SQLite cannot change a table's form in place: such a table is renamed aside, created anew with
its indexes from SCHEMA, its rows copied with their values (the audit's `seq` included), and the
old one dropped, all in one transaction (one writer at a time: another process opening the file
then finds it done).
"""

from __future__ import annotations

import sqlite3

# table -> what its CREATE statement says in the old form (upper case), or lacks in the new
_OLD_FORM = {
    "grants": ("lacks", "WITHOUT ROWID"),
    "turns": ("lacks", "WITHOUT ROWID"),
    "sessions": ("lacks", "WITHOUT ROWID"),
    "timers": ("lacks", "WITHOUT ROWID"),
    "audit": ("has", "AUTOINCREMENT"),
}
_DROPPED_INDEXES = ("turns_ttl",)


def _old_tables(c: sqlite3.Connection) -> list[str]:
    found = dict(c.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table'").fetchall())
    old = []
    for table, (how, text) in _OLD_FORM.items():
        sql = str(found.get(table) or "").upper()
        if sql and (text in sql) == (how == "has"):
            old.append(table)
    return old


def _dropped_indexes(c: sqlite3.Connection) -> list[str]:
    marks = ",".join("?" * len(_DROPPED_INDEXES))
    rows = c.execute(f"SELECT name FROM sqlite_schema WHERE type = 'index' AND name IN ({marks})", _DROPPED_INDEXES)
    return [r[0] for r in rows]


def needed(c: sqlite3.Connection) -> bool:
    """Whether the file has a table of an earlier form (a read: no lock taken)."""
    return bool(_old_tables(c) or _dropped_indexes(c))


def rebuild(c: sqlite3.Connection, schema: str) -> list[str]:
    """On `c` (autocommit, no transaction open): every table of an earlier form rebuilt as
    `schema` (CREATE ... IF NOT EXISTS statements, no `;` inside one) has it, rows kept, in one
    transaction. Returns the tables rebuilt ([] when another process did it first)."""
    c.execute("BEGIN IMMEDIATE")  # busy: raised as it is, for the caller's WriteGate to try again
    try:
        old = _old_tables(c)  # again, under the lock: another process may have done it meanwhile
        for table in old:
            c.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
            indexes = c.execute(
                "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                (f"{table}_old",),
            ).fetchall()
            for (index,) in indexes:  # their names are the new table's in SCHEMA
                c.execute(f"DROP INDEX {index}")
        for index in _dropped_indexes(c):
            c.execute(f"DROP INDEX {index}")
        for statement in schema.split(";"):
            if statement.strip():
                c.execute(statement)
        for table in old:
            columns = ", ".join(r[1] for r in c.execute(f"PRAGMA table_info({table}_old)"))
            c.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {table}_old")
            c.execute(f"DROP TABLE {table}_old")
        c.execute("COMMIT")
    except BaseException:
        c.execute("ROLLBACK")
        raise
    return old
