"""Slack chat keys: workspace + channel + thread, the scope of a turn, a card and its grants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "slack"


@dataclass(frozen=True)
class SlackChat:
    team: str
    channel: str
    thread_ts: str

    @property
    def key(self) -> str:
        return f"{PREFIX}:{self.team}:{self.channel}:{self.thread_ts}"


def chat_key(team: str, channel: str, thread_ts: str) -> str:
    return SlackChat(team, channel, thread_ts).key


def parse_chat_key(key: str) -> SlackChat | None:
    """The Slack parts of a chat key, or None for another platform's key (or a malformed one)."""
    parts = key.split(":")
    if len(parts) != 4 or parts[0] != PREFIX or not all(parts[1:]):
        return None
    return SlackChat(parts[1], parts[2], parts[3])


def in_workspace(key: str, team: str) -> bool:
    chat = parse_chat_key(key)
    return chat is not None and chat.team == team


@dataclass(frozen=True)
class SlackCardLocation:
    """Where a card was posted in Slack (to update it later). Stored as the pointer's
    `card_location` strings; read back with `parse`."""

    channel: str
    ts: str
    thread_ts: str | None = None

    @classmethod
    def of(cls, channel: str | None, ts: str | None, thread_ts: str | None) -> SlackCardLocation | None:
        return cls(channel, ts, thread_ts or None) if channel and ts else None

    @classmethod
    def parse(cls, stored: Mapping[str, str] | None) -> SlackCardLocation | None:
        """None for a location of another platform (or none at all)."""
        if not stored:
            return None
        return cls.of(stored.get("channel"), stored.get("ts"), stored.get("thread_ts"))

    def stored(self) -> dict[str, str]:
        loc = {"channel": self.channel, "ts": self.ts}
        if self.thread_ts:
            loc["thread_ts"] = self.thread_ts
        return loc
