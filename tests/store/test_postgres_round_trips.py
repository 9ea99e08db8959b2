"""PostgreSQL: one approval cycle (card -> click -> done) through the real facade costs at most 6
database round trips (issue 30), counted from libpq's protocol trace as bench/bench_store.py
counts them: one per protocol step, each compound step one statement, each step's object puts in
the same message as its row write, the claimed snapshot read by the claim. A count, not a timing."""

from __future__ import annotations

import asyncio

import pytest

from bench.bench_store import _cycle
from bench.pg_round_trips import RoundTrips
from chat_approvals.core.agent import default_factory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.postgres_objects import PostgresObjects
from chat_approvals.store.postgres_rows import PostgresRows
from tests.support.store_backends import pg_schema

CYCLES = 5


@pytest.mark.parametrize("held", [128, 0], ids=["agent-held", "from-snapshot"])
def test_one_approval_cycle_is_at_most_six_round_trips(held: int) -> None:
    """`from-snapshot`: the click resumes from the stored snapshot, as on another replica; the claim
    reads the snapshot in its own statement."""
    with pg_schema() as url:
        trips = RoundTrips()
        # pgbouncer mode: no server-side prepares, whose one-off extra round trip would blur the count
        rows = PostgresRows(f"{url}&pgbouncer=true", configure=trips.configure)
        io = StoreIO(rows, PostgresObjects(rows, SystemClock()))
        try:
            approvals = bootstrap(io, agent_factory=default_factory("scripted"), held_agents=held).approvals
            asyncio.run(_cycle(approvals, "warm-up"))
            trips.reset()
            for i in range(CYCLES):
                asyncio.run(_cycle(approvals, f"rt:{i}"))
            per_cycle = trips.count() / CYCLES
        finally:
            io.close()
        assert per_cycle <= 6, per_cycle
        # and every cycle finished: the card is done, its answer and snapshot are in the database
        check = PostgresRows(url)
        try:
            for i in range(CYCLES):
                p = check.get_pointer(f"rt:{i}")
                assert p is not None and p.state == "done" and p.answer_key is not None
        finally:
            check.close()
