"""`chat-approvals store init` for a `postgresql://` store: the numbered migrations, once each."""

from __future__ import annotations

import psycopg

from chat_approvals.store.postgres_schema import REQUIRED, migrate
from chat_approvals.store.postgres_target import FAULTS, connect_kwargs, parse_target


def init_postgres(url: str) -> str:
    """Create or migrate the schema the URL names; safe to run again, and from several hosts at
    once (an advisory lock serialises them). Says what it did."""
    t = parse_target(url)
    kwargs = connect_kwargs(t)
    kwargs.pop("row_factory")
    try:
        with psycopg.connect(t.conninfo, **kwargs) as conn:
            applied = migrate(conn, t.schema)
    except FAULTS as e:
        raise ValueError(f"--store {t.shown}: cannot reach PostgreSQL ({e})") from None
    if not applied:
        return f"schema {t.schema} at {t.shown} is up to date (version {REQUIRED})"
    return f"schema {t.schema} at {t.shown}: applied {', '.join(applied)} (now version {REQUIRED})"
