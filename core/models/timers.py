"""A card's durable timers (issue 33): reminders, escalation and expiry, stored with the card.

A timer is one row per (card, name), indexed by its due time; one replica at a time holds the
timers' lease and fires what is due, each timer exactly once (its `fire` is one conditional write).
"""

from __future__ import annotations

from typing import Literal

from chat_approvals.core.models.base import Strict

TimerKind = Literal["remind", "escalate", "expire"]


class Timer(Strict):
    """`name` is unique per card: "remind:0", "remind:1", "escalate", "expire"."""

    chat: str
    card_id: str
    name: str
    due_at: float
    ttl: float  # physical expiry: the sweep deletes a timer (fired or not) after it

    @property
    def kind(self) -> TimerKind:
        head = self.name.split(":", 1)[0]
        if head == "remind":
            return "remind"
        if head == "escalate":
            return "escalate"
        return "expire"
