"""Opens the backends named by configuration URLs."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from core.models import Clock
from store.base import ObjectStore, RowStore

# SQLite row stores opened in this process, by file: objects opened on the same file share
# their connections (one transaction can then hold a snapshot and its pointer).
_SQLITE_ROWS: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()


def _sqlite_path(url: str) -> str:
    path = url[len("sqlite:///") :] if url.startswith("sqlite:///") else ""
    if not path:
        raise ValueError(f"bad sqlite URL {url!r}: use sqlite:///relative.db or sqlite:////abs.db")
    return path


def open_rows(url: str) -> RowStore:
    """`sqlite:///relative/path.db`, `sqlite:////absolute/path.db`, or `dynamodb://TABLE?...`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from store.sqlite_rows import SqliteRows

        path = _sqlite_path(url)
        rows = SqliteRows(path)
        _SQLITE_ROWS[str(Path(path).resolve())] = rows
        return rows
    if parts.scheme == "dynamodb":
        from store.dynamodb_rows import open_dynamodb_rows  # type: ignore[import-not-found,unused-ignore]

        return open_dynamodb_rows(url)  # type: ignore[no-any-return,unused-ignore]
    raise ValueError(f"unknown store URL {url!r}: expected sqlite:///PATH or dynamodb://TABLE")


def open_objects(url: str, clock: Clock) -> ObjectStore:
    """A folder path (or `file:///path`), `sqlite:///path.db` (objects in that SQLite file, which
    may be the row store's), or `s3://BUCKET/prefix?...`."""
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        from store.sqlite_objects import SqliteObjects

        path = _sqlite_path(url)
        return SqliteObjects(path, clock=clock, rows=_SQLITE_ROWS.get(str(Path(path).resolve())))
    if parts.scheme in ("", "file"):
        from store.file_objects import FileObjects

        return FileObjects(Path(parts.path if parts.scheme == "file" else url), clock=clock)
    if parts.scheme == "s3":
        from store.s3_objects import open_s3_objects  # type: ignore[import-not-found,unused-ignore]

        return open_s3_objects(url, clock)  # type: ignore[no-any-return,unused-ignore]
    raise ValueError(f"unknown objects URL {url!r}: expected a folder, sqlite:///PATH or s3://BUCKET/prefix")
