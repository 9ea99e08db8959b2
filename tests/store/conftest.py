"""Fixtures shared by the store tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.store.open import open_objects, open_rows
from chat_approvals.store.sqlite_objects import SqliteObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import T0


@pytest.fixture
def embedded(tmp_path: Path) -> tuple[SqliteRows, SqliteObjects]:
    """The embedded default: SQLite rows, and objects kept in the same file."""
    url = f"sqlite:///{tmp_path / 'approvals.db'}"
    rows, objects = open_rows(url), open_objects(url, ManualClock(T0))
    assert isinstance(rows, SqliteRows) and isinstance(objects, SqliteObjects)
    return rows, objects
