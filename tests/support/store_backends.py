"""Backends for the store tests: the embedded default always, the AWS ones on the emulators,
PostgreSQL on the throwaway cluster of scripts/test.d/30-postgres.sh (CHAT_APPROVALS_TEST_PG).

`CHAT_APPROVALS_TEST_DYNALITE` / `CHAT_APPROVALS_TEST_MOTO` are written to var/test-env by
scripts/test.d/20-emulators.sh. Without them an emulator backend is skipped with the reason,
except under CI=true, where a missing emulator is a failure (CI must not pass by skipping).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.clock import ManualClock
from tests.support.store_conformance import T0, StoreBackend

DYNALITE = "CHAT_APPROVALS_TEST_DYNALITE"
MOTO = "CHAT_APPROVALS_TEST_MOTO"
REGION = "us-east-1"
BUCKET = "chat-approvals-test"

BACKENDS = [
    "sqlite+files",
    "sqlite+sqlite-objects",
    "dynalite+moto-s3",
    "moto-dynamodb+moto-s3",
    # small objects as items in the row table, S3 above the limit (store/table_objects.py)
    "dynalite+table-objects",
    "moto-dynamodb+table-objects",
    # rows and objects in one PostgreSQL database (scripts/test.d/30-postgres.sh starts one)
    "postgresql",
    # PostgreSQL rows, the objects in S3 beside them (`--objects s3://...` for large snapshots)
    "postgresql+moto-s3",
]
PG = "CHAT_APPROVALS_TEST_PG"
PG_SKIP = "CHAT_APPROVALS_TEST_PG_SKIP"  # scripts/test.d/30-postgres.sh: why there is no server (even under CI)


def require_env(*names: str) -> dict[str, str]:
    """The emulator endpoints, or skip (fail under CI=true) naming what is missing."""
    missing = [n for n in names if not os.environ.get(n)]
    if missing:
        postgres = all(n.startswith(PG) for n in missing)
        hook = "30-postgres.sh" if postgres else "20-emulators.sh"
        why = f"{', '.join(missing)} not set: start them with scripts/test.d/{hook} start"
        if postgres and os.environ.get(PG_SKIP):  # the hook could not have a server here (no binaries, no root)
            pytest.skip(f"PostgreSQL tests skipped: {os.environ[PG_SKIP]}")
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (required under CI=true)")
        pytest.skip(why)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    return {n: os.environ[n] for n in names}


_S3_CLIENTS: dict[str, Any] = {}
_BUCKETS: set[tuple[str, str]] = set()


def _s3(endpoint: str) -> Any:
    """One plain S3 client per endpoint for the tests' own set-up and tampering."""
    if endpoint not in _S3_CLIENTS:
        import boto3
        from botocore.config import Config

        _S3_CLIENTS[endpoint] = boto3.client(
            "s3", region_name=REGION, endpoint_url=endpoint, config=Config(s3={"addressing_style": "path"})
        )
    return _S3_CLIENTS[endpoint]


def ensure_bucket(endpoint: str, bucket: str = BUCKET) -> None:
    from botocore.exceptions import ClientError

    if (endpoint, bucket) in _BUCKETS:
        return
    try:
        _s3(endpoint).create_bucket(Bucket=bucket)
    except ClientError as e:
        if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    _BUCKETS.add((endpoint, bucket))


def s3_corrupter(endpoint: str, bucket: str, prefix: str) -> Callable[[str], None]:
    """Overwrites an object's bytes keeping its metadata, as bit rot or a stray writer would."""

    def corrupt(key: str) -> None:
        s3, full = _s3(endpoint), f"{prefix}{key}"
        head = s3.head_object(Bucket=bucket, Key=full)
        s3.put_object(Bucket=bucket, Key=full, Body=b"tampered bytes", Metadata=head["Metadata"])

    return corrupt


def _table_corrupter(rows: Any, in_s3: Callable[[str], None]) -> Callable[[str], None]:
    """Overwrites an object item's bytes keeping its checksum; objects not in the table are in S3."""

    def corrupt(key: str) -> None:
        item_key = {"pk": {"S": f'["object",{json.dumps(key)}]'}, "sk": {"S": "object"}}
        if "Item" not in rows.client.get_item(TableName=rows.table, Key=item_key):
            in_s3(key)
            return
        rows.client.update_item(
            TableName=rows.table,
            Key=item_key,
            UpdateExpression="SET #d = :d",
            ExpressionAttributeNames={"#d": "data"},
            ExpressionAttributeValues={":d": {"B": b"tampered bytes"}},
        )

    return corrupt


