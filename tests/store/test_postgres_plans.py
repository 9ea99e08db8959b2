"""PostgreSQL: the claim, the sweep of every table and the outbox reads go through an index, never a
full scan (issue 30), checked on the real server's plans with EXPLAIN.

With sequential scans disabled the planner still shows a Seq Scan where no index can serve the
statement, so a plan without one proves an index serves it, whatever the table's size. EXPLAIN
without ANALYZE plans a write without running it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chat_approvals.store.postgres_rows import SWEPT, PostgresRows, sweep_query
from tests.support.store_backends import pg_schema

NOW = 1_800_000_000.0


@pytest.fixture
def rows() -> Iterator[PostgresRows]:
    with pg_schema() as url:
        store = PostgresRows(url)
        try:
            yield store
        finally:
            store.close()


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _scans(rows: PostgresRows, query: str, args: tuple[Any, ...]) -> list[tuple[str, str]]:
    """(node type, relation or index) of every scan in the statement's plan."""
    with rows._tx() as conn:
        conn.execute(b"SET LOCAL enable_seqscan = off")
        cur = conn.execute(b"EXPLAIN (FORMAT JSON) " + query.encode(), args)
        row = cur.fetchone()
        assert row is not None
        doc = row["QUERY PLAN"]
    plan = (json.loads(doc) if isinstance(doc, str) else doc)[0]["Plan"]
    return [
        (n["Node Type"], n.get("Index Name") or n.get("Relation Name") or "")
        for n in _nodes(plan)
        if "Scan" in n["Node Type"]
    ]


def _no_full_scan(scans: list[tuple[str, str]]) -> None:
    assert scans, "the plan reads no table"
    assert not [s for s in scans if s[0] == "Seq Scan"], scans


def test_the_claim_updates_through_the_chat_key(rows: PostgresRows) -> None:
    scans = _scans(rows, PostgresRows.CLAIM, ("w", NOW + 30, NOW + 600, "chat", "card", "sh", NOW, NOW, 0))
    _no_full_scan(scans)
    assert {name for _, name in scans} & {"pointers_pkey", "pointers_card"}, scans  # both unique


@pytest.mark.parametrize("table", SWEPT)
def test_the_sweep_finds_expired_rows_through_the_ttl_index(rows: PostgresRows, table: str) -> None:
    scans = _scans(rows, sweep_query(table, "ttl"), (NOW, 500))
    _no_full_scan(scans)
    assert any(name == f"{table}_ttl" for _, name in scans), scans
    assert ("Tid Scan", table) in scans  # the delete reaches the rows by id


def test_the_objects_sweep_uses_the_written_at_index(rows: PostgresRows) -> None:
    scans = _scans(rows, sweep_query("objects", "written_at"), (NOW, 500))
    _no_full_scan(scans)
    assert any(name == "objects_written" for _, name in scans), scans


def test_the_due_timers_are_read_through_the_partial_due_index(rows: PostgresRows) -> None:
    """Issue 33: the timers' claim reads the ones not yet fired through `timers_due`, never every card."""
    claim = _scans(rows, PostgresRows.CLAIM_TIMERS, ("me", NOW + 30, NOW + 30, NOW, NOW - 86400, NOW, 50))
    _no_full_scan(claim)
    assert any(name == "timers_due" for _, name in claim), claim
    fire = _scans(rows, "UPDATE timers SET fired_at = %s WHERE card_id = %s AND name = %s AND fired_at IS NULL",
                  (NOW, "card", "remind:0"))  # fmt: skip
    _no_full_scan(fire)
    assert any(name == "timers_pkey" for _, name in fire), fire


def test_the_outbox_reads_use_the_sink_key(rows: PostgresRows) -> None:
    claim = _scans(rows, PostgresRows.CLAIM_OUTBOX, ("sink", "me", NOW + 30, NOW + 30, NOW, "sink", 50))
    _no_full_scan(claim)
    assert any(name == "outbox_pkey" for _, name in claim), claim  # oldest first, read in key order
    delete = _scans(rows, "DELETE FROM outbox WHERE sink = %s AND id = %s", ("sink", "id"))
    _no_full_scan(delete)


@pytest.mark.parametrize(
    ("query", "args", "index"),
    [
        ("SELECT * FROM pointers WHERE card_id = %s", ("card",), "pointers_card"),
        ("SELECT * FROM audit WHERE chat = %s ORDER BY seq", ("chat",), "audit_chat"),
        ("SELECT * FROM audit WHERE at >= %s ORDER BY at, chat, seq", (NOW,), "audit_at"),
        ("SELECT * FROM grants WHERE usr = %s AND expires_at > %s AND chat = %s", ("u", NOW, "c"), "grants_pkey"),
    ],
)
def test_the_protocol_reads_use_their_index(rows: PostgresRows, query: str, args: tuple[Any, ...], index: str) -> None:
    scans = _scans(rows, query, args)
    _no_full_scan(scans)
    assert any(name == index for _, name in scans), scans
