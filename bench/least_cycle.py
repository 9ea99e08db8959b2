"""The least durable approval cycle on Strands' snapshot API, run for real (issue 34, target 1).

`bench.bench_peers` runs it as (h) and (h') in the same blocks as (a) and (d), and prints its
rate against the durable floor: what any code built on Strands' public snapshot API and this
protocol's commits reaches on this machine before it does anything else. Per cycle:

  (h)  the turn lease's commit (a new turn's lease is durable before its agent runs); the Agent of
       (a) pauses; its session snapshot encoded by `core.agent.snapshots.agent_bytes` (this
       project's cheapest encoding of it) and committed with the pointer in one transaction that
       also releases the lease (R7); the claim's commit, reading the snapshot back (R10); the held
       Agent resumed; the finish's commit (R12).
  (h') the same without the lease's own commit: what folding the lease into the pause's commit
       would allow.

Every commit is one fsync'd SQLite transaction (WAL, synchronous=FULL: `store.sqlite_writes
.connect`, as the embedded store opens its file) made in one store thread and awaited from the
loop (R21). Nothing else: no card, policy, audit, history, timers, spans or identifiers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from strands import Agent

from bench.facade import CycleFailed
from chat_approvals.core.agent.snapshots import agent_bytes
from chat_approvals.store.sqlite_writes import connect

Cycle = Callable[[int], Awaitable[None]]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS leases (chat TEXT PRIMARY KEY, holder TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS cards (card TEXT PRIMARY KEY, chat TEXT NOT NULL, state TEXT NOT NULL, "
    "snapshot BLOB NOT NULL) WITHOUT ROWID",
)


class LeastCycle:
    """(h) with `lease`, (h') without. `pause` and `resume` run the Agent of (a) (bench_peers)."""

    def __init__(
        self,
        path: Path,
        new_agent: Callable[[], Agent],
        pause: Callable[[Agent], Awaitable[str]],
        resume: Callable[[Agent, str], Awaitable[None]],
        lease: bool,
    ) -> None:
        self._path, self._lease = str(path), lease
        self._new_agent, self._pause, self._resume = new_agent, pause, resume
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="least-store")
        self._conn: Any = None
        self.snapshot_bytes = 0  # the last snapshot's size: shown so a reader can compare with (d)'s

    def _commit(self, statements: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """One fsync'd transaction of `statements` in the store thread; the last one's rows."""
        if self._conn is None:  # opened in this thread, as the store opens its connections
            self._conn = connect(self._path)
            for sql in SCHEMA:
                self._conn.execute(sql)
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows: list[Any] = []
            for sql, args in statements:
                rows = conn.execute(sql, args).fetchall()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return rows

    async def _step(self, *statements: tuple[str, tuple[Any, ...]]) -> list[Any]:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._commit, list(statements))

    async def cycle(self, i: int) -> None:
        chat, card = f"chat-{i}", f"card-{i}"
        if self._lease:
            taken = await self._step(
                ("INSERT INTO leases VALUES (?, 'me') ON CONFLICT (chat) DO NOTHING RETURNING holder", (chat,))
            )
            if not taken:
                raise CycleFailed(f"{chat}: lease not taken")
        agent = self._new_agent()
        interrupt_id = await self._pause(agent)
        snapshot = agent_bytes(agent, preset="session")
        self.snapshot_bytes = len(snapshot)
        await self._step(
            ("INSERT OR REPLACE INTO cards VALUES (?, ?, 'open', ?)", (card, chat, snapshot)),
            ("DELETE FROM leases WHERE chat = ?", (chat,)),
        )
        claimed = await self._step(
            ("UPDATE cards SET state = 'claimed' WHERE card = ? AND state = 'open' RETURNING snapshot", (card,))
        )
        if not claimed or claimed[0][0] != snapshot:
            raise CycleFailed(f"{card}: claim lost")
        await self._resume(agent, interrupt_id)
        finish = "UPDATE cards SET state = 'done' WHERE card = ? AND state = 'claimed' RETURNING 1"
        if not await self._step((finish, (card,))):
            raise CycleFailed(f"{card}: finish lost")

    def close(self) -> None:
        def shut() -> None:
            if self._conn is not None:
                self._conn.close()

        self._pool.submit(shut).result()
        self._pool.shutdown()
