"""How long the embedded store's writes wait for SQLite's write lock when the store's threads
write at once while the event loop thread is busy (issue 12). By hand:

    .venv/bin/python -m bench.bench_sqlite_writers [--threads 4] [--writes 200] [--rounds 3]

Each round opens a fresh SQLite store (WAL, synchronous=FULL) and runs `--threads` threads, each
making `--writes` writes, alternating a single-statement write (`append_audit`) and a compound
step (`atomic()` around `put_pointer` and `append_audit`), while the main thread spins in Python
as a busy event loop does (so every statement's GIL hand-off costs what it costs in the server).
Two ways of waiting, interleaved round by round:
  gate         the store's: no busy timeout; a statement that finds the lock taken waits on the
               file's WriteGate, woken when another write of this process ends
               (store/sqlite_writes.py)
  busy handler the store before: SQLite's busy handler (busy_timeout 10 s), which sleeps in steps
               (1, 2, 5 ... 100 ms) until the lock comes free
Prints p50 / p99 / max of a write's wall time, per kind and way. Not a test: compare within one run.
Since the store's writes take turns on one writer connection (store/sqlite_rows.py), one store's
threads no longer race for SQLite's lock: both ways now mostly measure that turn-taking, and the
WriteGate's wait matters for several stores or processes on one file.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import chat_approvals.store.sqlite_rows as sqlite_rows
from chat_approvals.core.models import AuditEvent
from chat_approvals.store.sqlite_rows import SqliteRows
from chat_approvals.store.sqlite_writes import WriteGate, connect
from tests.support.store_conformance import T0, make_pointer

KINDS = ("single statement", "compound step")
WAYS = ("gate", "busy handler")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def busy_handler_connect(path: str) -> sqlite3.Connection:
    """A connection as the store made them before the gate: SQLite's busy handler does the waiting."""
    conn = connect(path)
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


@contextlib.contextmanager
def busy_handler() -> Iterator[None]:
    with (
        mock.patch.object(sqlite_rows, "connect", busy_handler_connect),
        mock.patch.object(WriteGate, "attempt", lambda self, statement: statement()),
    ):
        yield


def one_round(folder: Path, way: str, threads: int, writes: int) -> dict[str, list[float]]:
    with busy_handler() if way == "busy handler" else contextlib.nullcontext():
        rows = SqliteRows(folder / f"{way.replace(' ', '-')}-{time.monotonic_ns()}.db")
    times: dict[str, list[float]] = {k: [] for k in KINDS}

    def writer(n: int) -> None:
        for i in range(writes):
            event = AuditEvent(chat=f"c{n}", at=T0, kind="answered", actor="u", card_id=f"k{n}-{i}", detail={})
            t = time.perf_counter()
            if i % 2 == 0:
                rows.append_audit(event, T0 + 3600)
                times["single statement"].append(time.perf_counter() - t)
            else:
                with rows.atomic():
                    rows.put_pointer(make_pointer(f"c{n}-{i}"), T0)
                    rows.append_audit(event, T0 + 3600)
                times["compound step"].append(time.perf_counter() - t)

    with busy_handler() if way == "busy handler" else contextlib.nullcontext():
        pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
        for t in pool:
            t.start()
        spin = 0
        while any(t.is_alive() for t in pool):  # the busy event loop: pure Python, holding the GIL
            for _ in range(20_000):
                spin += 1
        for t in pool:
            t.join()
    rows.close()
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=4, help="writing threads (the store's executor has 4)")
    p.add_argument("--writes", type=int, default=200, help="writes per thread per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each way, interleaved")
    args = p.parse_args()
    if args.threads < 1 or args.writes < 2 or args.rounds < 1:
        p.error("--threads and --rounds at least 1, --writes at least 2")
    got: dict[tuple[str, str], list[float]] = {(w, k): [] for w in WAYS for k in KINDS}
    with tempfile.TemporaryDirectory(prefix="bench-writers-") as d:
        for r in range(args.rounds):
            for way in WAYS if r % 2 == 0 else tuple(reversed(WAYS)):
                for kind, values in one_round(Path(d), way, args.threads, args.writes).items():
                    got[(way, kind)] += values
    print(f"\n{args.threads} threads x {args.writes} writes, {args.rounds} rounds per way, the main thread busy\n")
    print("| way | write | writes | p50 ms | p99 ms | max ms |")
    print("|---|---|---:|---:|---:|---:|")
    for (way, kind), values in got.items():
        cells = [pct(values, 0.5), pct(values, 0.99), max(values)]
        print(f"| {way} | {kind} | {len(values)} | " + " | ".join(f"{v * 1000:.2f}" for v in cells) + " |")


if __name__ == "__main__":
    main()
