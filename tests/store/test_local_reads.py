"""Issue 12: on a backend whose reads are local (SQLite in WAL mode) the async ports make their
small reads on the event loop, without a thread hop; writes, unbounded listings (a chat's audit),
and every call on a backend whose reads go over the network still run in the store's executor
(an fsync, a long listing or a network wait never blocks the loop)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.observe.metrics import Metrics
from chat_approvals.core.observe.observed import observe
from chat_approvals.store.aio import Rows, StoreIO
from chat_approvals.store.base import RowStore
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import T0, make_pointer


class ThreadOf:
    """Wraps a row store and records the thread each method ran on."""

    def __init__(self, inner: RowStore, local_reads: bool) -> None:
        self.inner, self.local_reads = inner, local_reads
        self.ran_on: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.ran_on[name] = threading.current_thread().name
            return attr(*args, **kwargs)

        return call


def _io(tmp_path: Path, rows: Any) -> StoreIO:
    return StoreIO(rows, FileObjects(tmp_path / "objects", clock=ManualClock(T0)))


@pytest.mark.parametrize("local", [True, False])
async def test_reads_run_on_the_loop_only_when_the_backend_says_they_are_local(tmp_path: Path, local: bool) -> None:
    spy = ThreadOf(SqliteRows(tmp_path / "rows.db"), local_reads=local)
    io = _io(tmp_path, spy)
    rows = Rows(io)
    p = make_pointer("http:a")
    try:
        assert await rows.put_pointer(p, now=T0)
        assert (await rows.pointer(chat="http:a")) is not None
        assert (await rows.pointer_by_card(p.card_id)) is not None
        assert await rows.refusals(chat="http:a", turn_id="t") == []
        assert await rows.grants(user="u", chat="http:a", now=T0) == []
        await rows.audit(chat="http:a")  # a listing without a bound
    finally:
        io.close()
    loop_thread = threading.current_thread().name
    assert spy.ran_on["put_pointer"].startswith("store")  # a write always hops (its fsync)
    assert spy.ran_on["list_audit"].startswith("store")  # so does a chat's whole audit
    for read in ("get_pointer", "get_pointer_by_card", "list_refusals", "list_grants"):
        assert (spy.ran_on[read] == loop_thread) is local, (read, spy.ran_on[read])


def test_sqlite_says_its_reads_are_local_and_the_metrics_wrapper_keeps_it(tmp_path: Path) -> None:
    rows = SqliteRows(tmp_path / "rows.db")
    assert rows.local_reads is True
    assert observe(rows, Metrics(lambda: T0)).local_reads is True
    assert RowStore.local_reads is False  # any other backend (DynamoDB) hops for every call
