"""PostgreSQL: a step's object puts ride in its row statement as data-modifying CTEs
(store/postgres_steps.py `fold`): ONE statement, which the server runs as one implicit transaction:
a put that fails leaves the row write undone, a row statement that fails leaves no put behind, and
the pooled connection is usable after either. Rules: R7 (the pointer names a snapshot that is
there), R12 (the answer is there when the pointer says done)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ClaimRead, ClaimWrite, Fence, Grant, GrantChange
from chat_approvals.store.base import ObjectExists
from chat_approvals.store.postgres_objects import PostgresObjects
from chat_approvals.store.postgres_rows import PostgresRows
from chat_approvals.store.postgres_steps import claim_grants
from tests.support.store_backends import pg_schema
from tests.support.store_conformance import LEASE, T0, _ev, claim, make_pointer


@pytest.fixture
def store() -> Iterator[tuple[PostgresRows, PostgresObjects]]:
    with pg_schema() as url:
        # pool_size=1: every call after a failed step gets the very connection the step used
        rows = PostgresRows(f"{url}&pool_size=1")
        try:
            yield rows, PostgresObjects(rows, ManualClock(T0))
        finally:
            rows.close()


def test_r7_a_put_that_fails_leaves_the_steps_pointer_unwritten_and_the_lease_held(
    store: tuple[PostgresRows, PostgresObjects],
) -> None:
    rows, objects = store
    objects.put("snapshots/c_taken.json", b"written before")
    assert rows.take_turn("http:s", "h1", T0, T0 + LEASE)
    p = make_pointer("http:s")
    with pytest.raises(ObjectExists), rows.atomic():
        ref = objects.put("snapshots/c_fresh.json", b"fresh")  # sent with end_turn, in front of the taken key
        objects.put("snapshots/c_taken.json", b"again")
        p = p.model_copy(update={"snapshot": ref})
        rows.end_turn("http:s", "h1", now=T0, pointer=p, audit=[_ev("http:s", "card_created")])
    assert rows.get_pointer("http:s") is None and rows.list_audit("http:s") == []
    assert objects.get_key("snapshots/c_fresh.json") is None  # the put before the failed one too
    assert objects.get_key("snapshots/c_taken.json") == b"written before"
    assert not rows.take_turn("http:s", "h2", T0 + 1, T0 + 1 + LEASE)  # end_turn never ran: still h1's


def test_r12_a_row_statement_that_fails_leaves_no_put_behind(store: tuple[PostgresRows, PostgresObjects]) -> None:
    rows, objects = store
    with pytest.raises(psycopg.errors.DivisionByZero), rows.atomic():
        objects.put("answers/c_1/1.json", b"the answer")
        rows._exec("SELECT 1 / (SELECT count(*) FROM pointers WHERE chat = %s)", ("none",))
    assert objects.get_key("answers/c_1/1.json") is None
    # the same connection (the pool holds one) took the next step whole
    with rows.atomic():
        ref = objects.put("answers/c_1/1.json", b"the answer")
        assert rows.take_turn("http:s", "h1", T0, T0 + LEASE)
    assert objects.get(ref) == b"the answer"


def test_a_steps_one_statement_is_prepared_and_stays_whole(store: tuple[PostgresRows, PostgresObjects]) -> None:
    """Past psycopg's prepare threshold (5 uses) the step's one statement is prepared, and the
    step still applies whole, its bytes intact."""
    rows, objects = store
    for i in range(8):
        chat = f"http:p{i}"
        assert rows.take_turn(chat, "h1", T0, T0 + LEASE)
        data = bytes(range(256)) * 4 + str(i).encode()
        with rows.atomic():
            ref = objects.put(f"snapshots/c_p{i}.json", data)
            p = make_pointer(chat).model_copy(update={"snapshot": ref})
            assert rows.end_turn(chat, "h1", now=T0, pointer=p, audit=[_ev(chat, "card_created")])
        assert rows.get_pointer_by_card(p.card_id) == p and objects.get(ref) == data
    with rows.pool.connection() as conn:
        assert conn.prepare_threshold == 5
        prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    texts = [r["statement"] for r in prepared]
    assert any("w0 AS (INSERT INTO objects" in t and "INSERT INTO pointers" in t for t in texts), texts


def test_r12_puts_ride_in_a_statement_without_a_with_of_its_own(store: tuple[PostgresRows, PostgresObjects]) -> None:
    """finish without a session is a plain UPDATE: the answer's put goes in front of it as a CTE,
    and finish still reads its own row count (1: done)."""
    rows, objects = store
    assert rows.put_pointer(make_pointer("http:s"), T0)
    p = rows.get_pointer("http:s")
    assert p is not None
    won = claim(rows, p, worker="w1")
    assert won is not None
    fence = Fence(won.chat, won.card_id, "w1", won.claim_count)
    with rows.atomic():
        answer = objects.put(f"answers/{won.card_id}/1.json", b'{"answer": 1}')
        assert rows.finish(fence, answer_key=answer.key)
    done = rows.get_pointer("http:s")
    assert done is not None and done.state == "done" and done.answer_key == answer.key
    assert objects.get(answer) == b'{"answer": 1}'
    with rows.atomic():  # a stale fence: the put is made, the finish refused (0 rows), as before
        objects.put(f"answers/{won.card_id}/2.json", b"late")
        assert not rows.finish(fence, answer_key="late")
    assert rows.get_pointer("http:s") == done


def test_a_clicks_claim_statement_keeps_within_psycopgs_parse_cache() -> None:
    """A click's claim (a grant written, its events before, per change and after) binds at most
    50 parameters, the most psycopg keeps a query's parsing for: over it, every click parsed the
    claim's text again (about 70 us on the store's thread). The order of the events and the
    missing grant of an event are literals in the text, the same text for the same step."""
    grant = Grant(
        user="U1", chat="http:s", kind="site", name="example.org", card_id="c_1", created_at=T0, expires_at=T0 + 60
    )
    w = ClaimWrite(
        ClaimRead("http:s", "c_1", "h" * 64, 0),
        "w1",
        T0,
        T0 + LEASE,
        T0 + 600,
        changes=[GrantChange(grant, T0 + 3600, False, _ev("http:s", "grant"))],
        before=[_ev("http:s", "claim_won")],
        after=[_ev("http:s", "answered")],
    )
    text, args = claim_grants(w)
    assert len(args) <= MAX_CACHED_STATEMENT_PARAMS and len(text.encode()) <= MAX_CACHED_STATEMENT_LENGTH
    assert claim_grants(w)[0] == text  # the same text for the same shape: one prepared statement
