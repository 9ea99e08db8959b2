"""The embedded store's one-commit steps (issue 12): objects kept in the rows' SQLite file share
its connections, and a step's writes commit together or not at all (R7: a snapshot and the
pointer that names it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ObjectRef
from chat_approvals.store.open import open_objects
from chat_approvals.store.sqlite_objects import SqliteObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import T0, _grant, make_pointer


def test_objects_opened_on_the_rows_file_share_its_connections(
    embedded: tuple[SqliteRows, SqliteObjects], tmp_path: Path
) -> None:
    rows, objects = embedded
    assert objects.rows is rows and objects._conn() is rows._conn()
    other = open_objects(f"sqlite:///{tmp_path / 'other.db'}", ManualClock(T0))
    assert isinstance(other, SqliteObjects) and other.rows is None  # another file: its own connections


def test_r7_an_atomic_step_commits_its_object_and_its_rows_together(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    rows, objects = embedded
    p = make_pointer("http:a")
    with rows.atomic():
        ref = objects.put("snapshots/a.json", b"{}")
        assert rows.put_pointer(p.model_copy(update={"snapshot": ref}), T0)
    assert objects.get(ref) == b"{}" and rows.get_pointer("http:a") is not None


def test_r7_a_failed_atomic_step_leaves_neither_the_snapshot_nor_the_pointer(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    rows, objects = embedded
    p = make_pointer("http:a")
    with pytest.raises(RuntimeError), rows.atomic():
        ref = objects.put("snapshots/a.json", b"{}")
        assert rows.put_pointer(p.model_copy(update={"snapshot": ref}), T0)
        raise RuntimeError("the process fails before the commit")
    assert objects.get_key("snapshots/a.json") is None
    assert rows.get_pointer("http:a") is None
    with pytest.raises(KeyError):
        objects.get(ObjectRef(key="snapshots/a.json", size=2, sha256="0" * 64))


def test_a_failed_inner_step_is_undone_alone(embedded: tuple[SqliteRows, SqliteObjects]) -> None:
    rows, objects = embedded
    g = _grant("U1", "http:a", "site", "a.org")
    with rows.atomic():
        objects.put("answers/a.json", b"{}")
        with pytest.raises(RuntimeError), rows.atomic():  # a compound step inside: a savepoint
            rows.put_grant(g, T0 + 10)
            raise RuntimeError("inner step fails")
        rows.put_session("http:a", "sessions/1.json", T0, T0 + 10)
    assert objects.get_key("answers/a.json") == b"{}"
    assert rows.list_grants("U1", "http:a", T0) == []
    assert rows.get_session("http:a") == "sessions/1.json"
