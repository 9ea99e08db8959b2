"""Issue 34: the embedded store's writes, from any thread, take turns on ONE writer connection
(SQLite drops a connection's page cache whenever another connection wrote, and a thread that
lost the race for the lock failed its BEGIN and retried), while reads outside a transaction keep
a connection per thread and never wait for a write (R21: the event loop reads). A write that
cannot get its turn in time fails and changes nothing; a step's audit rows are one INSERT in
their order, and a step that fails anywhere changes nothing."""

from __future__ import annotations

import sqlite3
import threading

import pytest

import chat_approvals.store.sqlite_writes as writes
from chat_approvals.core.models import AuditEvent, AuditWrite, ClaimRead, ClaimWrite, GrantChange, OutboxItem
from chat_approvals.store.base import StoreError
from chat_approvals.store.sqlite_objects import SqliteObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import LEASE, RETENTION, T0, _grant, make_pointer

THREADS, WRITES = 4, 25


def _traced_writer(rows: SqliteRows) -> list[str]:
    """Every statement the store's writer connection starts from now on (a busy one too)."""
    rows.put_session("http:warm", "sessions/0.json", T0, T0 + RETENTION)  # the writer exists now
    assert rows._writer is not None
    started: list[str] = []
    rows._writer.set_trace_callback(started.append)
    return started


