"""A `postgresql://` store URL: libpq's connection string plus this project's options, and the
connection pool it opens.

    postgresql://USER[:PASSWORD]@HOST[:PORT]/DB?pool_size=10&sslmode=require&statement_timeout=5s
        &pgbouncer=true&schema=approvals&pool_timeout=5

`pool_size` (connections per process, default 10), `pool_timeout` (seconds a call waits for a
connection, default 5), `statement_timeout` (e.g. `5s`, `500ms`; default 10s), `pgbouncer`
(true: no server-side prepared statements, which PgBouncer's transaction pooling breaks),
`schema` (the tables' schema, default `public`) are ours; every other parameter (`sslmode`,
`sslrootcert`, `connect_timeout`, `application_name`, ...) goes to libpq as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from chat_approvals.store.base import StoreError

_OURS = ("pool_size", "pool_timeout", "statement_timeout", "pgbouncer", "schema")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_DURATION = re.compile(r"^(\d+)(ms|s|min)?$")

# The faults that mean "the database cannot be reached or did not answer": a StoreError (the
# front ends' StoreUnavailable). psycopg.OperationalError covers a refused or dropped connection,
# an admin shutdown and a statement timeout (QueryCanceled).
FAULTS: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)


@dataclass(frozen=True)
class PgTarget:
    url: str  # as given (its password is never printed: see `shown`)
    conninfo: str  # libpq's URL: the given one less our options
    pool_size: int = 10
    pool_timeout: float = 5.0
    statement_timeout_ms: int = 10_000
    pgbouncer: bool = False
    schema: str = "public"

    @property
    def shown(self) -> str:
        """The URL without its password, for messages."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))


def _milliseconds(value: str) -> int:
    m = _DURATION.match(value.strip())
    if m is None:
        raise ValueError(f"statement_timeout={value!r}: use e.g. 5s, 500ms or 1min")
    n, unit = int(m.group(1)), m.group(2) or "ms"
    return n * {"ms": 1, "s": 1000, "min": 60_000}[unit]


def parse_target(url: str) -> PgTarget:
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {k: v for k, v in query if k in _OURS}
    rest = [(k, v) for k, v in query if k not in _OURS]
    try:
        size = int(ours.get("pool_size", "10"))
        wait = float(ours.get("pool_timeout", "5"))
    except ValueError:
        raise ValueError(f"bad PostgreSQL URL {url!r}: pool_size is a whole number, pool_timeout seconds") from None
    if not 1 <= size <= 1000 or not 0 < wait <= 600:
        raise ValueError(f"bad PostgreSQL URL {url!r}: pool_size is 1-1000, pool_timeout 0-600 s")
    schema = ours.get("schema", "public")
    if not _SCHEMA_NAME.match(schema):
        raise ValueError(f"bad PostgreSQL URL {url!r}: schema must be a lower-case SQL name")
    bouncer = ours.get("pgbouncer", "false").lower()
    if bouncer not in ("true", "false", "1", "0"):
        raise ValueError(f"bad PostgreSQL URL {url!r}: pgbouncer is true or false")
    return PgTarget(
        url=url,
        conninfo=urlunsplit(parts._replace(scheme="postgresql", query=urlencode(rest))),
        pool_size=size,
        pool_timeout=wait,
        statement_timeout_ms=_milliseconds(ours.get("statement_timeout", "10s")),
        pgbouncer=bouncer in ("true", "1"),
        schema=schema,
    )


def connect_kwargs(t: PgTarget) -> dict[str, Any]:
    """What every connection of the pool is opened with: autocommit (a single statement is its own
    transaction: one round trip), the statement timeout, schema and float output as startup options
    (no extra round trip per connection), and prepared statements only where no PgBouncer sits
    between."""
    return {
        "autocommit": True,
        "row_factory": dict_row,
        # psycopg's default: prepare a statement on its 5th use; None never prepares (PgBouncer)
        "prepare_threshold": None if t.pgbouncer else 5,
        # extra_float_digits=1: every float (a lease, an expiry) comes back exactly as written, whatever
        # the server's own default says
        "options": f"-c statement_timeout={t.statement_timeout_ms} -c search_path={t.schema} -c extra_float_digits=1",
    }


class RecentFirstPool(ConnectionPool[Any]):
    """psycopg_pool's pool, handing out the idle connection returned LAST (it hands out the one
    returned first). Calls that come one after another then go to one server process, whose
    caches and CPU are warm, instead of turning through every idle one; the others stay idle,
    and are the first the pool closes when it shrinks (it closes from the oldest end)."""

    def _get_ready_connection(self, timeout: float | None) -> Any:
        # called with the pool's lock held; the newest idle connection to the front, then the
        # pool's own taking (its bookkeeping, its limits) takes it
        if len(self._pool) > 1:
            self._pool.rotate(1)
        return super()._get_ready_connection(timeout)


def open_pool(t: PgTarget, configure: Callable[[psycopg.Connection[Any]], None] | None = None) -> ConnectionPool[Any]:
    """The process's pool for `t`. Opened without waiting: a database that is down at start-up
    makes calls fail with StoreError (and /readyz say why) until it is up, instead of a crash.
    `configure`: called on each new connection (the benchmark traces the protocol with it)."""
    pool: ConnectionPool[Any] = RecentFirstPool(
        t.conninfo,
        min_size=min(2, t.pool_size),
        max_size=t.pool_size,
        kwargs=connect_kwargs(t),
        timeout=t.pool_timeout,
        reconnect_timeout=3600,  # keep trying while the database is down: it comes back
        name=f"chat-approvals {t.schema}",
        configure=configure,
        open=False,
    )
    pool.open(wait=False)
    return pool


def store_error(e: BaseException, what: str = "postgresql") -> StoreError:
    return StoreError(f"{what}: {type(e).__name__}: {str(e).strip() or 'no detail'}")
