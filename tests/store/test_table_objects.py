"""Small objects as DynamoDB items (store/table_objects.py, `s3://...&table=`), on the emulators.

The conformance suite runs over it (tests/support/store_backends.py: `*+table-objects`); here is what is
particular to it: where each object goes, what an existing deployment's S3 objects become, how a
step's objects travel with its row write (R7: never a pointer naming a missing snapshot), and how
the URL wires it to the row store's own instance.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.models import AuditEvent, AuditWrite, Fence, SessionWrite
from chat_approvals.store.table_objects import TableObjects
from tests.support.store_backends import BUCKET, DYNALITE, MOTO, REGION, ensure_bucket, open_backend, require_env
from tests.support.store_conformance import LEASE, RETENTION, T0, StoreBackend, claimed, make_pointer


@pytest.fixture(params=["dynalite+table-objects", "moto-dynamodb+table-objects"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    with open_backend(request.param, tmp_path) as backend:
        yield backend


def _sent(*clients: Any) -> list[str]:
    """The API operations sent from now on, in order."""
    sent: list[str] = []
    for c in clients:
        c.meta.events.register("before-send.*.*", lambda event_name, **_: sent.append(event_name.split(".")[2]))
    return sent


def _objects(b: StoreBackend) -> TableObjects:
    assert isinstance(b.objects, TableObjects)
    return b.objects


def test_small_objects_are_table_items_and_large_ones_s3_objects(table: StoreBackend) -> None:
    objects = _objects(table)
    sent = _sent(table.rows.client, objects.large.client)  # type: ignore[attr-defined]
    small = objects.put("snapshots/small.json", b"x" * objects.inline_max)
    assert sent == ["PutItem"]
    sent.clear()
    large = objects.put("snapshots/large.json", b"y" * (objects.inline_max + 1))
    assert sent[0] == "PutObject" and "PutItem" not in sent
    assert objects.get(small) == b"x" * objects.inline_max and objects.get(large) == b"y" * (objects.inline_max + 1)


def test_objects_written_to_s3_before_the_option_stay_readable(table: StoreBackend) -> None:
    """No migration: a read that misses the table asks S3 (where every object used to go)."""
    objects = _objects(table)
    before = objects.large.put("snapshots/old.json", b"written before")  # as the plain S3 store wrote it
    assert objects.get(before) == b"written before" and objects.get_key(before.key) == b"written before"
    assert objects.get_key("snapshots/none.json") is None


def test_r7_end_turn_carries_its_snapshot_in_one_request_where_transactions_exist(table: StoreBackend) -> None:
    rows, objects = table.rows, _objects(table)
    assert rows.take_turn("http:t", "h1", T0, T0 + LEASE)
    sent = _sent(rows.client)  # type: ignore[attr-defined]
    written: list[tuple[str, str]] = []  # (operation, the kind of item: its pk's first part)

    def record(params: dict[str, Any], event_name: str, **_: Any) -> None:
        key = params.get("Item") or params.get("Key") or {"pk": {"S": '["?"]'}}
        written.append((event_name.split(".")[2], json.loads(key["pk"]["S"])[0]))

    rows.client.meta.events.register("provide-client-params.dynamodb.*", record)  # type: ignore[attr-defined]
    created = AuditWrite(AuditEvent(chat="http:t", at=T0, kind="card_created", actor="U1"), T0 + RETENTION)
    with rows.atomic():
        ref = objects.put("snapshots/t.json", b"the paused run")
        p = make_pointer("http:t").model_copy(update={"snapshot": ref})
        assert rows.end_turn("http:t", "h1", now=T0, pointer=p, audit=[created])
    if table.name.startswith("moto"):
        assert sent == ["TransactWriteItems"]  # snapshot, card index, pointer, event, lease: all or nothing
    else:  # no transactions: the snapshot is written (and confirmed) before the pointer names it
        assert [(op, kind) for op, kind in written if op != "TransactWriteItems"] == [
            ("PutItem", "object"),
            ("PutItem", "card"),
            ("PutItem", "chat"),
            ("PutItem", "audit"),
            ("DeleteItem", "turn"),
        ]
    assert rows.get_pointer_by_card(p.card_id) == p and objects.get(ref) == b"the paused run"


def test_r7_a_failed_pointer_write_in_a_transaction_leaves_no_snapshot(tmp_path: Path) -> None:
    """Where the step is one transaction (moto; dynalite has none), a refused pointer write
    takes its snapshot with it."""
    with open_backend("moto-dynamodb+table-objects", tmp_path) as table:
        _refused_pointer_takes_its_snapshot(table)


def _refused_pointer_takes_its_snapshot(table: StoreBackend) -> None:
    rows, objects = table.rows, _objects(table)
    first = make_pointer("http:r")
    assert rows.put_pointer(first, T0)  # an open request: the next pointer is refused
    assert rows.take_turn("http:r", "h1", T0, T0 + LEASE)
    with rows.atomic():
        ref = objects.put("snapshots/refused.json", b"refused run")
        p = make_pointer("http:r").model_copy(update={"snapshot": ref})
        assert not rows.end_turn("http:r", "h1", now=T0, pointer=p)
    assert rows.get_pointer("http:r") == first and objects.get_key(ref.key) is None
    assert rows.take_turn("http:r", "h2", T0 + 1, T0 + 1 + LEASE)  # the lease was released all the same


def test_r12_finish_carries_the_answer_and_history(table: StoreBackend) -> None:
    rows, objects = table.rows, _objects(table)
    won = claimed(table)
    sent = _sent(rows.client, objects.large.client)  # type: ignore[attr-defined]
    with rows.atomic():
        answer = objects.put("answers/a/1.json", b"answer")
        history = objects.put("sessions/h.json", b"history")
        session = SessionWrite(won.chat, history.key, T0, T0 + RETENTION)
        assert rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key=answer.key, session=session)
    want = ["TransactWriteItems"] if table.name.startswith("moto") else ["BatchWriteItem", "UpdateItem", "PutItem"]
    assert sent[-len(want) :] == want and "PutObject" not in sent
    assert objects.get_key(answer.key) == b"answer" and rows.get_session(won.chat) == history.key


def test_object_items_are_swept_by_age_and_carry_the_tables_ttl(table: StoreBackend) -> None:
    objects = _objects(table)
    old = objects.put("answers/old.json", b"old")
    table.clock.advance(100)
    new = objects.put("answers/new.json", b"new")
    raw = table.rows.client.get_item(  # type: ignore[attr-defined]
        TableName=table.rows.table,  # type: ignore[attr-defined]
        Key={"pk": {"S": '["object","answers/new.json"]'}, "sk": {"S": "object"}},
    )["Item"]
    assert int(raw["ttl"]["N"]) >= T0 + 100 + 9 * 86400  # DynamoDB's TTL removes it, as the bucket's rule does
    assert table.rows.sweep(T0 + 10**9) == 0  # the rows' sweep leaves objects to the objects' sweep
    assert objects.sweep(table.clock.now() - 50) == 1
    assert objects.get_key(old.key) is None and objects.get(new) == b"new"


def test_the_objects_url_shares_the_row_stores_instance(tmp_path: Path) -> None:
    """`--objects s3://...&table=T` with `--store dynamodb://T`: one DynamoRows, so a step's
    objects ride in its row writes (store/open.py)."""
    env = require_env(DYNALITE, MOTO)
    from chat_approvals.core.clock import ManualClock
    from chat_approvals.store.dynamodb_rows import create_table, delete_table
    from chat_approvals.store.open import open_objects, open_rows

    name = "t" + secrets.token_hex(6)
    rows_url = f"dynamodb://{name}?region={REGION}&endpoint_url={env[DYNALITE]}"
    create_table(rows_url)
    ensure_bucket(env[MOTO])
    try:
        rows = open_rows(rows_url)
        url = (
            f"s3://{BUCKET}/p{secrets.token_hex(4)}?region={REGION}&endpoint_url={env[MOTO]}&table={name}&inline_max=10"
        )
        objects = open_objects(url, ManualClock(T0))
        assert isinstance(objects, TableObjects) and objects.rows is rows and objects.inline_max == 10
        assert objects.get(objects.put("answers/a.json", b"0123456789")) == b"0123456789"  # an item
        assert objects.get(objects.put("answers/b.json", b"01234567890")) == b"01234567890"  # S3
        rows.close()
    finally:
        delete_table(rows_url)


def test_table_options_only_on_the_objects_url() -> None:
    from chat_approvals.store.aws import parse_target

    assert parse_target("s3://b/p?table=T&inline_max=5&retention_days=3", "s3").table == "T"
    with pytest.raises(ValueError, match="unknown option"):
        parse_target("dynamodb://T?table=T", "dynamodb")
