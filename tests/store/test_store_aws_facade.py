"""The core facade on the DynamoDB + S3 backends (emulators), with faults injected at the wire.

R7: an S3 PUT that keeps failing means no pointer and no card, only an ordinary message.
R9-R12: a whole card -> click -> done cycle, and a replay, on the multi-replica store.
A DynamoDB fault that outlasts the retries during the claim surfaces as StoreError and leaves
the card answerable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.models import Answer
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.base import StoreError
from chat_approvals.store.dynamodb_rows import DynamoRows
from chat_approvals.store.s3_objects import S3Objects
from tests.support.agents import Counter, scripted_factory
from tests.support.aws_faults import Faults
from tests.support.store_backends import open_backend
from tests.support.store_conformance import StoreBackend

TEXT = "fetch https://data.example/x.csv"


@pytest.fixture(params=["dynalite+moto-s3", "moto-dynamodb+moto-s3"])
def aws(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    with open_backend(request.param, tmp_path) as backend:
        yield backend


def _approvals(rows: object, objects: object, b: StoreBackend) -> Approvals:
    io = StoreIO(rows, objects)  # type: ignore[arg-type]
    return bootstrap(io, settings=Settings(), clock=b.clock, agent_factory=scripted_factory(Counter())).approvals


async def test_r7_s3_put_failure_means_no_pointer_and_no_card(aws: StoreBackend) -> None:
    objects = S3Objects(dataclasses.replace(aws.objects.target, max_attempts=2), aws.clock)  # type: ignore[attr-defined]
    faults = Faults(objects.client, "PutObject")
    faults.fail_all = True
    a = _approvals(aws.rows, objects, aws)
    turn = await a.run_turn(chat="http:r7", user="alice", text=TEXT, platform="http")
    assert faults.injected == 2
    assert turn.status == "answered" and turn.offer is None and turn.text == wording.SNAPSHOT_FAILED
    assert aws.rows.get_pointer("http:r7") is None
    assert [e.kind for e in aws.rows.list_audit("http:r7") if e.kind == "card_created"] == []


async def test_r12_card_click_done_then_replay_on_dynamodb_and_s3(aws: StoreBackend) -> None:
    a = _approvals(aws.rows, aws.objects, aws)
    turn = await a.run_turn(chat="http:cycle", user="alice", text=TEXT, platform="http")
    assert turn.status == "awaiting_approval" and turn.offer is not None
    card, secret = turn.offer.card, turn.offer.secret
    assert await a.record_card_location(chat="http:cycle", card_id=card.card_id, location={"k": "v"})
    res = await a.resume(card_id=card.card_id, user="alice", secret=secret, answer=Answer(approved=True))
    assert res.outcome == "resumed" and res.card_location == {"k": "v"}
    again = await a.resume(card_id=card.card_id, user="alice", secret=secret, answer=Answer(approved=True))
    assert again.outcome == "replayed" and again.result_json == res.result_json
    p = aws.rows.get_pointer("http:cycle")
    assert p is not None and p.state == "done" and p.claim_count == 1 and p.answer_key
    assert [g.name for g in await a.grants(user="alice", chat="http:cycle")] == ["data.example"]


async def test_r10_claim_fault_outlasting_retries_is_a_store_error_and_the_card_stays_answerable(
    aws: StoreBackend,
) -> None:
    a = _approvals(aws.rows, aws.objects, aws)
    turn = await a.run_turn(chat="http:fault", user="alice", text=TEXT, platform="http")
    assert turn.offer is not None
    card, secret = turn.offer.card, turn.offer.secret
    flaky = DynamoRows(dataclasses.replace(aws.rows.target, max_attempts=2))  # type: ignore[attr-defined]
    faults = Faults(flaky.client, "UpdateItem")
    faults.fail_all = True
    b = _approvals(flaky, aws.objects, aws)
    with pytest.raises(StoreError):
        await b.resume(card_id=card.card_id, user="alice", secret=secret, answer=Answer(approved=True))
    before = aws.rows.get_pointer("http:fault")
    assert before is not None and before.state == "pending" and before.claim_count == 0
    faults.fail_all = False  # the fault passes: the same click goes through
    res = await b.resume(card_id=card.card_id, user="alice", secret=secret, answer=Answer(approved=True))
    assert res.outcome == "resumed"
    flaky.close()


async def test_r10_twenty_concurrent_clicks_with_throttled_claims_resume_once(aws: StoreBackend) -> None:
    import asyncio

    a = _approvals(aws.rows, aws.objects, aws)
    turn = await a.run_turn(chat="http:throttle", user="alice", text=TEXT, platform="http")
    assert turn.offer is not None
    card, secret = turn.offer.card, turn.offer.secret
    faults = Faults(aws.rows.client, "UpdateItem").throttle(10)  # type: ignore[attr-defined]
    results = await asyncio.gather(
        *[a.resume(card_id=card.card_id, user="alice", secret=secret, answer=Answer(approved=True)) for _ in range(20)]
    )
    outcomes = [r.outcome for r in results]
    assert faults.injected == 10
    assert outcomes.count("resumed") == 1, outcomes
    assert set(outcomes) <= {"resumed", "in_progress", "replayed"}, outcomes
    p = aws.rows.get_pointer("http:throttle")
    assert p is not None and p.state == "done" and p.claim_count == 1
