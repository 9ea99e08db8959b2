"""deploy/cloudformation.yaml: valid, and its service policy is least privilege — exactly the
DynamoDB and S3 actions the store makes during a whole life cycle of every kind of row and
object, measured on the emulator, no more and no fewer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from chat_approvals.core.models import (
    AuditEvent,
    AuditWrite,
    ClaimRead,
    ClaimWrite,
    Fence,
    Grant,
    GrantChange,
    OutboxItem,
    Refusal,
    SessionWrite,
)
from tests.support.store_backends import open_backend
from tests.support.store_conformance import LEASE, T0, StoreBackend, claim, make_pointer

TEMPLATE = Path(__file__).resolve().parent.parent / "deploy" / "cloudformation.yaml"

# the IAM action each API operation is authorised by
IAM_ACTION = {
    "GetItem": "dynamodb:GetItem",
    "PutItem": "dynamodb:PutItem",
    "UpdateItem": "dynamodb:UpdateItem",
    "DeleteItem": "dynamodb:DeleteItem",
    "Query": "dynamodb:Query",
    "Scan": "dynamodb:Scan",
    "BatchGetItem": "dynamodb:BatchGetItem",
    "BatchWriteItem": "dynamodb:BatchWriteItem",
    "PutObject": "s3:PutObject",
    "GetObject": "s3:GetObject",
    "HeadObject": "s3:GetObject",
    "DeleteObject": "s3:DeleteObject",
    "ListObjectsV2": "s3:ListBucket",
}


class _CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node)}
    return {suffix: loader.construct_mapping(node)}


_CfnLoader.add_multi_constructor("!", _tag)


def _template() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)
    return doc


def test_cloudformation_template_passes_cfn_lint() -> None:
    lint = Path(sys.executable).with_name("cfn-lint")
    proc = subprocess.run([str(lint), str(TEMPLATE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_template_table_ttl_and_bucket_lifecycle_match_the_code() -> None:
    from chat_approvals.core.settings import Settings, retention_days
    from chat_approvals.store.dynamodb_rows import TTL_ATTRIBUTE

    res = _template()["Resources"]
    table = res["Table"]["Properties"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    (rule,) = res["Bucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and rule["ExpirationInDays"] == {"Ref": "RetentionDays"}
    assert _template()["Parameters"]["RetentionDays"]["Default"] == retention_days(Settings())


# a transaction is authorised item by item, by the action of each item it holds
TRANSACT_ACTION = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


@pytest.fixture(params=["moto-dynamodb+moto-s3", "moto-dynamodb+table-objects"])
def moto_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    """Objects in S3, and small objects as table items (`&table=`, issue 12)."""
    with open_backend(request.param, tmp_path) as backend:
        yield backend


def _compound_steps(b: StoreBackend) -> None:
    """One cycle's steps as the service runs them (issue 12): the batched reads and writes and
    the transactions that carry a step's objects, pointer, audit and session."""
    rows, objects, chat = b.rows, b.objects, "http:steps"
    rows.put_grant(
        Grant(user="U", chat=chat, kind="site", name="a.org", card_id="c_0", created_at=T0, expires_at=T0 + 9), T0 + 9
    )
    rows.put_session(chat, "sessions/0.json", T0, T0 + 9)
    start = rows.begin_turn(chat, "h1", "U", T0, T0 + LEASE)
    assert start.taken and start.session == "sessions/0.json"
    p = make_pointer(chat)
    with rows.atomic():
        ref = objects.put(f"snapshots/{p.card_id}.json", b"snapshot")
        p = p.model_copy(update={"snapshot": ref})
        created = AuditWrite(AuditEvent(chat=chat, at=T0, kind="card_created", actor="U", card_id=p.card_id), T0 + 9)
        assert rows.end_turn(chat, "h1", now=T0, pointer=p, audit=[created])
    g = Grant(user=p.owner, chat=chat, kind="site", name="b.org", card_id=p.card_id, created_at=T0, expires_at=T0 + 9)
    ev = AuditWrite(AuditEvent(chat=chat, at=T0, kind="grant", actor="U", card_id=p.card_id), T0 + 9)
    won = rows.claim_grants(
        ClaimWrite(
            ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count),
            worker="w1",
            now=T0 + 1,
            lease_until=T0 + 1 + LEASE,
            resume_deadline=T0 + 900,
            changes=[GrantChange(g, T0 + 9, False, ev)],
            before=[ev],
            after=[ev],
        )
    )
    assert won is not None
    with rows.atomic():
        answer = objects.put(f"answers/{p.card_id}/1.json", b"answer")
        history = objects.put("sessions/1.json", b"history")
        fence = Fence(chat, p.card_id, "w1", won.pointer.claim_count)
        assert rows.finish(fence, answer_key=answer.key, session=SessionWrite(chat, history.key, T0 + 1, T0 + 9))
    assert objects.get(ref) == b"snapshot"


