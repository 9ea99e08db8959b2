"""Store round trips and latency of one approval cycle (card -> click -> done), per backend.

    .venv/bin/python bench/bench_store.py [--cycles 100]

Runs the real facade (scripted model, system clock) against the embedded store (SQLite +
files) and, when the emulator URLs are set (scripts/test.d/20-emulators.sh start, then
`set -a; . var/test-env; set +a`), against DynamoDB (dynalite, and moto) + S3 (moto), each
also with `&table=` on the objects URL (small objects as table items, store/table_objects.py).
With CHAT_APPROVALS_TEST_PG set (scripts/test.d/30-postgres.sh start) it runs on PostgreSQL too
(rows and objects in one database), counting database round trips from libpq's protocol trace
(bench/pg_round_trips.py) in the "requests" column. It counts store method calls and, for the
AWS backends, HTTP requests on the wire, and compares them with the protocol minimum:

  card:  snapshot PUT, conditional pointer write                                  = 2
  click: read pointer by card, conditional claim, snapshot GET, answer PUT,
         grant upsert (one host), conditional finish                              = 6
                                                                          minimum = 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.pg_round_trips import RoundTrips
from chat_approvals.core.agent import default_factory
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.core.models import Answer
from chat_approvals.store.aio import StoreIO

PROTOCOL_MINIMUM = 8
TEXT = "fetch https://data.example/x.csv"


class Counted:
    """Forwards every call to the backend and counts it by method name."""

    def __init__(self, inner: Any, tally: Counter[str], prefix: str) -> None:
        self._inner, self._tally, self._prefix = inner, tally, prefix

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name.startswith("_") or name in ("close", "atomic"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self._tally[f"{self._prefix}.{name}"] += 1
            return attr(*args, **kwargs)

        return call


def _wire_counter(client: Any, tally: Counter[str]) -> None:
    def count(request: Any, event_name: str, **_: Any) -> None:
        tally[event_name.split(".", 2)[2]] += 1  # before-send.dynamodb.GetItem -> GetItem

    client.meta.events.register("before-send.*.*", count)


def _backends() -> list[tuple[str, Callable[[], tuple[Any, Any, list[Any], Callable[[], None]]]]]:
    out = []

    def embedded() -> tuple[Any, Any, list[Any], Callable[[], None]]:
        from chat_approvals.store.file_objects import FileObjects
        from chat_approvals.store.sqlite_rows import SqliteRows

        tmp = tempfile.TemporaryDirectory()
        rows = SqliteRows(Path(tmp.name) / "a.db")
        return rows, FileObjects(Path(tmp.name) / "objects"), [], tmp.cleanup

    def embedded_one_file() -> tuple[Any, Any, list[Any], Callable[[], None]]:
        from chat_approvals.store.sqlite_objects import SqliteObjects
        from chat_approvals.store.sqlite_rows import SqliteRows

        tmp = tempfile.TemporaryDirectory()
        rows = SqliteRows(Path(tmp.name) / "a.db")
        return rows, SqliteObjects(Path(tmp.name) / "a.db", rows=rows), [], tmp.cleanup

    out.append(("sqlite (objects in the file)", embedded_one_file))
    out.append(("sqlite + files", embedded))
    dyn, moto = os.environ.get("CHAT_APPROVALS_TEST_DYNALITE"), os.environ.get("CHAT_APPROVALS_TEST_MOTO")
    if moto:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        for label, endpoint in (("dynalite + moto S3", dyn), ("moto DynamoDB + S3", moto)):
            if endpoint:
                out.append((label, _aws(endpoint, moto, table=False)))
                out.append((label.replace("S3", "S3, small objects in the table"), _aws(endpoint, moto, table=True)))
    pg = os.environ.get("CHAT_APPROVALS_TEST_PG")
    if pg:
        out.append(("postgresql (objects in the database)", _postgres(pg)))
    return out


def _postgres(base: str) -> Callable[[], tuple[Any, Any, list[Any], Callable[[], None]]]:
    """Rows and objects in a fresh schema (migrated as `store init` does), opened as the server
    opens them (store/open.py: the objects share the row store's pool), every connection traced."""

    def make() -> tuple[Any, Any, list[Any], Callable[[], None]]:
        import psycopg

        from bench.pg_round_trips import RoundTrips
        from chat_approvals.store.postgres_init import init_postgres
        from chat_approvals.store.postgres_objects import PostgresObjects
        from chat_approvals.store.postgres_rows import PostgresRows

        schema = f"bench{secrets.token_hex(4)}"
        url = f"{base}{'&' if '?' in base else '?'}schema={schema}"
        init_postgres(url)
        trips = RoundTrips()
        rows = PostgresRows(url, configure=trips.configure)

        def drop() -> None:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE".encode())

        return rows, PostgresObjects(rows, SystemClock()), [trips], drop

    return make


def _aws(ddb: str, s3: str, *, table: bool) -> Callable[[], tuple[Any, Any, list[Any], Callable[[], None]]]:
    """`table`: `--objects s3://...&table=TABLE` (store/table_objects.py), opened as the server
    opens it (store/open.py: the objects share the row store's instance)."""

    def make() -> tuple[Any, Any, list[Any], Callable[[], None]]:
        from chat_approvals.store.dynamodb_rows import create_table, delete_table
        from chat_approvals.store.open import open_objects, open_rows
        from chat_approvals.store.s3_objects import create_bucket

        name = f"bench{secrets.token_hex(4)}"
        rows_url = f"dynamodb://{name}?region=us-east-1&endpoint_url={ddb}"
        objects_url = f"s3://bench-store/b{secrets.token_hex(4)}?region=us-east-1&endpoint_url={s3}"
        create_table(rows_url)
        create_bucket(objects_url, 9)
        rows = open_rows(rows_url)
        objects = open_objects(objects_url + (f"&table={name}" if table else ""), SystemClock())
        s3_client = objects.large.client if table else objects.client  # type: ignore[attr-defined]
        return rows, objects, [rows.client, s3_client], lambda: delete_table(rows_url)  # type: ignore[attr-defined]

    return make


DB_ROUND_TRIPS = "database round trips"


async def _cycle(a: Approvals, chat: str) -> None:
    turn = await a.run_turn(chat=chat, user="alice", text=TEXT, platform="http")
    assert turn.offer is not None, turn
    res = await a.resume(
        card_id=turn.offer.card.card_id,
        user="alice",
        secret=turn.offer.secret,
        answer=Answer(approved=True),
    )
    assert res.outcome == "resumed", res


def run(cycles: int, from_store: bool = False) -> list[dict[str, Any]]:
    rows_out = []
    for label, make in _backends():
        rows, objects, clients, cleanup = make()
        calls: Counter[str] = Counter()
        wire: Counter[str] = Counter()
        io = StoreIO(Counted(rows, calls, "rows"), Counted(objects, calls, "objects"))  # type: ignore[arg-type]
        # from_store: no Agent held, every click reads the snapshot, as in another process
        a = bootstrap(io, agent_factory=default_factory("scripted"), held_agents=0 if from_store else 128).approvals
        asyncio.run(_cycle(a, "warm-up"))  # imports, connections, first table touch
        calls.clear()
        for c in clients:
            if isinstance(c, RoundTrips):
                c.reset()
            else:
                _wire_counter(c, wire)
        times = []
        for i in range(cycles):
            t0 = time.perf_counter()
            asyncio.run(_cycle(a, f"bench:{i}"))
            times.append((time.perf_counter() - t0) * 1000)
        for c in clients:
            if isinstance(c, RoundTrips):
                wire[DB_ROUND_TRIPS] += c.count()
        io.close()
        cleanup()
        times.sort()
        rows_out.append(
            {
                "backend": label,
                "calls": {k: v / cycles for k, v in sorted(calls.items())},
                "store_calls": sum(calls.values()) / cycles,
                "wire": sum(wire.values()) / cycles if clients else None,
                "wire_ops": {k: v / cycles for k, v in sorted(wire.items())},
                "p50": statistics.median(times),
                "p99": times[min(len(times) - 1, int(len(times) * 0.99))],
            }
        )
    return rows_out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument(
        "--from-store", action="store_true", help="resume every click from the stored snapshot (no Agent held)"
    )
    args = ap.parse_args()
    results = run(args.cycles, args.from_store)
    print(f"\nOne approval cycle (card -> click -> done), protocol minimum {PROTOCOL_MINIMUM} store round trips\n")
    print("| backend | store calls / cycle | requests / cycle (HTTP; PostgreSQL: round trips) | p50 ms | p99 ms |")
    print("|---|---|---|---|---|")
    for r in results:
        wire = "-" if r["wire"] is None else f"{r['wire']:.1f}"
        print(f"| {r['backend']} | {r['store_calls']:.1f} | {wire} | {r['p50']:.1f} | {r['p99']:.1f} |")
    names = sorted({k for r in results for k in r["calls"]})
    print("\n| store call / cycle | " + " | ".join(r["backend"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for n in names:
        print(f"| {n} | " + " | ".join(f"{r['calls'].get(n, 0):.1f}" for r in results) + " |")
    ops = sorted({k for r in results for k in r["wire_ops"]})
    aws = [r for r in results if r["wire"] is not None]
    if aws:
        print("\n| request / cycle | " + " | ".join(r["backend"] for r in aws) + " |")
        print("|---|" + "---|" * len(aws))
        for o in ops:
            # "-": a PostgreSQL round trip does not exist on an HTTP backend (it is not a zero count)
            cells = (
                "-" if o == DB_ROUND_TRIPS and o not in r["wire_ops"] else f"{r['wire_ops'].get(o, 0):.1f}" for r in aws
            )
            print(f"| {o} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
