"""Slack chat keys: workspace + channel + thread, the scope of a turn, a card and its grants."""

from __future__ import annotations

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
