"""Slack chat keys: workspace + channel + thread, the scope of a turn, a card and its grants."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

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
    routed: SlackCardLocation | None = None  # the copy in the approvers' channel (policy routing)
    escalated: SlackCardLocation | None = None  # the copy posted to the escalation approvers (issue 33)
    # The workspace whose token posted it (issue 31: every later call for the card uses that token).
    team: str | None = None
    enterprise: str | None = None

    @classmethod
    def of(
        cls,
        channel: str | None,
        ts: str | None,
        thread_ts: str | None,
        *,
        team: str | None = None,
        enterprise: str | None = None,
    ) -> SlackCardLocation | None:
        return (
            cls(channel, ts, thread_ts or None, team=team or None, enterprise=enterprise or None)
            if channel and ts
            else None
        )

    @classmethod
    def parse(cls, stored: Mapping[str, str] | None) -> SlackCardLocation | None:
        """None for a location of another platform (or none at all)."""
        if not stored:
            return None
        ws = {"team": stored.get("team"), "enterprise": stored.get("enterprise")}
        loc = cls.of(stored.get("channel"), stored.get("ts"), stored.get("thread_ts"), **ws)
        routed = cls.of(stored.get("routed_channel"), stored.get("routed_ts"), None, **ws)
        escalated = cls.of(
            stored.get("escalated_channel"), stored.get("escalated_ts"), stored.get("escalated_thread"), **ws
        )
        if loc is not None and escalated is not None:
            loc = replace(loc, escalated=escalated)
        return replace(loc, routed=routed) if loc is not None and routed is not None else loc

    def stored(self) -> dict[str, str]:
        loc = {"channel": self.channel, "ts": self.ts}
        if self.thread_ts:
            loc["thread_ts"] = self.thread_ts
        if self.routed is not None:
            loc.update(routed_channel=self.routed.channel, routed_ts=self.routed.ts)
        if self.escalated is not None:
            loc.update(escalated_channel=self.escalated.channel, escalated_ts=self.escalated.ts)
            if self.escalated.thread_ts:
                loc["escalated_thread"] = self.escalated.thread_ts
        if self.team:
            loc["team"] = self.team
        if self.enterprise:
            loc["enterprise"] = self.enterprise
        return loc

    @property
    def here(self) -> SlackCardLocation:
        """This copy alone (the requester's), without the approvers' one."""
        return replace(self, routed=None, escalated=None)
