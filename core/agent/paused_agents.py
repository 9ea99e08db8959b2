"""Paused Agents kept by the process that paused them (issue 12): a click that reaches this
process resumes the Agent it still holds instead of building a new one from the snapshot.

The stored snapshot stays the truth. An entry is used only for the card it was paused on and
only while the bytes it was paused with hash to the checksum on the pointer the claim won (the
snapshot the store holds); anything else (another process, an evicted or mismatched entry)
resumes from the store. An entry is taken out when used: an Agent never runs twice.
Bounded: the oldest entry goes first; nothing is kept per chat beyond `size` entries.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from strands import Agent


@dataclass(frozen=True)
class PausedAgent:
    agent: Agent
    snapshot: bytes  # the bytes stored as the card's snapshot (what binds() checks)
    sha256: str  # their checksum, hashed once when kept (the bytes never change)


class PausedAgents:
    def __init__(self, size: int = 128) -> None:
        self.size = size
        self._entries: OrderedDict[str, PausedAgent] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def put(self, card_id: str, agent: Agent, snapshot: bytes) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._entries[card_id] = PausedAgent(agent, snapshot, hashlib.sha256(snapshot).hexdigest())
            self._entries.move_to_end(card_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def matches(self, card_id: str, sha256: str) -> bool:
        """Would `take` hand this card's Agent out (the entry's bytes hash to `sha256`)?"""
        with self._lock:
            entry = self._entries.get(card_id)
        return entry is not None and entry.sha256 == sha256

    def take(self, card_id: str, sha256: str) -> PausedAgent | None:
        """The card's paused Agent, removed, only if its snapshot bytes hash to `sha256` (the
        checksum on the pointer the claim won); else None, and a mismatched entry is dropped."""
        with self._lock:
            entry = self._entries.pop(card_id, None)
        if entry is None or entry.sha256 != sha256:
            self.misses += 1
            return None
        self.hits += 1
        return entry

    def discard(self, card_id: str) -> None:
        with self._lock:
            self._entries.pop(card_id, None)

    def __len__(self) -> int:
        return len(self._entries)
