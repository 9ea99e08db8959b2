"""The PostgreSQL schema as numbered migrations, applied by `chat-approvals store init`.

Each migration runs once, in order, inside one transaction with its record in
`schema_migrations`; concurrent inits (several replicas' start-up jobs) are serialised by a
transaction-scoped advisory lock, so the second finds the work done. DDL in PostgreSQL is
transactional: a migration that fails leaves nothing half-made.

`serve` does not migrate: it checks the recorded version (`check_schema`) and refuses to start on
an older one, naming the command to run. Add a migration by appending to MIGRATIONS; never edit
one that has shipped.

Every sweep and every claim reads through an index (tests/store/test_postgres_plans.py checks
the plans with EXPLAIN).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "rows and objects",
        """
CREATE TABLE pointers (
  chat text PRIMARY KEY,
  card_id text NOT NULL,
  sh text NOT NULL,
  state text NOT NULL,
  expires_at double precision NOT NULL,
  ttl double precision NOT NULL,
  claim_count integer NOT NULL,
  worker text,
  lease_until double precision,
  resume_deadline double precision,
  card_location text,
  answer_key text,
  doc text NOT NULL,
  votes jsonb NOT NULL DEFAULT '[]'
);
CREATE UNIQUE INDEX pointers_card ON pointers (card_id);
CREATE INDEX pointers_ttl ON pointers (ttl);
CREATE TABLE grants (
  usr text NOT NULL, chat text NOT NULL, kind text NOT NULL, name text NOT NULL,
  card_id text NOT NULL, created_at double precision NOT NULL, expires_at double precision NOT NULL,
  ttl double precision NOT NULL, turn_id text,
  PRIMARY KEY (usr, chat, kind, name)
);
CREATE INDEX grants_ttl ON grants (ttl);
CREATE TABLE refusals (
  chat text NOT NULL, turn_id text NOT NULL, kind text NOT NULL, name text NOT NULL,
  port integer, url text, at double precision NOT NULL, ttl double precision NOT NULL,
  PRIMARY KEY (chat, turn_id, kind, name)
);
CREATE INDEX refusals_ttl ON refusals (ttl);
CREATE TABLE turns (
  chat text PRIMARY KEY, holder text NOT NULL, lease_until double precision NOT NULL,
  ttl double precision NOT NULL
);
CREATE INDEX turns_ttl ON turns (ttl);
CREATE TABLE events (key text PRIMARY KEY, ttl double precision NOT NULL);
CREATE INDEX events_ttl ON events (ttl);
CREATE TABLE sessions (
  chat text PRIMARY KEY, key text NOT NULL, seq double precision NOT NULL, ttl double precision NOT NULL
);
CREATE INDEX sessions_ttl ON sessions (ttl);
CREATE TABLE audit (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  chat text NOT NULL, at double precision NOT NULL, kind text NOT NULL, actor text NOT NULL,
  card_id text, detail text NOT NULL, ttl double precision NOT NULL
);
CREATE INDEX audit_chat ON audit (chat, seq);
CREATE INDEX audit_ttl ON audit (ttl);
CREATE INDEX audit_at ON audit (at);
CREATE TABLE outbox (
  sink text NOT NULL, id text NOT NULL, chat text NOT NULL, body text NOT NULL,
  ttl double precision NOT NULL,
  PRIMARY KEY (sink, id)
);
CREATE INDEX outbox_ttl ON outbox (ttl);
CREATE TABLE outbox_leases (
  sink text PRIMARY KEY, holder text NOT NULL, lease_until double precision NOT NULL,
  ttl double precision NOT NULL
);
CREATE INDEX outbox_leases_ttl ON outbox_leases (ttl);
CREATE TABLE objects (
  key text PRIMARY KEY, data bytea NOT NULL, sha256 text NOT NULL, written_at double precision NOT NULL
);
CREATE INDEX objects_written ON objects (written_at);
""",
    ),
    (
        2,
        "slack installations",
        # issue 31: Bolt's installation store (bots/slack_install.py); no ttl, never swept
        """
CREATE TABLE slack_installations (key text PRIMARY KEY, record text NOT NULL);
""",
    ),
    (
        3,
        "durable timers (issue 33)",
        """
CREATE TABLE timers (
  card_id text NOT NULL, name text NOT NULL, chat text NOT NULL,
  due_at double precision NOT NULL, ttl double precision NOT NULL, fired_at double precision,
  PRIMARY KEY (card_id, name)
);
CREATE INDEX timers_due ON timers (due_at) WHERE fired_at IS NULL;
CREATE INDEX timers_ttl ON timers (ttl);
CREATE TABLE timer_leases (
  name text PRIMARY KEY, holder text NOT NULL, lease_until double precision NOT NULL,
  ttl double precision NOT NULL
);
CREATE INDEX timer_leases_ttl ON timer_leases (ttl);
""",
    ),
)

REQUIRED = MIGRATIONS[-1][0]  # the version this code needs


class SchemaTooOld(ValueError):
    """The database's schema is older than this version needs (a configuration mistake: exit 2)."""


def _lock_key(schema: str) -> sql.Composed:
    return sql.SQL("SELECT pg_advisory_xact_lock(hashtextextended({}, 0))").format(
        sql.Literal(f"chat-approvals migrate {schema}")
    )


def current_version(conn: psycopg.Connection[Any], schema: str) -> int:
    """The newest migration recorded in `schema`; 0 when none ran (no table yet)."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL AS present", (f"{schema}.schema_migrations",)).fetchone()
    if not _value(row, "present"):
        return 0
    row = conn.execute(
        sql.SQL("SELECT COALESCE(max(version), 0) AS v FROM {}.schema_migrations").format(sql.Identifier(schema))
    ).fetchone()
    return int(_value(row, "v"))


def _value(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, dict) else row[0]


def migrate(conn: psycopg.Connection[Any], schema: str) -> list[str]:
    """Apply what is missing, in order; returns the names of the migrations applied now."""
    applied: list[str] = []
    with conn.transaction():
        conn.execute(_lock_key(schema))  # held to the end of this transaction
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET LOCAL search_path TO {}").format(sql.Identifier(schema)))
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                 version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        have = current_version(conn, schema)
        for number, name, ddl in MIGRATIONS:
            if number <= have:
                continue
            conn.execute(ddl.encode())  # several statements: sent as one simple query
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (number, name))
            applied.append(f"{number:03d} {name}")
    return applied


def check_schema(conn: psycopg.Connection[Any], schema: str, shown_url: str) -> None:
    """Refuse to run on a schema older than this code needs."""
    have = current_version(conn, schema)
    if have < REQUIRED:
        raise SchemaTooOld(
            f"--store {shown_url}: the database schema is at version {have}, this version needs {REQUIRED}; "
            f'run `chat-approvals store init --store "{shown_url}"` first'
        )
