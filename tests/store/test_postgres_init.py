"""PostgreSQL: `store init` (numbered migrations, idempotent, serialised across concurrent inits),
the refusal of an older schema, and the URL's options, on the real test server
(scripts/test.d/30-postgres.sh; skipped with the reason without it)."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator

import psycopg
import pytest

from chat_approvals.bots.cli import main
from chat_approvals.store.base import StoreError
from chat_approvals.store.open import open_objects, open_rows
from chat_approvals.store.postgres_init import init_postgres
from chat_approvals.store.postgres_rows import PostgresRows
from chat_approvals.store.postgres_schema import MIGRATIONS, REQUIRED, SchemaTooOld
from chat_approvals.store.postgres_target import parse_target
from tests.support.store_backends import PG, require_env


@pytest.fixture
def base() -> str:
    return require_env(PG)[PG]


@pytest.fixture
def fresh(base: str) -> Iterator[str]:
    """A URL on a schema nobody initialised; dropped after."""
    schema = "i" + secrets.token_hex(6)
    yield f"{base}?schema={schema}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def _versions(base: str, schema: str) -> list[int]:
    with psycopg.connect(base) as conn:
        rows = conn.execute(f"SELECT version FROM {schema}.schema_migrations ORDER BY version".encode()).fetchall()
    return [r[0] for r in rows]


def test_store_init_migrates_once_and_again_changes_nothing(
    base: str, fresh: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, "store", "init", "--store", fresh)
    assert code == 0, out
    assert f"applied 001 {MIGRATIONS[0][1]}" in out and "objects in the same database" in out
    schema = parse_target(fresh).schema
    assert _versions(base, schema) == [n for n, _, _ in MIGRATIONS]
    code, out = _run(capsys, "store", "init", "--store", fresh)
    assert code == 0 and "up to date" in out, out
    assert _versions(base, schema) == [n for n, _, _ in MIGRATIONS]
    open_rows(fresh).close()  # serve's check passes now


def test_concurrent_inits_apply_each_migration_once(base: str, fresh: str) -> None:
    """Six replicas' start-up jobs at once: the advisory lock serialises them; one applies, the
    others find the work done, and none fails on a table another created."""
    results: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def init() -> None:
        start.wait()
        try:
            results.append(init_postgres(fresh))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=init) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum("applied" in r for r in results) == 1, results
    assert sum("up to date" in r for r in results) == 5, results
    assert _versions(base, parse_target(fresh).schema) == [n for n, _, _ in MIGRATIONS]


def test_serve_refuses_a_schema_older_than_it_needs(base: str, fresh: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SchemaTooOld, match="store init"):
        open_rows(fresh)
    # through the CLI: one line naming the command to run, exit 2, nothing created
    code, out = _run(capsys, "grants", "list", "--user", "me", "--store", fresh)
    assert code == 2
    assert "schema is at version 0" in out and f"needs {REQUIRED}" in out and "chat-approvals store init" in out
    # a schema one migration behind is refused too (what an upgrade without `store init` meets)
    init_postgres(fresh)
    schema = parse_target(fresh).schema
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {schema}.schema_migrations WHERE version = {REQUIRED}".encode())
    with pytest.raises(SchemaTooOld, match=f"at version {REQUIRED - 1}"):
        open_rows(fresh)


def test_an_unreachable_database_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = "postgresql://nobody@127.0.0.1:9/db?connect_timeout=1&pool_timeout=1"  # port 9: discard, closed
    with pytest.raises(ValueError, match="cannot reach PostgreSQL"):
        open_rows(url)
    code, out = _run(capsys, "store", "init", "--store", url)
    assert code == 2 and "cannot reach PostgreSQL" in out, out


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("pool_size=0", "pool_size"),
        ("pool_size=many", "pool_size"),
        ("pool_timeout=-1", "pool_timeout"),
        ("statement_timeout=soon", "statement_timeout"),
        ("pgbouncer=maybe", "pgbouncer"),
        ("schema=Bad-Name", "schema"),
    ],
)
def test_bad_url_options_are_refused(query: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_target(f"postgresql://u@127.0.0.1/db?{query}")


def test_url_options_reach_the_connections(base: str, fresh: str) -> None:
    """statement_timeout applies to every pooled connection; libpq's own options pass through;
    the password never appears in what is shown."""
    init_postgres(fresh)
    t = parse_target(f"{fresh}&statement_timeout=300ms&pool_size=3&application_name=approvals-test")
    assert (t.pool_size, t.statement_timeout_ms) == (3, 300)
    assert "application_name=approvals-test" in t.conninfo and "pool_size" not in t.conninfo
    rows = PostgresRows(t)
    try:
        assert rows._exec("SHOW statement_timeout").rows[0]["statement_timeout"] == "300ms"
        assert rows._exec("SELECT current_setting('application_name') AS a").rows[0]["a"] == "approvals-test"
        with pytest.raises(StoreError, match="QueryCanceled"):  # a statement past it: a store fault
            rows._exec("SELECT pg_sleep(2)")
        rows.ping()  # and the pool goes on
    finally:
        rows.close()
    assert parse_target("postgresql://u:s3cret@h/db").shown == "postgresql://u:***@h/db"
    # sslmode reaches libpq: the test server has no TLS, so requiring it is refused, saying why
    with pytest.raises(ValueError, match=r"(?i)ssl"):
        PostgresRows(f"{fresh}&sslmode=require&pool_timeout=2")


def _prepared(rows: PostgresRows) -> int:
    with rows.connection() as conn:
        for _ in range(8):
            conn.execute(b"SELECT chat FROM pointers WHERE chat = %s", ("x",))
        row = conn.execute(b"SELECT count(*) AS n FROM pg_prepared_statements").fetchone()
    assert row is not None
    return int(row["n"])


def test_pgbouncer_mode_prepares_no_statement_on_the_server(fresh: str) -> None:
    init_postgres(fresh)
    plain, bouncer = PostgresRows(fresh), PostgresRows(f"{fresh}&pgbouncer=true")
    try:
        assert _prepared(plain) >= 1  # psycopg prepares a statement used five times...
        assert _prepared(bouncer) == 0  # ...which transaction pooling would break
    finally:
        plain.close()
        bouncer.close()


def test_objects_default_to_a_table_beside_the_rows(fresh: str) -> None:
    from chat_approvals.bots.config import ServerConfig
    from chat_approvals.core.models import SystemClock

    init_postgres(fresh)
    cfg = ServerConfig(store=fresh)
    assert cfg.objects_url() == fresh
    rows = open_rows(fresh)
    objects = open_objects(fresh, SystemClock())
    try:
        with rows.atomic():  # the objects ride in the rows' transaction...
            ref = objects.put("k/1", b"snapshot")
            with pytest.raises(RuntimeError), rows.atomic():
                objects.put("k/2", b"undone")
                raise RuntimeError("a failed inner step")
        assert objects.get(ref) == b"snapshot" and objects.get_key("k/2") is None  # ...and roll back with it
    finally:
        rows.close()


def test_a_store_urls_password_is_never_shown() -> None:
    """/healthz and serve's start-up line show the store URL through shown_url."""
    from chat_approvals.store.open import shown_url

    assert (
        shown_url("postgresql://app:s3cret@db:5432/approvals?sslmode=require")
        == "postgresql://app:***@db:5432/approvals"
    )
    assert shown_url("sqlite:///var/approvals.db") == "sqlite:///var/approvals.db"
    assert shown_url("dynamodb://t?region=eu-west-1") == "dynamodb://t"


