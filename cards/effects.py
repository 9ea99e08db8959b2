"""What a chat shows after a click or a turn, as data: a pure function of the resume's or the
turn's result, decided once here for every front end. Slack and Teams only execute the effects
(render them with their own cards, send them with their own API).

Effects, in the order a front end carries them out:
- `ShowVotes` / `ShowOutcome` / `ShowExpired`: update the clicked card in place (every copy);
- `ShowTurn`: the resumed turn's reply or chained card, in the card's chat;
- `Refuse`: tell the clicker alone why their click changed nothing (or that their vote counted),
  always last;
- for a turn: `PostCard` (a card, first or chained), `Reply` (text), `Waiting` (a card is open).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from chat_approvals.core.models import Answer, ApprovalCard, CardOffer, ResumeResult, TurnResult, Vote

SYSTEM = "system"  # who answered a card the server denied at its expiry (core/protocol/resume.py)
EDIT_REFUSALS = ("Invalid edit", "Invalid answer: this card does not take edits", "Invalid answer: an edited")
RefusalKind = Literal["vote_recorded", "answered", "in_progress", "expired", "forbidden", "invalid", "unknown"]


@dataclass(frozen=True)
class ShowVotes:
    """A vote that did not complete the quorum: the card, open still, lists the votes so far."""

    card: ApprovalCard
    votes: Sequence[Vote]


@dataclass(frozen=True)
class ShowOutcome:
    """The card, answered. `repair`: the first showing of this outcome, so a card that is gone
    gets a new message; a replay repeats the update (it repairs a card whose update was lost)."""

    card: ApprovalCard
    answer: Answer
    by: str
    at: float
    repair: bool


@dataclass(frozen=True)
class ShowExpired:
    card: ApprovalCard


@dataclass(frozen=True)
class Refuse:
    """To the clicker alone. The fields a kind does not use are None."""

    kind: RefusalKind
    card: ApprovalCard | None = None
    answer: Answer | None = None
    by: str | None = None
    at: float | None = None
    owner: str | None = None  # forbidden: who asked (None: "the person who asked")
    policy_said: str | None = None  # forbidden by the policy: its own sentence
    votes: Sequence[Vote] = ()
    needed: int = 0
    message: str | None = None  # invalid: a sentence the person can act on (an edit the tool's schema refused)


@dataclass(frozen=True)
class ShowTurn:
    """The resumed turn's result, in the chat the card belongs to."""

    chat: str
    result: TurnResult


@dataclass(frozen=True)
class PostCard:
    offer: CardOffer


@dataclass(frozen=True)
class Reply:
    text: str


WAITING_TEXT = "Waiting for your approval: answer the open approval card in this chat first."  # core's usual


@dataclass(frozen=True)
class Waiting:
    """The chat already has an open card: the turn did not run. `hint`: a sentence for this
    message (a typed "yes": use the card's buttons), else the platform's usual one."""

    hint: str | None = None


ClickEffect = ShowVotes | ShowOutcome | ShowExpired | Refuse | ShowTurn
TurnEffect = PostCard | Reply | Waiting


def resume_effects(res: ResumeResult) -> list[ClickEffect]:
    """Everything a click's result shows, in order. Only a caller that proved it knows the card
    (res.card set) sees the card's content; the rest get a refusal that gives nothing away."""
    card = res.card
    if res.outcome == "replayed" and res.answered_by == SYSTEM:  # issue 33: denied at its expiry, unanswered
        return [Refuse("expired")]  # the card keeps saying so; the clicker is told it expired
    if res.outcome == "vote_recorded" and card is not None:
        votes = res.votes or []
        return [ShowVotes(card, votes), Refuse("vote_recorded", votes=votes, needed=res.needed or 0)]
    if res.outcome in ("resumed", "replayed") and card and res.answer and res.answered_by:
        resumed = res.outcome == "resumed"
        out: list[ClickEffect] = [ShowOutcome(card, res.answer, res.answered_by, res.answered_at or 0.0, resumed)]
        # a replay carries a card only when it re-offers the still-open chained card
        if res.result is not None and (resumed or res.result.offer is not None):
            out.append(ShowTurn(card.chat, res.result))
        if not resumed:
            out.append(Refuse("answered", card, res.answer, res.answered_by, res.answered_at))
        return out
    if res.outcome in ("resumed", "replayed"):
        return [Refuse("answered")]
    if res.outcome == "in_progress":
        return [Refuse("in_progress")]
    if res.outcome == "expired":
        return [*([ShowExpired(card)] if card is not None else []), Refuse("expired")]
    if res.outcome == "forbidden":
        policy_said = res.message if card is not None and card.policy is not None else None
        return [Refuse("forbidden", card, owner=res.owner, policy_said=policy_said)]
    if res.outcome == "invalid":  # an edit's refusal says why (issue 32); others keep the generic words
        told = res.message if res.message and res.message.startswith(EDIT_REFUSALS) else None
        return [Refuse("invalid", message=told)]
    return [Refuse("unknown")]  # unknown, unauthorized: a wrong secret looks the same as an unknown card


def turn_effect(result: TurnResult) -> TurnEffect:
    """A turn's one message in its chat."""
    if result.status == "awaiting_approval" and result.offer is not None:
        return PostCard(result.offer)
    if result.status == "waiting":
        return Waiting(result.text if result.text and result.text != WAITING_TEXT else None)
    return Reply(result.text)
