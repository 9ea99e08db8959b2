"""Opens the backends named by configuration URLs."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from chat_approvals.core.models import Clock
from chat_approvals.store.base import ObjectStore, RowStore

# SQLite row stores opened in this process, by file: objects opened on the same file share
# their connections (one transaction can then hold a snapshot and its pointer).
_SQLITE_ROWS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
# DynamoDB row stores opened in this process, by table name: S3 objects with `table=` naming
# one share it (its region and endpoint), so a step's small objects ride in its row write.
_DYNAMO_ROWS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
# PostgreSQL row stores opened in this process, by URL: objects on the same URL share their pool
# (and a step's transaction).
_PG_ROWS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
_PG_SCHEMES = ("postgresql", "postgres")


def _sqlite_path(url: str) -> str:
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
    if not path:
        raise ValueError(f"bad sqlite URL {url!r}: use sqlite:///relative.db or sqlite:////abs.db")
    return path


def open_rows(url: str) -> RowStore:
    """`sqlite:///relative/path.db`, `sqlite:////absolute/path.db`, `dynamodb://TABLE?...`, or
    `postgresql://USER@HOST:PORT/DB?...` (store/postgres_target.py: its options)."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from chat_approvals.store.sqlite_rows import SqliteRows

        path = _sqlite_path(url)
        rows = SqliteRows(path)
        _SQLITE_ROWS[str(Path(path).resolve())] = rows
        return rows
    if parts.scheme == "dynamodb":
        from chat_approvals.store.dynamodb_rows import open_dynamodb_rows  # type: ignore[import-not-found,unused-ignore]

        ddb = open_dynamodb_rows(url)
        _DYNAMO_ROWS[ddb.target.name] = ddb
        return ddb  # type: ignore[no-any-return,unused-ignore]
    if parts.scheme in _PG_SCHEMES:
        from chat_approvals.store.postgres_rows import open_postgres_rows

        pg = open_postgres_rows(url)
        _PG_ROWS[url] = pg
        return pg
    raise ValueError(
        f"unknown store URL {url!r}: expected sqlite:///PATH, dynamodb://TABLE or postgresql://USER@HOST/DB"
    )


def open_objects(url: str, clock: Clock) -> ObjectStore:
    """A folder path (or `file:///path`), `sqlite:///path.db` (objects in that SQLite file, which
    may be the row store's), `postgresql://...` (a table in that database), or `s3://BUCKET/prefix?...`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from chat_approvals.store.sqlite_objects import SqliteObjects

        path = _sqlite_path(url)
        return SqliteObjects(path, clock=clock, rows=_SQLITE_ROWS.get(str(Path(path).resolve())))
    if parts.scheme in _PG_SCHEMES:  # the objects table beside the rows
        from chat_approvals.store.postgres_objects import PostgresObjects
        from chat_approvals.store.postgres_rows import open_postgres_rows

        shared = _PG_ROWS.get(url)
        if shared is not None:
            return PostgresObjects(shared, clock)
        return PostgresObjects(open_postgres_rows(url), clock, owns_rows=True)
    if parts.scheme in ("", "file"):
        from chat_approvals.store.file_objects import FileObjects

        return FileObjects(Path(parts.path if parts.scheme == "file" else url), clock=clock)
    if parts.scheme == "s3":
        from chat_approvals.store.s3_objects import open_s3_objects  # type: ignore[import-not-found,unused-ignore]

        s3 = open_s3_objects(url, clock)
        if s3.target.table is None:
            return s3  # type: ignore[no-any-return,unused-ignore]
        return _table_objects(s3, clock)
    raise ValueError(f"unknown objects URL {url!r}: expected a folder, sqlite:///PATH or s3://BUCKET/prefix")


def _table_objects(s3: Any, clock: Clock) -> ObjectStore:
    """`s3://...&table=TABLE`: small objects in the row table (the row store's own instance when
    this process opened it, so a step's objects ride in its writes), larger ones in S3."""
    from dataclasses import replace

    from chat_approvals.store.dynamodb_rows import DynamoRows
    from chat_approvals.store.table_objects import DEFAULT_INLINE_MAX, DEFAULT_RETENTION_DAYS, TableObjects

    t = s3.target
    rows = _DYNAMO_ROWS.get(t.table)
    if rows is None:  # not opened here: the table in the objects' region and endpoint
        rows = DynamoRows(replace(t, scheme="dynamodb", name=t.table, path="", table=None))
    return TableObjects(
        rows,
        s3,
        clock,
        inline_max=t.inline_max if t.inline_max is not None else DEFAULT_INLINE_MAX,
        retention_days=t.retention_days if t.retention_days is not None else DEFAULT_RETENTION_DAYS,
    )


def shown_url(url: str) -> str:
    """A store URL fit to show: without its query and without a password (a postgresql:// URL
    may carry one)."""
    parts = urlsplit(url.split("?")[0])
    if parts.password is None:
        return url.split("?")[0]
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()
