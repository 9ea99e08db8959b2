"""What a later turn in the same chat remembers: the agent's conversation after each finished turn.

Saved as a write-once object (the same snapshot API the pause uses, without interrupt state),
then pointed at by the chat's session row; best effort: a turn never fails because its history
could not be saved, it is only forgotten.
"""

from __future__ import annotations

import json
import logging
import uuid

from strands import Agent
from strands.types._snapshot import Snapshot, SnapshotField
from strands.types.session import decode_bytes_values, encode_bytes_values

from core.clock import Clock
from core.settings import Settings
from store.aio import StoreIO

log = logging.getLogger(__name__)

_FIELDS: list[SnapshotField] = ["messages", "state", "conversation_manager_state"]


class History:
    def __init__(self, store: StoreIO, settings: Settings, clock: Clock) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock

    async def restore(self, chat: str, agent: Agent) -> None:
        if not self.settings.history:
            return
        try:
            key = await self.store.run(self.store.rows.get_session, chat)
            raw = await self.store.run(self.store.objects.get_key, key) if key else None
            if raw is not None:
                agent.load_snapshot(Snapshot.from_dict(decode_bytes_values(json.loads(raw))))
        except Exception as e:  # a lost or unreadable history: start the chat afresh
            log.warning("history of %s not restored: %s", chat, e)

    async def save(self, chat: str, agent: Agent, turn_started: float) -> None:
        if not self.settings.history:
            return
        try:
            snap = agent.take_snapshot(include=list(_FIELDS))
            data = json.dumps(encode_bytes_values(snap.to_dict()), separators=(",", ":")).encode()
            if len(data) > self.settings.max_snapshot_bytes:
                log.warning("history of %s not saved: %d bytes", chat, len(data))
                return
            ref = await self.store.run(self.store.objects.put, f"sessions/{uuid.uuid4().hex}.json", data)
            ttl = self.clock.now() + self.settings.retention
            await self.store.run(self.store.rows.put_session, chat, ref.key, turn_started, ttl)
        except Exception as e:
            log.warning("history of %s not saved: %s", chat, e)
