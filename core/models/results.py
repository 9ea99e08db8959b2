"""What a turn or a click ended with, and the stored answer a replay returns byte for byte."""

from __future__ import annotations

from typing import Literal

from chat_approvals.core.models.answers import Answer
from chat_approvals.core.models.base import Strict
from chat_approvals.core.models.cards import ApprovalCard, CardOffer, Vote


class TurnResult(Strict):
    """What one turn (or one resume) ended with.

    answered: the agent replied. awaiting_approval: it paused on a card (`offer`).
    waiting: the chat already has an open request, so no second run was started.
    busy: another turn of this chat is running (on any replica), so this one ran nothing.
    """

    status: Literal["answered", "awaiting_approval", "waiting", "busy"]
    text: str = ""
    offer: CardOffer | None = None


ResumeOutcome = Literal[
    "resumed", "vote_recorded", "replayed", "in_progress", "expired", "unknown", "forbidden", "invalid", "unauthorized"
]


class ResumeResult(Strict):
    """The outcome of one click.

    `result_json` is the stored result exactly as written when the resume finished, so a
    replay can return it byte for byte. `message` is a plain sentence for a refusal.
    `card` is the card the click was about, when the caller proved it knows the secret.
    """

    outcome: ResumeOutcome
    message: str = ""
    result: TurnResult | None = None
    result_json: str | None = None
    answer: Answer | None = None
    answered_by: str | None = None
    answered_at: float | None = None
    owner: str | None = None
    card: ApprovalCard | None = None
    card_location: dict[str, str] | None = None
    votes: list[Vote] | None = None  # vote_recorded: the approvals so far
    needed: int | None = None  # vote_recorded: the quorum


class AnswerRecord(Strict):
    """The stored answer of a card (an object, write-once). `result_json` is kept as a string so
    a replay returns it byte for byte. R19: a chained card's secret is never stored, only its id."""

    card_id: str
    secret_hash: str
    owner: str
    card: ApprovalCard
    answer: Answer
    answered_by: str
    answered_at: float
    result_json: str
    chained_card_id: str | None = None
