"""Protocol timings and limits. Every default is the issue's; every one is configurable."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
BUILT_IN_AGENT = "built-in"  # what a paused turn records when no --agent was given


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    card_expiry: float = 30 * MINUTE
    max_card_life: float = 1 * DAY  # a policy's `expires_after` is capped by this
    grant_ttl: float = 8 * HOUR
    lease: float = 30.0
    heartbeat_every: float = 10.0
    resume_deadline: float = 15 * MINUTE
    claim_cap: int = 3
    retention: float = 7 * DAY  # rows and objects outlive their logical expiry by this much
    max_snapshot_bytes: int = 4 * 1024 * 1024
    event_dedupe_ttl: float = 1 * DAY
    history: bool = True  # a later turn in the chat sees the earlier ones
    # The `--agent module:function` this process builds its agents with (None: the built-in agent).
    # A paused turn records it; a resume on another factory is refused (its snapshot needs the
    # tools of the agent that paused it).
    agent: str | None = None

    @property
    def agent_name(self) -> str:
        return self.agent or BUILT_IN_AGENT


def retention_days(settings: Settings) -> int:
    """How long an object must live: the card's life, a resume, then the retention; one day spare."""
    return math.ceil((settings.card_expiry + settings.resume_deadline + settings.retention) / DAY) + 1
