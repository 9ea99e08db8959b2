"""Fault injection against the DynamoDB/S3 backends on the emulators (R7, R10-R13).

Throttling is retried with backoff; a response lost after the write landed is recognised as our
own write (not a lost race, not an existing object); a fault that outlasts the retries is a
StoreError that changed nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from chat_approvals.core.models import Fence
from chat_approvals.store.base import CorruptObject, ObjectExists, StoreError
from tests.support.aws_faults import Faults
from tests.support.store_backends import open_backend
from tests.support.store_conformance import (
    LEASE,
    T0,
    StoreBackend,
    _race,
    claim,
    make_pointer,
    pending,
)

AWS_BACKENDS = ["dynalite+moto-s3", "moto-dynamodb+moto-s3"]


@pytest.fixture(params=AWS_BACKENDS)
def aws(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    with open_backend(request.param, tmp_path) as backend:
        yield backend


def _client(obj: object) -> object:
    return obj.client  # type: ignore[attr-defined]


def test_r10_throttled_claim_race_is_retried_and_exactly_one_wins(aws: StoreBackend) -> None:
    p = pending(aws)
    faults = Faults(_client(aws.rows), "UpdateItem").throttle(15)
    winners = _race(aws.rows, p, 20, T0 + 1)
    assert faults.injected == 15  # the throttled attempts were retried, not dropped
    assert len(winners) == 1
    assert aws.rows.get_pointer(p.chat) == winners[0]


def test_r10_lost_claim_response_is_recognised_as_our_own_win(aws: StoreBackend) -> None:
    """The claim applied but its answer was lost; the retry fails its condition, and the item's
    op nonce (ALL_OLD on moto, a consistent read on dynalite) shows it was ours."""
    p = pending(aws)
    faults = Faults(_client(aws.rows), "UpdateItem").lose(1)
    reads: list[str] = []
    _client(aws.rows).meta.events.register(  # type: ignore[attr-defined]
        "before-send.dynamodb.GetItem", lambda **_: reads.append("GetItem")
    )
    won = claim(aws.rows, p, worker="w1")
    assert faults.sent_for_real == 1
    # moto returns the item with the failed condition (ALL_OLD); dynalite does not, so one read
    assert reads == ([] if aws.name.startswith("moto") else ["GetItem"])
    assert won is not None and (won.worker, won.claim_count) == ("w1", 1)
    assert claim(aws.rows, p, worker="w2") is None  # and it is still the only claim
    assert aws.rows.get_pointer(p.chat) == won


def test_r12_lost_finish_and_r13_lost_replace_responses_still_count(aws: StoreBackend) -> None:
    p = pending(aws)
    won = claim(aws.rows, p)
    assert won is not None
    faults = Faults(_client(aws.rows), "UpdateItem").lose(1)
    nxt = make_pointer(p.chat, secret="secret-2")
    assert aws.rows.replace(Fence(p.chat, p.card_id, "w1", won.claim_count), new=nxt)
    won2 = claim(aws.rows, nxt, secret="secret-2", worker="w1")
    assert won2 is not None
    assert faults.sent_for_real == 1  # the replace that was lost
    # finish is one TransactWriteItems where the endpoint has transactions (moto), else UpdateItem
    finish = Faults(_client(aws.rows), "TransactWriteItems" if aws.name.startswith("moto") else "UpdateItem").lose(1)
    assert aws.rows.finish(Fence(p.chat, nxt.card_id, "w1", won2.claim_count), answer_key="answers/a")
    assert finish.sent_for_real == 1
    got = aws.rows.get_pointer(p.chat)
    assert got is not None and (got.state, got.answer_key, got.card_id) == ("done", "answers/a", nxt.card_id)


def test_r7_lost_end_turn_response_still_reports_the_pointer_written(aws: StoreBackend) -> None:
    """end_turn's transaction (moto) or its pointer PutItem (dynalite) applied, its response was
    lost; the retry fails its conditions and the pointer's op nonce shows it was ours."""
    from chat_approvals.core.models import AuditEvent, AuditWrite

    assert aws.rows.take_turn("http:t", "h1", T0, T0 + LEASE)
    moto = aws.name.startswith("moto")
    faults = Faults(_client(aws.rows), "TransactWriteItems") if moto else Faults(_client(aws.rows), "PutItem").skip(1)
    faults.lose(1)
    p = make_pointer("http:t")
    created = AuditWrite(AuditEvent(chat="http:t", at=T0, kind="card_created", actor="U1"), T0 + 100)
    assert aws.rows.end_turn("http:t", "h1", now=T0, pointer=p, audit=[created])
    assert faults.sent_for_real == 1
    assert aws.rows.get_pointer("http:t") == p and aws.rows.get_pointer_by_card(p.card_id) == p
    assert aws.rows.list_audit("http:t") == [created.event]
    assert aws.rows.take_turn("http:t", "h2", T0 + 1, T0 + 1 + LEASE)  # the lease was released


