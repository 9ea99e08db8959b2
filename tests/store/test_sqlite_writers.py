"""Issue 12: the embedded store's statements wait for SQLite's write lock on the file's
WriteGate instead of SQLite's busy handler (whose growing sleeps cost a losing writer up to
~1.3 s in a 100-click burst): a waiter is woken as soon as another write of this process ends,
retries on its own while only another process could free the lock, and a statement that cannot
get the lock in time fails and changes nothing."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

import chat_approvals.store.sqlite_writes as writes
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.base import StoreError
from chat_approvals.store.open import open_objects, open_rows
from chat_approvals.store.sqlite_objects import SqliteObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import T0, make_pointer


def test_one_gate_per_file(tmp_path: Path) -> None:
    a = writes.write_gate(str(tmp_path / "a.db"))
    assert writes.write_gate(str(tmp_path / "x" / ".." / "a.db")) is a  # the same file, however named
    assert writes.write_gate(str(tmp_path / "b.db")) is not a
    assert writes.write_gate(":memory:") is not writes.write_gate(":memory:")


def test_a_waiter_is_woken_when_a_write_of_this_process_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writes, "RECHECK", 30.0)  # so only the notice can end the wait in time
    gate = writes.WriteGate()
    free = threading.Event()
    tries: list[int] = []

    def statement() -> str:
        tries.append(1)
        if not free.is_set():
            raise sqlite3.OperationalError("database is locked")
        return "done"

    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(gate.attempt(statement)))
    t.start()
    t.join(timeout=0.2)
    assert t.is_alive() and len(tries) == 1  # waiting, not spinning
    free.set()
    gate.ended()
    t.join(timeout=5)
    assert not t.is_alive() and got == ["done"] and len(tries) == 2


def test_only_a_busy_lock_is_waited_for() -> None:
    def broken() -> None:
        raise sqlite3.OperationalError("no such table: pointers")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        writes.WriteGate().attempt(broken)


def _other_process_holds_the_lock(path: str) -> sqlite3.Connection:
    """Another connection (as a replica's would be) holding SQLite's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    return other


@pytest.mark.parametrize("step", ["single statement", "compound step", "object put"])
def test_a_write_waits_while_another_connection_holds_the_lock_then_applies(tmp_path: Path, step: str) -> None:
    url = f"sqlite:///{tmp_path / 'approvals.db'}"
    rows, objects = open_rows(url), open_objects(url, ManualClock(T0))
    assert isinstance(rows, SqliteRows) and isinstance(objects, SqliteObjects)
    p = make_pointer("http:a")

    def write() -> None:
        if step == "single statement":
            assert rows.put_pointer(p, T0)
        elif step == "compound step":
            with rows.atomic():
                assert rows.put_pointer(p, T0)
        else:
            objects.put("snapshots/a.json", b"{}")

    other = _other_process_holds_the_lock(rows.path)
    t = threading.Thread(target=write)
    try:
        t.start()
        t.join(timeout=0.2)
        assert t.is_alive(), "the write went ahead while another connection held the lock"
    finally:
        other.execute("COMMIT")
        other.close()
    t.join(timeout=10)
    assert not t.is_alive()
    if step == "object put":
        assert objects.get_key("snapshots/a.json") == b"{}"
    else:
        assert rows.get_pointer("http:a") is not None


@pytest.mark.parametrize("step", ["single statement", "compound step"])
def test_a_write_that_cannot_get_the_lock_in_time_fails_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rows = SqliteRows(tmp_path / "approvals.db")
    monkeypatch.setattr(writes, "LOCK_WAIT", 0.05)
    other = _other_process_holds_the_lock(rows.path)
    try:
        with pytest.raises(StoreError, match="locked"):
            if step == "single statement":
                rows.put_pointer(make_pointer("http:a"), T0)
            else:
                with rows.atomic():
                    rows.put_pointer(make_pointer("http:a"), T0)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert rows.get_pointer("http:a") is None
