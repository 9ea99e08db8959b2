"""Entry points for spawned OS processes in the multi-process tests (importable by `spawn`)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from chat_approvals.core.agent.factory import user_factory
from chat_approvals.core.bootstrap import Root, bootstrap
from chat_approvals.core.models import Answer
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows


def open_root(db: str, objects: str) -> Root[StoreIO]:
    io = StoreIO(SqliteRows(db), FileObjects(objects))
    return bootstrap(io, agent_factory=user_factory("tests.support.agents:work_agent"))


def race(db: str, objects: str, card_id: str, secret: str, rounds: int, barrier: Any, env: dict[str, str]) -> list[str]:
    os.environ.update(env)
    a_root = open_root(db, objects)
    a = a_root.approvals

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
        a_root.close()


def resume_once(db: str, objects: str, card_id: str, secret: str, env: dict[str, str]) -> None:
    os.environ.update(env)
    a = open_root(db, objects).approvals
    asyncio.run(a.resume(card_id=card_id, user="alice", secret=secret, answer=Answer(approved=True)))


def vote(
    db: str, objects: str, card_id: str, secret: str, user: str, policy: str, barrier: Any, env: dict[str, str]
) -> str:
    """One approver's click on a card that needs a quorum, from its own process (issue 13)."""
    from chat_approvals.bots.approvers import ApproverDirectory
    from chat_approvals.core.protocol.policy import parse_policy

    os.environ.update(env)
    p = parse_policy(policy)
    io = StoreIO(SqliteRows(db), FileObjects(objects))
    a_root = bootstrap(
        io, agent_factory=user_factory("tests.support.agents:work_agent"), policy=p, approvers=ApproverDirectory(p)
    )
    a = a_root.approvals
    barrier.wait(timeout=60)
    try:
        res = asyncio.run(a.resume(card_id=card_id, user=user, secret=secret, answer=Answer(approved=True)))
        return res.outcome
    finally:
        a_root.close()