def test_floats_come_back_exactly_whatever_the_servers_default(fresh: str) -> None:
    """A server configured with extra_float_digits=0 would round a lease to 15 digits; the store's
    connections ask for exact output, in plain reads and in the compound steps' JSON alike."""
    from chat_approvals.core.models import ClaimRead, ClaimWrite
    from tests.support.store_conformance import make_pointer

    init_postgres(fresh)
    base = fresh.split("?")[0]
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(b"ALTER DATABASE postgres SET extra_float_digits = 0")
    try:
        rows = PostgresRows(fresh)
        try:
            now = 1_800_000_000.123456789
            p = make_pointer("http:f").model_copy(update={"expires_at": now + 1800.000001234567})
            assert rows.put_pointer(p, now)
            assert rows.get_pointer("http:f") == p
            read = ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count)
            won = rows.claim_grants(ClaimWrite(read, "w", now, now + 30.000000123, now + 600.000000456))
            assert won is not None and won.pointer.lease_until == now + 30.000000123
            assert won.pointer.expires_at == p.expires_at
        finally:
            rows.close()
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(b"ALTER DATABASE postgres RESET extra_float_digits")


def test_an_older_database_is_migrated_in_place_by_store_init(
    base: str, fresh: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database made by the first release (migration 1 only) holding an open card: serve refuses
    it, `store init` applies what is missing (and only that), and the card is still there."""
    from tests.support.store_conformance import make_pointer

    init_postgres(fresh)
    schema = parse_target(fresh).schema
    rows = PostgresRows(fresh)
    p = make_pointer("http:old")
    assert rows.put_pointer(p, 1_800_000_000.0)
    rows.close()
    with psycopg.connect(base, autocommit=True) as conn:  # back to what release 1 made
        for later in ("slack_installations", "timers", "timer_leases"):  # what migrations 2 and 3 made
            conn.execute(f"DROP TABLE {schema}.{later}".encode())
        conn.execute(f"DELETE FROM {schema}.schema_migrations WHERE version > 1".encode())
    with pytest.raises(SchemaTooOld, match="at version 1"):
        open_rows(fresh)
    code, out = _run(capsys, "store", "init", "--store", fresh)
    assert code == 0 and f"applied 002 {MIGRATIONS[1][1]}" in out and "001" not in out, out
    assert _versions(base, schema) == [n for n, _, _ in MIGRATIONS]
    rows = PostgresRows(fresh)
    try:
        assert rows.get_pointer("http:old") == p
        rows.put_installation("slack:-:T1", "{}")
        assert rows.get_installation("slack:-:T1") == "{}"
    finally:
        rows.close()