@contextmanager
def open_backend(name: str, tmp_path: Path) -> Iterator[StoreBackend]:
    clock = ManualClock(T0)
    if name == "sqlite+files":
        from chat_approvals.store.file_objects import FileObjects
        from chat_approvals.store.sqlite_rows import SqliteRows

        rows = SqliteRows(tmp_path / "rows.db")
        objects = FileObjects(tmp_path / "objects", clock=clock)

        def corrupt(key: str) -> None:
            (objects.root / key).write_bytes(b"tampered bytes")

        try:
            yield StoreBackend(name, rows, objects, clock, corrupt)
        finally:
            rows.close()
        return
    if name == "sqlite+sqlite-objects":  # the objects in the row store's own file
        from chat_approvals.store.sqlite_objects import SqliteObjects
        from chat_approvals.store.sqlite_rows import SqliteRows

        rows = SqliteRows(tmp_path / "rows.db")
        in_db = SqliteObjects(tmp_path / "rows.db", clock=clock, rows=rows)  # sharing its connections

        def corrupt_row(key: str) -> None:
            in_db._conn().execute("UPDATE objects SET data = ? WHERE key = ?", (b"tampered bytes", key))

        try:
            yield StoreBackend(name, rows, in_db, clock, corrupt_row)
        finally:
            rows.close()
            in_db.close()
        return

    if name == "postgresql":
        with pg_backend(tmp_path, clock) as backend:
            yield backend
        return
    if name == "postgresql+moto-s3":
        from chat_approvals.store.s3_objects import open_s3_objects

        moto = require_env(PG, MOTO)[MOTO]
        ensure_bucket(moto)
        s3 = open_s3_objects(f"s3://{BUCKET}/p{secrets.token_hex(6)}?region={REGION}&endpoint_url={moto}", clock)
        with pg_backend(tmp_path, clock) as pg:
            yield StoreBackend(name, pg.rows, s3, clock, s3_corrupter(moto, BUCKET, s3.prefix))
        return

    env = require_env(DYNALITE, MOTO) if name.startswith("dynalite") else require_env(MOTO)
    from chat_approvals.store.dynamodb_rows import create_table, delete_table, open_dynamodb_rows
    from chat_approvals.store.s3_objects import open_s3_objects

    ddb_endpoint = env[DYNALITE] if name.startswith("dynalite") else env[MOTO]
    s3_endpoint = env[MOTO]
    table = "t" + secrets.token_hex(6)  # one fresh table per test: sweep and scans see only this test
    rows_url = f"dynamodb://{table}?region={REGION}&endpoint_url={ddb_endpoint}"
    create_table(rows_url)
    ensure_bucket(s3_endpoint)
    prefix = f"p{secrets.token_hex(6)}"
    ddb_rows = open_dynamodb_rows(rows_url)
    s3_objects = open_s3_objects(f"s3://{BUCKET}/{prefix}?region={REGION}&endpoint_url={s3_endpoint}", clock)
    objects: Any = s3_objects
    corrupt = s3_corrupter(s3_endpoint, BUCKET, s3_objects.prefix)
    if name.endswith("+table-objects"):
        from chat_approvals.store.table_objects import TableObjects

        objects = TableObjects(ddb_rows, s3_objects, clock)
        corrupt = _table_corrupter(ddb_rows, corrupt)
    try:
        yield StoreBackend(name, ddb_rows, objects, clock, corrupt)
    finally:
        ddb_rows.close()
        delete_table(rows_url)


@contextmanager
def pg_schema() -> Iterator[str]:
    """A fresh schema (migrated by `store init`'s code) on the test server: its URL; dropped after.
    Each test sees only its own tables, so sweeps and exports see only this test's rows."""
    base = require_env(PG)[PG]
    schema = "t" + secrets.token_hex(6)
    url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
    from chat_approvals.store.postgres_init import init_postgres

    init_postgres(url)
    try:
        yield url
    finally:
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE".encode())


@contextmanager
def pg_backend(tmp_path: Path, clock: ManualClock) -> Iterator[StoreBackend]:
    from chat_approvals.store.postgres_objects import PostgresObjects
    from chat_approvals.store.postgres_rows import PostgresRows

    with pg_schema() as url:
        rows = PostgresRows(url)
        objects = PostgresObjects(rows, clock)

        def corrupt(key: str) -> None:
            rows._exec("UPDATE objects SET data = %s WHERE key = %s", (b"tampered bytes", key))

        try:
            yield StoreBackend("postgresql", rows, objects, clock, corrupt)
        finally:
            rows.close()
