"""core/protocol/resume_run.py `answer_doc`: a result's JSON made once by the caller is the stored
answer's (byte for byte, as a replay returns it, R12); a chained result's offer and its secret are
never stored, whatever the caller made (R19)."""

from __future__ import annotations

import json

from chat_approvals.core.models import Answer, AnswerRecord, ApprovalCard, CardOffer, ObjectRef, Pointer, TurnResult
from chat_approvals.core.protocol.resume_run import answer_doc

CARD = ApprovalCard(
    card_id="c_" + "a" * 22, chat="c1", owner="alice", platform="http", reason="why", sites=["a.example"],
    urls=["https://a.example/x"], packages=[], created_at=1.0, expires_at=2.0,
)  # fmt: skip
POINTER = Pointer(
    chat="c1", card_id=CARD.card_id, secret_hash="h", owner="alice", state="claimed", expires_at=2.0, ttl=3.0,
    snapshot=ObjectRef(key="snapshots/x", size=1, sha256="s"), card=CARD, sdk_interrupt_id="i", tool_use_id="t",
    turn_id="u", created_at=1.0,
)  # fmt: skip


def test_a_result_without_an_offer_is_stored_as_the_json_the_caller_made() -> None:
    turn = TurnResult(status="answered", text="done")
    made = answer_doc(POINTER, "alice", Answer(approved=True), 5.0, turn, turn.model_dump_json())
    assert made == answer_doc(POINTER, "alice", Answer(approved=True), 5.0, turn)
    assert AnswerRecord.model_validate_json(made).result_json == turn.model_dump_json()


def test_a_chained_result_is_stored_without_its_offer_whatever_json_was_given() -> None:
    chained = CARD.model_copy(update={"card_id": "c_" + "b" * 22})
    turn = TurnResult(status="awaiting_approval", offer=CardOffer(card=chained, secret="the-secret"))
    doc = answer_doc(POINTER, "alice", Answer(approved=True), 5.0, turn, turn.model_dump_json())
    assert b"the-secret" not in doc
    record = AnswerRecord.model_validate_json(doc)
    assert record.chained_card_id == chained.card_id and json.loads(record.result_json)["offer"] is None
