"""PostgreSQL: the store's pool hands out the idle connection returned last
(store/postgres_target.py RecentFirstPool), so calls made one after another reach one server
process; held connections and the pool's limits work as psycopg_pool's do. No rule covers it: it
is for speed (issue 34)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg_pool import PoolTimeout

from chat_approvals.store.postgres_rows import PostgresRows
from tests.support.store_backends import pg_schema


@pytest.fixture
def rows() -> Iterator[PostgresRows]:
    with pg_schema() as url:
        r = PostgresRows(f"{url}&pool_size=3&pool_timeout=0.5")
        r.pool.wait()  # its connections opened (min_size 2; one more if a call came first)
        try:
            yield r
        finally:
            r.close()


def _pid(rows: PostgresRows) -> int:
    row = rows._exec("SELECT pg_backend_pid() AS pid").fetchone()
    assert row is not None
    return int(row["pid"])


def test_calls_one_after_another_reach_one_server_process(rows: PostgresRows) -> None:
    assert rows.pool.get_stats()["pool_available"] >= 2  # idle ones: the old pool turned through them all
    assert len({_pid(rows) for _ in range(10)}) == 1


def test_the_connection_returned_last_is_handed_out_next(rows: PostgresRows) -> None:
    with rows.pool.connection() as a, rows.pool.connection() as b, rows.pool.connection() as c:
        pids = [x.info.backend_pid for x in (a, b, c)]
        with pytest.raises(PoolTimeout):  # its limit holds: three out, none left
            rows.pool.getconn(timeout=0.2)
    # returned c, b, a (the with-statements close inside out): a came back last
    assert _pid(rows) == pids[0]
    with rows.pool.connection() as first, rows.pool.connection() as second:
        assert [first.info.backend_pid, second.info.backend_pid] == [pids[0], pids[1]]