def test_every_thread_writes_through_the_one_writer_and_never_retries_a_begin(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    rows, objects = embedded
    started = _traced_writer(rows)
    failures: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(WRITES):
                with rows.atomic():  # a compound step, its object in the same commit
                    ref = objects.put(f"snapshots/{t}-{i}.json", b"{}")
                    assert rows.put_pointer(make_pointer(f"http:{t}-{i}").model_copy(update={"snapshot": ref}), T0)
                rows.put_session(f"http:{t}-{i}", f"sessions/{t}-{i}.json", T0, T0 + RETENTION)  # a write alone
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not failures
    begins = [s for s in started if s == "BEGIN IMMEDIATE"]
    assert len(begins) == THREADS * WRITES  # all on this one connection, none tried twice
    assert sum(s.startswith("INSERT INTO sessions") for s in started) == THREADS * WRITES
    for t in range(THREADS):  # another thread's connection reads every committed row
        for i in range(WRITES):
            assert rows.get_pointer(f"http:{t}-{i}") is not None
            assert rows.get_session(f"http:{t}-{i}") == f"sessions/{t}-{i}.json"


def _hold_a_write_open(rows: SqliteRows, chat: str) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Another thread inside a compound step (the writer's turn held), its pointer not committed."""
    inside, done = threading.Event(), threading.Event()

    def step() -> None:
        with rows.atomic():
            assert rows.put_pointer(make_pointer(chat), T0)
            inside.set()
            done.wait(timeout=10)

    t = threading.Thread(target=step)
    t.start()
    assert inside.wait(timeout=10)
    return t, inside, done


@pytest.mark.parametrize("step", ["single statement", "compound step", "object put"])
def test_a_write_that_cannot_get_its_turn_in_time_fails_and_changes_nothing(
    embedded: tuple[SqliteRows, SqliteObjects], monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    rows, objects = embedded
    monkeypatch.setattr(writes, "LOCK_WAIT", 0.05)
    holder, _, done = _hold_a_write_open(rows, "http:held")
    try:
        with pytest.raises(StoreError, match="locked"):
            if step == "single statement":
                rows.put_pointer(make_pointer("http:a"), T0)
            elif step == "compound step":
                with rows.atomic():
                    rows.put_pointer(make_pointer("http:a"), T0)
            else:
                objects.put("snapshots/a.json", b"{}")
    finally:
        done.set()
        holder.join(timeout=10)
    assert rows.get_pointer("http:a") is None and objects.get_key("snapshots/a.json") is None
    assert rows.get_pointer("http:held") is not None  # the step that held the turn committed
    rows.put_pointer(make_pointer("http:a"), T0)  # and the next write has its turn again
    assert rows.get_pointer("http:a") is not None


def test_r21_a_read_never_waits_for_a_write_in_progress(embedded: tuple[SqliteRows, SqliteObjects]) -> None:
    rows, objects = embedded
    objects.put("answers/a.json", b"{}")
    holder, _, done = _hold_a_write_open(rows, "http:held")
    got: list[object] = []
    try:
        reader = threading.Thread(
            target=lambda: got.extend([rows.get_pointer("http:held"), objects.get_key("answers/a.json")])
        )
        reader.start()
        reader.join(timeout=2)  # the writer's turn is held until `done`: a waiting read would still be here
        assert not reader.is_alive() and got == [None, b"{}"]  # WAL: the snapshot before the open step
    finally:
        done.set()
        holder.join(timeout=10)
    assert rows.get_pointer("http:held") is not None


def _ev(chat: str, kind: str, card: str, outbox: tuple[OutboxItem, ...] = ()) -> AuditWrite:
    event = AuditEvent(chat=chat, at=T0, kind=kind, actor="U1", card_id=card, detail={"n": kind})  # type: ignore[arg-type]
    return AuditWrite(event, T0 + RETENTION, outbox)


def _claim(rows: SqliteRows, chat: str, *, ids: tuple[str, str]) -> ClaimWrite:
    p = rows.get_pointer(chat)
    assert p is not None
    site = _grant(p.owner, p.chat, "site", "example.org", card=p.card_id)
    return ClaimWrite(
        ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count),
        worker="w1",
        now=T0 + 1,
        lease_until=T0 + 1 + LEASE,
        resume_deadline=T0 + 900,
        changes=[GrantChange(site, site.expires_at + RETENTION, False, _ev(chat, "grant", p.card_id))],
        before=[_ev(chat, "claim_won", p.card_id, (OutboxItem(sink="hook", id=ids[0], chat=chat, body="{}"),))],
        after=[_ev(chat, "answered", p.card_id, (OutboxItem(sink="hook", id=ids[1], chat=chat, body="{}"),))],
    )


def test_a_claims_audit_rows_and_their_outbox_items_are_written_in_order(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    """R10 and R14: the claim's events before, its grant's, after, in that order, with their outbox items."""
    rows, _ = embedded
    assert rows.put_pointer(make_pointer("http:c"), T0)
    assert rows.claim_grants(_claim(rows, "http:c", ids=("1", "2"))) is not None
    assert [e.kind for e in rows.list_audit("http:c")] == ["claim_won", "grant", "answered"]
    items = rows.claim_outbox("hook", "h", T0 + 2, T0 + 2 + LEASE, 10)
    assert [(o.id, o.chat) for o in items] == [("1", "http:c"), ("2", "http:c")]


def test_a_claim_whose_audit_cannot_be_written_changes_nothing(embedded: tuple[SqliteRows, SqliteObjects]) -> None:
    """R10: the claim, its grants (R14) and its events are one write; any part failing undoes it all."""
    rows, _ = embedded
    assert rows.put_pointer(make_pointer("http:c"), T0)
    before = rows.get_pointer("http:c")
    with pytest.raises(sqlite3.IntegrityError):  # two outbox items with one id: the last statement fails
        rows.claim_grants(_claim(rows, "http:c", ids=("1", "1")))
    assert rows.get_pointer("http:c") == before  # not claimed
    assert rows.list_audit("http:c") == [] and rows.list_grants(before.owner, "http:c", T0 + 1) == []  # type: ignore[union-attr]
    assert rows.claim_outbox("hook", "h", T0 + 2, T0 + 2 + LEASE, 10) == []


def test_a_failed_inner_step_after_a_good_one_at_the_same_depth_is_undone_alone(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    rows, _ = embedded
    kept, undone = _grant("U1", "http:a", "site", "a.org"), _grant("U1", "http:a", "site", "b.org")
    with rows.atomic():
        with rows.atomic():  # succeeds: its savepoint is left for the outer COMMIT
            rows.put_grant(kept, T0 + RETENTION)
        with pytest.raises(RuntimeError), rows.atomic():  # the same depth: undone back to its own
            rows.put_grant(undone, T0 + RETENTION)
            raise RuntimeError("inner step fails")
        rows.put_session("http:a", "sessions/1.json", T0, T0 + RETENTION)
    assert rows.list_grants("U1", "http:a", T0) == [kept]
    assert rows.get_session("http:a") == "sessions/1.json"
