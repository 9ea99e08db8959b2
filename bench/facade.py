"""This project's approval cycle through its public facade, for the benchmarks.

One cycle: `Approvals.run_turn` (the turn pauses on a card) -> `Approvals.resume` with the card's
secret -> the resumed turn answers. The store is the embedded one (SQLite, the objects in the
same file or in a folder), wrapped so a bench can count what reaches it: every method call on
the rows and on the objects is one round trip to the backend, and every `StoreIO.run` is one
hop to the store's executor.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, cast

from chat_approvals.core.agent import default_factory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.core.models import Answer, CardOffer
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.base import ObjectStore, RowStore
from chat_approvals.store.open import open_objects, open_rows

P = ParamSpec("P")
T = TypeVar("T")

TEXT = "please fetch https://data.example.org/table.csv"
USER = "bench-user"


OBJECTS = {"sqlite": "SQLite (objects in the same file)", "files": "SQLite + files"}


class CycleFailed(RuntimeError):
    """A cycle did not end the way the protocol says: the numbers would mean nothing."""


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


class CountingIO(StoreIO):
    """The store's IO object with its rows and objects counted, and its executor hops too."""

    def __init__(self, rows: Any, objects: Any, tally: Counter[str]) -> None:
        super().__init__(
            cast(RowStore, Counted(rows, tally, "rows")), cast(ObjectStore, Counted(objects, tally, "objects"))
        )
        self.tally = tally

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        self.tally["executor hops"] += 1
        return await super().run(fn, *args, **kwargs)


class FacadeCycle:
    """An `Approvals` on a fresh embedded store under `root`, the offline scripted model, and
    the system clock: what `chat-approvals serve` runs in-process, minus the HTTP front end.
    `objects`: "sqlite" keeps the objects in the rows' SQLite file, "files" in a folder.
    `held_agents` False: no paused Agent is kept (core/agent/paused_agents.py), so each click resumes
    from the stored snapshot, as a click that reaches another process does."""

    def __init__(
        self,
        root: Path,
        objects: str = "sqlite",
        held_agents: bool = True,
        store_url: str | None = None,
        urls: tuple[str, str] | None = None,
    ) -> None:
        """`store_url`: another store for rows and objects both (e.g. postgresql://...), instead.
        `urls`: (store URL, objects URL) opened instead of either, as `chat-approvals serve --store
        ... --objects ...` opens them (any backend)."""
        self.root = root
        self.tally: Counter[str] = Counter()
        clock = SystemClock()
        # opened from URLs as `chat-approvals serve --store ... --objects ...` opens them
        db = store_url or f"sqlite:///{(root / 'approvals.db').resolve()}"
        if objects not in OBJECTS:
            raise ValueError(f"objects: one of {sorted(OBJECTS)}")
        folder = str((root / "objects").resolve())
        rows_url, objects_url = urls or (db, db if objects == "sqlite" or store_url else folder)
        rows = open_rows(rows_url)
        store = open_objects(objects_url, clock)
        self.io = CountingIO(rows, store, self.tally)
        # held_agents False: every click resumes from the stored snapshot, as in another process
        self.approvals = bootstrap(
            self.io, clock=clock, agent_factory=default_factory("scripted"), held_agents=128 if held_agents else 0
        ).approvals

    async def cycle(self, chat: str, user: str = USER, text: str = TEXT) -> None:
        await self.click(await self.pause(chat, user, text), user)

    async def pause(self, chat: str, user: str = USER, text: str = TEXT) -> CardOffer:
        """The turn, paused on a card (its pointer durable, R7): the card's offer."""
        turn = await self.approvals.run_turn(chat=chat, user=user, text=text, platform="http")
        if turn.offer is None:
            raise CycleFailed(f"no card offered: {turn}")
        return turn.offer

    async def click(self, offer: CardOffer, user: str = USER) -> None:
        """The card's owner approves: the claim, the resumed run, the stored answer (R10, R12)."""
        res = await self.approvals.resume(
            card_id=offer.card.card_id, user=user, secret=offer.secret, answer=Answer(approved=True)
        )
        if res.outcome != "resumed" or res.result is None or res.result.status != "answered":
            raise CycleFailed(f"resume did not answer: {res}")

    def round_trips(self) -> dict[str, int]:
        """Counts so far, by method (`rows.X`, `objects.X`, `executor hops`)."""
        return dict(self.tally)

    async def sqlite_durability(self) -> str:
        """The store's SQLite journal mode and synchronous level, read on one of its own
        connections (synchronous is per connection). Informational; "unknown" if the store
        no longer exposes a connection."""
        rows = self.io.rows._inner  # type: ignore[attr-defined]
        conn_of = getattr(rows, "_conn", None)
        if conn_of is None:
            return "unknown"

        def read() -> str:
            return sqlite_durability(conn_of())

        return await StoreIO.run(self.io, read)  # not a hop of the cycle: left uncounted

    def close(self) -> None:
        self.io.close()


SYNC_LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def sqlite_durability(conn: sqlite3.Connection) -> str:
    journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    sync = conn.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal_mode={journal}, synchronous={SYNC_LEVELS.get(sync, sync)}"


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