def test_service_policy_allows_exactly_the_actions_the_store_uses(moto_store: StoreBackend) -> None:
    b, used = moto_store, set[str]()

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name == "TransactWriteItems":
            used.update(TRANSACT_ACTION[kind] for item in params["TransactItems"] for kind in item)
        else:
            used.add(IAM_ACTION.get(model.name, f"unmapped:{model.name}"))

    s3: Any = getattr(b.objects, "large", b.objects)  # table objects keep S3 for large ones
    for client in (cast(Any, b.rows).client, s3.client):
        client.meta.events.register("before-parameter-build.*.*", record)
    _compound_steps(b)
    rows = b.rows
    p = make_pointer()
    assert rows.put_pointer(p, T0) and rows.get_pointer_by_card(p.card_id) is not None
    won = claim(rows, p)
    assert won is not None and rows.renew(Fence(p.chat, p.card_id, "w1", 1), now=T0 + 2, lease_until=T0 + 2 + LEASE)
    nxt = make_pointer(p.chat, secret="s2")
    assert rows.replace(Fence(p.chat, p.card_id, "w1", 1), new=nxt) and rows.set_card_location(
        p.chat, nxt.card_id, {"a": "b"}
    )
    won2 = claim(rows, nxt, secret="s2")
    assert won2 is not None and rows.finish(Fence(p.chat, nxt.card_id, "w1", won2.claim_count), answer_key="answers/x")
    rows.put_pointer(make_pointer("http:e"), T0)
    rows.expire("http:e", "c_none", T0)
    g = Grant(user="U", chat="c", kind="site", name="a.org", card_id="c_1", created_at=T0, expires_at=T0 + 9)
    rows.put_grant(g, T0 + 9)
    assert rows.list_grants("U", "c", T0) == [g] and rows.delete_grant("U", "c", "site", "a.org")
    rows.record_refusal(Refusal(chat="c", turn_id="t", kind="site", name="a.org", at=T0), T0 + 9)
    rows.list_refusals("c", "t")
    rows.claim_event("e", T0, T0 + 9)
    rows.append_audit(AuditEvent(chat="c", at=T0, kind="turn", actor="U"), T0 + 9)
    rows.list_audit("c")
    out = OutboxItem(sink="s", id="1", chat="c", body="{}")
    rows.append_audit(AuditEvent(chat="c", at=T0, kind="turn", actor="U"), T0 + 9, outbox=[out])
    assert rows.list_audit_since(T0) and rows.claim_outbox("s", "h", T0, T0 + 9, 10) == [out]
    assert rows.delete_outbox("s", "1")
    assert rows.sweep(T0 + 10**9) > 0
    ref = b.objects.put("answers/x", b"x")
    assert b.objects.get(ref) == b"x" and b.objects.get_key("answers/x") == b"x"
    big = b.objects.put("answers/big", b"x" * 70_000)  # above table objects' inline limit: S3
    assert b.objects.get(big) == b"x" * 70_000
    b.clock.advance(10)
    assert b.objects.sweep(b.clock.now()) == 5  # and the 3 the steps wrote

    allowed: set[str] = set()
    for statement in _template()["Resources"]["ServicePolicy"]["Properties"]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        allowed.update([actions] if isinstance(actions, str) else actions)
    assert used == allowed


def test_outputs_are_urls_the_store_opens_and_small_objects_go_to_the_rows_table() -> None:
    """The stack's ObjectsUrl keeps small objects in the rows' table (issue 12: 11 requests per
    cycle, not 14), with the same retention as the bucket's lifecycle rule."""
    from chat_approvals.store.aws import parse_target

    values = {"Table": "t1", "Bucket": "b1", "ObjectPrefix": "chat-approvals", "AWS::Region": "eu-west-1"}
    values["RetentionDays"] = str(_template()["Parameters"]["RetentionDays"]["Default"])

    def sub(out: str) -> str:
        text = str(_template()["Outputs"][out]["Value"]["Sub"])
        for name, value in values.items():
            text = text.replace("${" + name + "}", value)
        assert "${" not in text, text
        return text

    rows = parse_target(sub("StoreUrl"), "dynamodb")
    objects = parse_target(sub("ObjectsUrl"), "s3")
    assert objects.table == rows.name == "t1" and objects.name == "b1" and objects.path == "chat-approvals"
    assert objects.retention_days == float(values["RetentionDays"]) and objects.region == rows.region == "eu-west-1"
