"""The HTTP front end at its edges, over real HTTP to the running server: R15 (exactly one
well-formed answer, or `invalid` with nothing changed) as a 10,000-body fuzz, duplicate JSON keys,
card ids that are not of the minted shape, and header bytes that are not UTF-8."""

from __future__ import annotations

import asyncio
import json
import math
import random
from typing import Any

from chat_approvals.core.approvals import Approvals
from chat_approvals.store.aio import StoreIO
from tests.conftest import TOKEN, Api
from tests.support.raw_http import raw_request

URL_TEXT = "please fetch https://data.example.org/table.csv"
FUZZ_BODIES = 10_000
BAD_USERS: list[object] = ["", 1, None, ["alice"], "slack:-:TAAAA:UBBBB", "Teams:t:u", "al\x00ice"]


async def _card(api: Api, chat: str = "chat-1", user: str = "alice") -> dict[str, Any]:
    code, body = await api.turn(chat, user, URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval", body
    card: dict[str, Any] = body["card"]
    return card


# ----------------------------------------------------------------------------- the oracle


class _Dup(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _Dup
    return dict(pairs)


def well_formed(raw: bytes, card_id: str) -> bool:
    """R15 written out independently of the server: is this body exactly one well-formed answer?"""
    try:
        body = json.loads(raw.decode("utf-8"), object_pairs_hook=_pairs, parse_constant=lambda c: math.nan)
    except (ValueError, RecursionError):
        return False
    if _has_nan(body) or not isinstance(body, dict) or set(body) != {"user", "secret", "responses"}:
        return False
    user, secret, responses = body["user"], body["secret"], body["responses"]
    if not (isinstance(user, str) and user and isinstance(secret, str) and secret):
        return False
    if user.lower().startswith(("slack:", "teams:")) or any(ord(c) < 32 or ord(c) == 127 for c in user):
        return False  # R17: an HTTP caller cannot state another platform's identity
    if not isinstance(responses, list) or len(responses) != 1 or not isinstance(responses[0], dict):
        return False
    entry = responses[0]
    if not {"interruptId", "status"} <= set(entry) <= {"interruptId", "status", "payload"}:
        return False
    if entry["interruptId"] != card_id or not isinstance(entry["interruptId"], str):
        return False
    if entry["status"] == "cancelled":
        return entry.get("payload") is None
    if entry["status"] != "resolved" or not isinstance(entry.get("payload"), dict):
        return False
    payload = entry["payload"]
    if not set(payload) <= {"approved", "packages"} or type(payload.get("approved")) is not bool:
        return False
    if "packages" not in payload:
        return True
    packages = payload["packages"]
    return payload["approved"] is True and isinstance(packages, list) and all(type(p) is str for p in packages)


def _has_nan(value: Any) -> bool:
    if isinstance(value, float):
        return math.isnan(value) or math.isinf(value)
    if isinstance(value, dict):
        return any(_has_nan(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_nan(v) for v in value)
    return False


# ----------------------------------------------------------------------------- the generator

ODD_VALUES: list[Any] = [
    True, False, None, 0, 1, -1, 1.0, 0.0, "", "yes", "true", "false", "no", "approved", "1",
    [], [True], {}, {"approved": True}, "numpy", ["numpy"], [1], [None], ["numpy", 2], "a,b", 10**30,
]  # fmt: skip
STATUSES: list[Any] = ["resolved", "cancelled", "RESOLVED", "Resolved", "resolved ", "", "approved", "denied", None, 1]
PAYLOAD_KEYS = ["approved", "packages", "Approved", "approve", "reason", "extra", "status", ""]


def _payload(rng: random.Random) -> Any:
    shape = rng.random()
    if shape < 0.15:
        return rng.choice(ODD_VALUES)
    payload: dict[str, Any] = {}
    if rng.random() < 0.85:
        payload["approved"] = rng.choice([True, False]) if rng.random() < 0.5 else rng.choice(ODD_VALUES)
    if rng.random() < 0.4:
        payload["packages"] = (
            rng.choice([[], ["numpy"], ["pandas", "numpy"], [""]]) if rng.random() < 0.5 else (rng.choice(ODD_VALUES))
        )
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        payload[rng.choice(PAYLOAD_KEYS)] = rng.choice(ODD_VALUES)
    return payload


def _entry(rng: random.Random, card_id: str) -> Any:
    if rng.random() < 0.05:
        return rng.choice(ODD_VALUES)
    entry: dict[str, Any] = {}
    if rng.random() < 0.95:
        entry["interruptId"] = card_id if rng.random() < 0.85 else rng.choice(["c_other", card_id.upper(), 1, None])
    if rng.random() < 0.95:
        entry["status"] = rng.choice(STATUSES) if rng.random() < 0.6 else rng.choice(["resolved", "cancelled"])
    if rng.random() < 0.85:
        entry["payload"] = _payload(rng)
    if rng.random() < 0.05:
        entry[rng.choice(["extra", "interruptResponse", "response"])] = rng.choice(ODD_VALUES)
    return entry


def _body(rng: random.Random, card: dict[str, Any]) -> Any:
    body: dict[str, Any] = {}
    if rng.random() < 0.97:
        body["user"] = "alice" if rng.random() < 0.9 else rng.choice(BAD_USERS)
    if rng.random() < 0.97:
        body["secret"] = card["secret"] if rng.random() < 0.9 else rng.choice(["", 1, None])
    if rng.random() < 0.97:
        n = rng.choice([1, 1, 1, 1, 1, 1, 0, 2, 3])
        body["responses"] = (
            [_entry(rng, card["card_id"]) for _ in range(n)] if rng.random() < 0.95 else (rng.choice(ODD_VALUES))
        )
    if rng.random() < 0.03:
        body[rng.choice(["extra", "status", "approved"])] = rng.choice(ODD_VALUES)
    return body if rng.random() < 0.98 else rng.choice(ODD_VALUES)


def _raw(rng: random.Random, card: dict[str, Any]) -> bytes:
    text = json.dumps(_body(rng, card))
    mutation = rng.random()
    if mutation < 0.04:  # a duplicate key: whichever a parser keeps, it must not count
        text = text.replace('"approved": ', '"approved": false, "approved": ', 1)
        text = text.replace('"approved": false, "approved": false', '"approved": true, "approved": false', 1)
    elif mutation < 0.06:
        text = text.replace('"user": ', '"user": "mallory", "user": ', 1)
    elif mutation < 0.07:
        text = text[: rng.randrange(len(text) + 1)]  # truncated
    elif mutation < 0.08:
        text = text + rng.choice(["}", " x", ",", "\x00"])
    elif mutation < 0.09:
        text = text.replace("true", "NaN", 1).replace("false", "Infinity", 1)
    elif mutation < 0.10:
        return text.encode() + b"\xff\xfe"  # not UTF-8
    return text.encode()


async def test_r15_fuzz_every_body_but_a_well_formed_answer_is_invalid_and_changes_nothing(
    api: Api, store: StoreIO, approvals: Approvals
) -> None:
    card = await _card(api)
    pointer = store.rows.get_pointer("chat-1")
    audit = await approvals.audit("chat-1")
    rng = random.Random(20261202)
    url = f"{api.base}/v1/interrupts/{card['card_id']}/resume"
    headers = {**api.headers, "Content-Type": "application/json"}
    sent = skipped = 0
    failures: list[tuple[bytes, int, str]] = []

    async def one(raw: bytes) -> None:
        async with api.session.post(url, data=raw, headers=headers) as r:
            text = await r.text()
            if r.status != 422 or json.loads(text).get("outcome") != "invalid":
                failures.append((raw, r.status, text))

    while sent < FUZZ_BODIES:
        batch = []
        while len(batch) < 50:
            raw = _raw(rng, card)
            if well_formed(raw, card["card_id"]):
                skipped += 1  # a well-formed answer would resume the card: not this test's input
                continue
            batch.append(raw)
        await asyncio.gather(*(one(raw) for raw in batch))
        sent += len(batch)
        assert not failures, failures[:3]
    assert sent >= FUZZ_BODIES and skipped > 0
    # Nothing changed, and the card is still answerable: a well-formed answer resumes it.
    assert store.rows.get_pointer("chat-1") == pointer
    assert await approvals.audit("chat-1") == audit
    assert store.rows.list_grants("alice", "chat-1", 0) == []
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed" and body["answer"] == {"approved": True}


async def test_r15_the_fuzz_oracle_agrees_with_the_examples(api: Api) -> None:
    """The oracle above, on the bodies the issue named: only the canonical ones are well-formed."""
    cid = "c_" + "a" * 22

    def body(entry: dict[str, Any], **top: Any) -> bytes:
        return json.dumps({"user": "alice", "secret": "s", "responses": [entry], **top}).encode()

    ok = {"interruptId": cid, "status": "resolved", "payload": {"approved": True}}
    assert well_formed(body(ok), cid)
    assert well_formed(body({**ok, "payload": {"approved": True, "packages": ["numpy"]}}), cid)
    assert well_formed(body({"interruptId": cid, "status": "cancelled"}), cid)
    for bad in [
        {**ok, "payload": {"approved": "yes"}},
        {**ok, "payload": {"approved": 1}},
        {**ok, "payload": {"approved": None}},
        {**ok, "payload": {}},
        {**ok, "payload": {"approved": True, "by": "me"}},
        {**ok, "status": "RESOLVED"},
        {"interruptId": cid, "status": "resolved"},
        {**ok, "payload": {"approved": True, "packages": "numpy"}},
        {**ok, "payload": {"approved": False, "packages": ["numpy"]}},
    ]:
        assert not well_formed(body(bad), cid), bad
    assert not well_formed(b'{"user": "alice", "user": "alice", "secret": "s", "responses": []}', cid)


async def test_r15_duplicate_keys_are_refused(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    before = store.rows.get_pointer("chat-1")
    cid, secret = card["card_id"], card["secret"]
    entry = f'{{"interruptId": "{cid}", "status": "resolved", "payload": {{"approved": false, "approved": true}}}}'
    bodies = [
        f'{{"user": "alice", "secret": "{secret}", "responses": [{entry}]}}',
        f'{{"user": "mallory", "user": "alice", "secret": "{secret}", "responses": []}}',
        '{"chat": "c", "chat": "d", "user": "u", "text": "x"}',
    ]
    for i, raw in enumerate(bodies):
        path = "/v1/turns" if i == 2 else f"/v1/interrupts/{cid}/resume"
        async with api.session.post(f"{api.base}{path}", data=raw.encode(), headers=api.headers) as r:
            assert r.status == 422, raw
            assert "duplicate key" in (await r.json())["message"]
    assert store.rows.get_pointer("chat-1") == before


async def test_a_card_id_not_of_the_minted_shape_never_reaches_the_store(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    cid, secret = card["card_id"], card["secret"]
    code, _ = await api.resume(cid, "alice", secret)  # card A done: answers/A/1.json exists
    assert code == 200
    audit = [e.kind for e in store.rows.list_audit("chat-1")]
    for target in [f"{cid}%2F1", f"{cid}%2f1.json", "%2e%2e", "..%2F..%2Fanswers", f"{cid}%00", "c_" + "a" * 4998]:
        entry = {"interruptId": target, "status": "resolved", "payload": {"approved": True}}
        async with api.session.post(
            f"{api.base}/v1/interrupts/{target}/resume",
            json={"user": "alice", "secret": secret, "responses": [entry]},
            headers=api.headers,
        ) as r:
            assert 400 <= r.status < 500, (target, r.status)
            if r.content_type == "application/json":  # else aiohttp's own 404: `..` left no route
                assert (await r.json())["outcome"] in ("unknown", "invalid"), target
    # A/1 did not replay card A's stored answer (a replay is audited).
    assert [e.kind for e in store.rows.list_audit("chat-1")] == audit
    status, _ = await raw_request(
        api.base,
        "POST",
        b"/v1/interrupts/c_\x00aaaaaaaaaaaaaaaaaaaaa/resume",
        headers={b"Authorization": f"Bearer {TOKEN}".encode()},
    )
    assert 400 <= status < 500


async def test_an_authorization_header_that_is_not_utf8_is_401(api: Api) -> None:
    for value in (b"Bearer \xff\xfe", b"\xff", b"Bearer " + TOKEN.encode() + b"\xc3"):
        status, body = await raw_request(api.base, "POST", b"/v1/turns", headers={b"Authorization": value}, body=b"{}")
        assert status == 401 and json.loads(body)["outcome"] == "unauthorized", value


async def test_r17_an_http_caller_cannot_state_a_slack_or_teams_identity(api: Api, store: StoreIO) -> None:
    """HTTP users are what the trusted caller states, but never in another platform's namespace:
    otherwise `slack:-:T…:U…` over HTTP would be the Slack user who owns a Slack card."""
    card = await _card(api)
    before = await store.run(store.rows.get_pointer, "chat-1")
    for user in ("slack:-:TAAAA:UBBBB", "SLACK:E1:T1:U1", "teams:0000:1111", "bob\nslack"):
        code, body = await api.turn("chat-2", user, URL_TEXT)
        assert code == 422 and body["outcome"] == "invalid", (user, body)
        code, body = await api.resume(card["card_id"], user, card["secret"])
        assert code == 422 and body["outcome"] == "invalid", (user, body)
        for method, path in (("GET", "/v1/chats/chat-1/grants"), ("DELETE", "/v1/chats/chat-1/grants/all")):
            async with api.session.request(
                method, f"{api.base}{path}", params={"user": user}, headers=api.headers
            ) as r:
                assert r.status == 422, (method, user, await r.text())
    assert await store.run(store.rows.get_pointer, "chat-2") is None  # no turn ran
    assert await store.run(store.rows.get_pointer, "chat-1") == before  # the card is untouched
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed", body
