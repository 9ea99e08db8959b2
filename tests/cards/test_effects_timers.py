"""Issue 33: a click on a card the server denied at its expiry is told the card expired; the card
is not re-rendered as "denied by system" (it keeps saying it expired without an answer)."""

from __future__ import annotations

from chat_approvals.cards import effects as fx
from chat_approvals.core.models import Answer, ApprovalCard, ResumeResult

CARD = ApprovalCard(
    card_id="c_" + "a" * 22, chat="http:c", owner="alice", platform="http", reason="r",
    sites=["example.org"], urls=[], packages=[], created_at=0.0, expires_at=60.0,
)  # fmt: skip


def test_a_replay_of_the_systems_deny_at_expiry_is_an_expired_refusal() -> None:
    res = ResumeResult(
        outcome="replayed", answer=Answer(approved=False), answered_by="system", answered_at=55.0, card=CARD
    )
    assert fx.resume_effects(res) == [fx.Refuse("expired")]
    by_person = res.model_copy(update={"answered_by": "alice"})
    assert isinstance(fx.resume_effects(by_person)[0], fx.ShowOutcome)
