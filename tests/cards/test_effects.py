"""cards/effects.py: a click's or a turn's result decides, once for every front end, what the chat
shows; and core/protocol/events.py: a won claim reaches every subscriber, a failing one cannot stop it."""

from __future__ import annotations

from typing import Any

import pytest

from chat_approvals.cards import effects as fx
from chat_approvals.core.models import Answer, ApprovalCard, CardOffer, ResumeResult, TurnResult, Vote
from chat_approvals.core.protocol.events import Claimed, Subscribers

NOW = 1_800_000_000.0
YES = Answer(approved=True)


def card(**kw: Any) -> ApprovalCard:
    base: dict[str, Any] = {
        "card_id": "c_abcdefghijklmnopqrstuv",
        "chat": "slack:T0A:D0DM:1800000000.000100",
        "owner": "slack:-:T0A:U0OWNER",
        "platform": "slack",
        "reason": "fetch the data set",
        "sites": ["example.org"],
        "urls": ["https://example.org/data.csv"],
        "packages": [],
        "created_at": NOW,
        "expires_at": NOW + 1800,
    }
    return ApprovalCard(**{**base, **kw})


def kinds(effects: list[fx.ClickEffect]) -> list[str]:
    return [type(e).__name__ + (f":{e.kind}" if isinstance(e, fx.Refuse) else "") for e in effects]


def test_r11_a_resumed_click_updates_the_card_then_shows_the_turn_and_refuses_nothing() -> None:
    c, turn = card(), TurnResult(status="answered", text="done")
    res = ResumeResult(outcome="resumed", card=c, answer=YES, answered_by="u", answered_at=NOW, result=turn)
    effects = fx.resume_effects(res)
    assert kinds(effects) == ["ShowOutcome", "ShowTurn"]
    assert effects[0] == fx.ShowOutcome(c, YES, "u", NOW, repair=True)
    assert effects[1] == fx.ShowTurn(c.chat, turn)


def test_r12_a_replay_repeats_the_update_without_repair_and_refuses_last() -> None:
    c = card()
    res = ResumeResult(outcome="replayed", card=c, answer=YES, answered_by="u", answered_at=NOW,
                       result=TurnResult(status="answered", text="done"))  # fmt: skip
    effects = fx.resume_effects(res)
    assert kinds(effects) == ["ShowOutcome", "Refuse:answered"]  # no chained card: no second reply
    assert isinstance(effects[0], fx.ShowOutcome) and not effects[0].repair
    chained = TurnResult(status="awaiting_approval", offer=CardOffer(card=card(card_id="c_" + "b" * 22), secret="s"))
    again = fx.resume_effects(res.model_copy(update={"result": chained}))
    assert kinds(again) == ["ShowOutcome", "ShowTurn", "Refuse:answered"]  # the still-open chained card


@pytest.mark.parametrize(
    ("res", "expected"),
    [
        (ResumeResult(outcome="vote_recorded", card=card(), votes=[Vote(user="a", at=NOW)], needed=2),
         ["ShowVotes", "Refuse:vote_recorded"]),
        (ResumeResult(outcome="expired", card=card()), ["ShowExpired", "Refuse:expired"]),
        (ResumeResult(outcome="expired"), ["Refuse:expired"]),
        (ResumeResult(outcome="in_progress"), ["Refuse:in_progress"]),
        (ResumeResult(outcome="resumed"), ["Refuse:answered"]),  # no proof of the card: nothing of it
        (ResumeResult(outcome="invalid"), ["Refuse:invalid"]),
        (ResumeResult(outcome="unauthorized"), ["Refuse:unknown"]),  # a wrong secret looks unknown
        (ResumeResult(outcome="unknown"), ["Refuse:unknown"]),
        (ResumeResult(outcome="forbidden", owner="o"), ["Refuse:forbidden"]),
    ],
)  # fmt: skip
def test_every_outcome_has_its_effects(res: ResumeResult, expected: list[str]) -> None:
    assert kinds(fx.resume_effects(res)) == expected


def test_r9_a_policy_refusal_carries_the_policy_sentence_only_with_a_policy() -> None:
    plain = fx.resume_effects(ResumeResult(outcome="forbidden", message="m", owner="o", card=card()))
    assert plain == [fx.Refuse("forbidden", card(), owner="o", policy_said=None)]


def test_a_turn_has_one_effect() -> None:
    offer = CardOffer(card=card(), secret="s")
    assert fx.turn_effect(TurnResult(status="awaiting_approval", offer=offer)) == fx.PostCard(offer)
    assert fx.turn_effect(TurnResult(status="waiting")) == fx.Waiting()
    assert fx.turn_effect(TurnResult(status="answered", text="hi")) == fx.Reply("hi")


async def test_a_claim_reaches_every_subscriber_even_past_a_failing_one() -> None:
    hub: Subscribers[Claimed] = Subscribers()
    seen: list[str] = []

    async def broken(e: Claimed) -> None:
        raise RuntimeError("display fault")

    async def shows(e: Claimed) -> None:
        seen.append(e.card.card_id)

    hub.subscribe(broken)
    unsubscribe = hub.subscribe(shows)
    await hub.emit(Claimed(card(), None, "u", YES))
    unsubscribe()
    await hub.emit(Claimed(card(), None, "u", YES))
    assert seen == [card().card_id]
