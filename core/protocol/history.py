"""What a later turn in the same chat remembers: the agent's conversation after each finished turn.

Saved as a write-once object (the same snapshot API the pause uses, without interrupt state),
then pointed at by the chat's session row; best effort: a turn never fails because its history
could not be saved, it is only forgotten. The object and the session row are written in the
step that ends the turn (store.aio.Steps: end_turn, complete), the row in that step's one write.
"""

from __future__ import annotations

import logging
import os

from strands import Agent

from chat_approvals.core.agent.snapshots import agent_bytes, decode, load_owned
from chat_approvals.core.models import Clock
from chat_approvals.core.settings import Settings

log = logging.getLogger(__name__)

# (object key, bytes, seq, ttl): what store.aio.Steps writes for a turn's history.
HistoryWrite = tuple[str, bytes, float, float]


class History:
    def __init__(self, settings: Settings, clock: Clock) -> None:
        self.settings = settings
        self.clock = clock

    @property
    def enabled(self) -> bool:
        return bool(self.settings.history)

    def restore(self, chat: str, agent: Agent, raw: bytes | None) -> None:
        """Load the chat's history (read in the turn's first step) into a new agent."""
        if not self.enabled or raw is None:
            return
        try:
            load_owned(agent, decode(raw))
        except Exception as e:  # an unreadable history: start the chat afresh
            log.warning("history of %s not restored: %s", chat, e)

    def to_save(self, chat: str, agent: Agent, turn_started: float) -> HistoryWrite | None:
        """The history to write with the turn's last step, or None (disabled, too large, or it
        could not be encoded). `turn_started` orders it: a slower turn never rolls it back."""
        if not self.enabled:
            return None
        try:
            data = agent_bytes(agent, include=["messages", "state", "conversation_manager_state"])
        except Exception as e:
            log.warning("history of %s not saved: %s", chat, e)
            return None
        if len(data) > self.settings.max_snapshot_bytes:
            log.warning("history of %s not saved: %d bytes", chat, len(data))
            return None
        return f"sessions/{os.urandom(16).hex()}.json", data, turn_started, self.clock.now() + self.settings.retention