def test_r7_lost_put_pointer_response_still_reports_created(aws: StoreBackend) -> None:
    faults = Faults(_client(aws.rows), "PutItem").skip(1).lose(1)  # the card index, then the pointer
    p = make_pointer()
    assert aws.rows.put_pointer(p, T0)
    assert faults.sent_for_real == 1
    assert aws.rows.get_pointer(p.chat) == p
    assert not aws.rows.put_pointer(make_pointer(p.chat), T0)  # a real second request is refused


def test_lost_dedupe_refusal_and_audit_responses_count_once(aws: StoreBackend) -> None:
    from chat_approvals.core.models import AuditEvent, Refusal

    faults = Faults(_client(aws.rows), "PutItem").lose(3)
    assert aws.rows.claim_event("slack:Ev1", T0, T0 + 100)
    r = Refusal(chat="http:a", turn_id="t1", kind="site", name="a.org", at=T0)
    assert aws.rows.record_refusal(r, T0 + 100)
    e = AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1")
    aws.rows.append_audit(e, T0 + 100)
    assert faults.sent_for_real == 3
    assert not aws.rows.claim_event("slack:Ev1", T0 + 1, T0 + 100)
    assert not aws.rows.record_refusal(r, T0 + 100)
    assert aws.rows.list_refusals("http:a", "t1") == [r]
    assert aws.rows.list_audit("http:a") == [e]


def test_r11_faults_outlasting_the_retries_raise_store_error_and_change_nothing(aws: StoreBackend) -> None:
    from chat_approvals.store.dynamodb_rows import DynamoRows

    p = pending(aws)
    target = dataclasses.replace(aws.rows.target, max_attempts=3)  # type: ignore[attr-defined]
    rows = DynamoRows(target)
    faults = Faults(rows.client, "UpdateItem")
    faults.fail_all = True
    with pytest.raises(StoreError):
        claim(rows, p, worker="w1")
    assert faults.injected == 3
    assert aws.rows.get_pointer(p.chat) == p  # still pending: the card stays answerable
    assert claim(aws.rows, p, worker="w2") is not None
    put_faults = Faults(rows.client, "PutItem")
    put_faults.fail_all = True
    with pytest.raises(StoreError):
        rows.put_pointer(make_pointer("http:other"), T0)
    assert aws.rows.get_pointer("http:other") is None
    rows.close()


def test_r7_s3_put_retries_throttling_and_recognises_a_lost_response(aws: StoreBackend) -> None:
    faults = Faults(_client(aws.objects), "PutObject").throttle(2)
    ref = aws.objects.put("snapshots/a", b"bytes a")
    assert faults.injected == 2 and aws.objects.get(ref) == b"bytes a"
    faults.lose(1)
    ref_b = aws.objects.put("snapshots/b", b"bytes b")  # its own earlier write, not ObjectExists
    assert faults.sent_for_real == 1 and aws.objects.get(ref_b) == b"bytes b"
    with pytest.raises(ObjectExists):
        aws.objects.put("snapshots/b", b"other")


def test_r7_s3_put_fault_outlasting_retries_is_store_error_and_writes_nothing(aws: StoreBackend) -> None:
    from chat_approvals.store.s3_objects import S3Objects

    objects = S3Objects(dataclasses.replace(aws.objects.target, max_attempts=2), aws.clock)  # type: ignore[attr-defined]
    faults = Faults(objects.client, "PutObject")
    faults.fail_all = True
    with pytest.raises(StoreError) as info:
        objects.put("snapshots/x", b"x")
    assert not isinstance(info.value, ObjectExists)
    assert aws.objects.get_key("snapshots/x") is None


def test_r7_s3_put_with_a_wrong_echoed_checksum_is_not_confirmed(aws: StoreBackend) -> None:
    faults = Faults(_client(aws.objects), "PutObject").wrong_echo(1)
    with pytest.raises(CorruptObject):
        aws.objects.put("snapshots/echo", b"bytes")
    assert faults.injected == 1


def test_r11_lease_and_claim_survive_throttled_renewals(aws: StoreBackend) -> None:
    p = pending(aws)
    won = claim(aws.rows, p)
    assert won is not None
    Faults(_client(aws.rows), "UpdateItem").throttle(3)
    assert aws.rows.renew(Fence(p.chat, p.card_id, "w1", won.claim_count), now=T0 + 10, lease_until=T0 + 10 + LEASE)
    got = aws.rows.get_pointer(p.chat)
    assert got is not None and got.lease_until == T0 + 10 + LEASE
