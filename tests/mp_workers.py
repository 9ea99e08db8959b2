"""Entry points for spawned OS processes in the multi-process tests (importable by `spawn`)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from core.agent_factory import user_factory
from core.approvals import Approvals
from core.models import Answer
from store.aio import StoreIO
from store.file_objects import FileObjects
from store.sqlite_rows import SqliteRows


def open_approvals(db: str, objects: str) -> Approvals:
    io = StoreIO(SqliteRows(db), FileObjects(objects))
    return Approvals(io, agent_factory=user_factory("tests.agents:work_agent"))


def race(db: str, objects: str, card_id: str, secret: str, rounds: int, barrier: Any, env: dict[str, str]) -> list[str]:
    os.environ.update(env)
    a = open_approvals(db, objects)

    async def go() -> list[str]:
        out = []
        for _ in range(rounds):
            res = await a.resume(card_id=card_id, user="alice", secret=secret, answer=Answer(approved=True))
            out.append(res.outcome)
        return out

    barrier.wait(timeout=60)
    try:
        return asyncio.run(go())
    finally:
        a.store.close()


def resume_once(db: str, objects: str, card_id: str, secret: str, env: dict[str, str]) -> None:
    os.environ.update(env)
    a = open_approvals(db, objects)
    asyncio.run(a.resume(card_id=card_id, user="alice", secret=secret, answer=Answer(approved=True)))
