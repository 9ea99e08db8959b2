"""Tool approvals on PostgreSQL (issue 30): a gated tool's card under racing clicks, its `for this
chat` grant and revoke. The existing tests (tests/bots/test_tool_approvals.py), imported and run
with this file's `store` fixture: rows and objects in a fresh PostgreSQL schema."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.postgres_objects import PostgresObjects
from chat_approvals.store.postgres_rows import PostgresRows
from tests.bots.test_tool_approvals import (
    api,  # noqa: F401 - the fixture of the imported tests
    notes,  # noqa: F401
    test_r1_a_gated_tool_pauses_before_its_body_and_runs_once_under_20_racing_clicks,  # noqa: F401
    test_r14_for_this_chat_grants_the_tool_then_revoke_asks_again,  # noqa: F401
)
from tests.support.store_backends import pg_schema


@pytest.fixture
def store(clock: ManualClock) -> Iterator[StoreIO]:
    with pg_schema() as url:
        rows = PostgresRows(url)
        io = StoreIO(rows, PostgresObjects(rows, clock))
        yield io
        io.close()
