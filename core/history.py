"""What a later turn in the same chat remembers: the agent's conversation after each finished turn.

Saved as a write-once object (the same snapshot API the pause uses, without interrupt state),
then pointed at by the chat's session row; best effort: a turn never fails because its history
could not be saved, it is only forgotten.
"""

from __future__ import annotations

import logging
import uuid

from strands import Agent

from core.models import Clock
from core.settings import Settings
from core.snapshots import decode, encode
from store.aio import Objects, Rows

log = logging.getLogger(__name__)


class History:
    def __init__(self, rows: Rows, objects: Objects, settings: Settings, clock: Clock) -> None:
        self.rows = rows
        self.objects = objects
        self.settings = settings
        self.clock = clock

    async def restore(self, chat: str, agent: Agent) -> None:
        if not self.settings.history:
            return
        try:
            key = await self.rows.session(chat=chat)
            raw = await self.objects.get_key(key) if key else None
            if raw is not None:
                agent.load_snapshot(decode(raw))
        except Exception as e:  # a lost or unreadable history: start the chat afresh
            log.warning("history of %s not restored: %s", chat, e)

    async def save(self, chat: str, agent: Agent, turn_started: float) -> None:
        if not self.settings.history:
            return
        try:
            snap = agent.take_snapshot(include=["messages", "state", "conversation_manager_state"])
            data = encode(snap)
            if len(data) > self.settings.max_snapshot_bytes:
                log.warning("history of %s not saved: %d bytes", chat, len(data))
                return
            ref = await self.objects.put(f"sessions/{uuid.uuid4().hex}.json", data)
            ttl = self.clock.now() + self.settings.retention
            await self.rows.put_session(chat=chat, key=ref.key, seq=turn_started, ttl=ttl)
        except Exception as e:
            log.warning("history of %s not saved: %s", chat, e)
