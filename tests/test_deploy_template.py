"""deploy/cloudformation.yaml: valid, and its service policy is least privilege — exactly the
DynamoDB and S3 actions the store makes during a whole life cycle of every kind of row and
object, measured on the emulator, no more and no fewer."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from core.models import AuditEvent, Fence, Grant, OutboxItem, Refusal
from tests.store_backends import open_backend
from tests.store_conformance import LEASE, T0, StoreBackend, claim, make_pointer

TEMPLATE = Path(__file__).resolve().parent.parent / "deploy" / "cloudformation.yaml"

# the IAM action each API operation is authorised by
IAM_ACTION = {
    "GetItem": "dynamodb:GetItem",
    "PutItem": "dynamodb:PutItem",
    "UpdateItem": "dynamodb:UpdateItem",
    "DeleteItem": "dynamodb:DeleteItem",
    "Query": "dynamodb:Query",
    "Scan": "dynamodb:Scan",
    # a transaction is authorised item by item, by the actions it contains (only Puts here)
    "TransactWriteItems": "dynamodb:PutItem",
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
    from core.settings import Settings, retention_days
    from store.dynamodb_rows import TTL_ATTRIBUTE

    res = _template()["Resources"]
    table = res["Table"]["Properties"]
    assert table["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    (rule,) = res["Bucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and rule["ExpirationInDays"] == {"Ref": "RetentionDays"}
    assert _template()["Parameters"]["RetentionDays"]["Default"] == retention_days(Settings())


@pytest.fixture
def moto_store(tmp_path: Path) -> Iterator[StoreBackend]:
    with open_backend("moto-dynamodb+moto-s3", tmp_path) as backend:
        yield backend


def test_service_policy_allows_exactly_the_actions_the_store_uses(moto_store: StoreBackend) -> None:
    b, used = moto_store, set()

    def record(model: Any, **_: Any) -> None:
        used.add(IAM_ACTION.get(model.name, f"unmapped:{model.name}"))

    for client in (b.rows.client, b.objects.client):  # type: ignore[attr-defined]
        client.meta.events.register("before-call.*.*", record)
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
    b.clock.advance(10)
    assert b.objects.sweep(b.clock.now()) == 1

    allowed: set[str] = set()
    for statement in _template()["Resources"]["ServicePolicy"]["Properties"]["PolicyDocument"]["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        allowed.update([actions] if isinstance(actions, str) else actions)
    assert used == allowed
