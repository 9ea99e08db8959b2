"""PostgreSQL: one approval cycle (card -> click -> done) through the real facade costs at most 5
database round trips (issue 30 allowed 6), counted from libpq's protocol trace as bench/bench_store.py
counts them: one per protocol step, each compound step one statement, each step's object puts in
the same pipeline as its row write, the claimed snapshot read by the claim. With prepared
statements too, once each is prepared (its first prepare may cost a trip of its own). A count, not
a timing."""

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


@pytest.mark.parametrize("prepared", [False, True], ids=["pgbouncer", "prepared"])
@pytest.mark.parametrize("held", [128, 0], ids=["agent-held", "from-snapshot"])
def test_one_approval_cycle_is_at_most_five_round_trips(held: int, prepared: bool) -> None:
    """`from-snapshot`: the click resumes from the stored snapshot, as on another replica; the claim
    reads the snapshot in its own statement. `pgbouncer`: nothing prepared; `prepared`: psycopg
    prepares each statement on its 5th use on a connection, so the warm-up runs every statement
    past that on each of the pool's connections (pool_size=2)."""
    with pg_schema() as url:
        trips = RoundTrips()
        options = "&pool_size=2" if prepared else "&pgbouncer=true"
        rows = PostgresRows(f"{url}{options}", configure=trips.configure)
        io = StoreIO(rows, PostgresObjects(rows, SystemClock()))
        try:
            approvals = bootstrap(io, agent_factory=default_factory("scripted"), held_agents=held).approvals
            for i in range(20 if prepared else 1):
                asyncio.run(_cycle(approvals, f"warm-up:{i}"))
            trips.reset()
            for i in range(CYCLES):
                asyncio.run(_cycle(approvals, f"rt:{i}"))
            per_cycle = trips.count() / CYCLES
        finally:
            io.close()
        assert per_cycle <= 5, per_cycle
        # and every cycle finished: the card is done, its answer and snapshot are in the database
        check = PostgresRows(url)
        try:
            for i in range(CYCLES):
                p = check.get_pointer(f"rt:{i}")
                assert p is not None and p.state == "done" and p.answer_key is not None
        finally:
            check.close()
