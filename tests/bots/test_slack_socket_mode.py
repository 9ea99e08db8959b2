"""Socket Mode: the same front end over a WebSocket (apps.connections.open -> ws://127.0.0.1), with
the stand-in playing Slack: it pushes real envelope shapes and records the acks."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons, running


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig(socket_mode=True)) as r:
        yield r


def envelope(kind: str, payload: dict[str, Any], n: int, **extra: Any) -> dict[str, Any]:
    shapes = {e["type"]: e for e in P.fixture("socket_mode_envelopes.json")}  # real envelope shapes
    env = copy.deepcopy(shapes[kind])
    env.update(envelope_id=f"00000000-0000-4000-8000-{n:012d}", payload=payload, **extra)
    return env


async def test_socket_mode_dm_click_resume_and_command(rig: SlackRig) -> None:
    assert rig.standin.of("apps.connections.open")[0].token == "xapp-1-test"
    ts = rig.next_ts()
    event = P.message_im(text="download https://example.org/a.csv", user=OWNER, channel=DM, event_id="EvS1", ts=ts)
    ack = await rig.standin.push(envelope("events_api", event, 1))
    assert ack == {"envelope_id": "00000000-0000-4000-8000-000000000001"}
    # Slack's retry of the same event over the socket starts no second turn
    await rig.standin.push(envelope("events_api", event, 2, retry_attempt=1, retry_reason="timeout"))
    await rig.settle()
    (card,) = rig.card_calls()
    assert_valid_blocks(card)
    assert len(rig.standin.of("chat.postMessage")) == 1

    ack = await rig.standin.push(envelope("interactive", rig.click_payload(card), 3))
    assert ack["envelope_id"].endswith("3")
    await rig.settle()
    updates = rig.standin.of("chat.update")
    assert len(updates) == 2 and "Approved" in json.dumps(updates[-1].args["blocks"])
    assert not buttons(assert_valid_blocks(updates[-1]))
    assert [g.name for g in await rig.approvals.grants(user=OWNER_KEY)] == ["example.org"]

    fields = P.slash_command(text="", user=OWNER, channel=DM, response_url=rig.standin.response_url("cmd"))
    ack = await rig.standin.push(envelope("slash_commands", fields, 4))
    assert "payload" not in ack or not ack["payload"]  # acked empty; the list goes to response_url
    await rig.settle()
    (listing,) = rig.standin.of("response_url")
    assert "example.org" in json.dumps(assert_valid_blocks(listing))

    bad = P.slash_command(text="nonsense here", user=OWNER, channel=DM, response_url=rig.standin.response_url())
    ack = await rig.standin.push(envelope("slash_commands", bad, 5))
    assert ack["payload"]["text"].startswith("Usage:")


async def test_socket_mode_serves_no_http_route(rig: SlackRig) -> None:
    status, _ = await rig.send(*P.json_body({"type": "url_verification", "challenge": "x"}))
    assert status in (404, 405)


JUNK = [
    ("events_api", "event 5", lambda ev, click: {**ev, "event": 5}),
    ("events_api", "event text not a string", lambda ev, click: {**ev, "event": {**ev["event"], "text": ["x"]}}),
    ("events_api", "a lone surrogate", lambda ev, click: {**ev, "event": {**ev["event"], "text": "hi \ud800"}}),
    ("interactive", "actions []", lambda ev, click: {**click, "actions": []}),
    ("interactive", "actions an object", lambda ev, click: {**click, "actions": {"0": click["actions"][0]}}),
    ("interactive", "a deeply nested value",
     lambda ev, click: {**click, "actions": [{**click["actions"][0], "value": "[" * 5000}]}),
    ("slash_commands", "a field not a string", lambda ev, click: {"command": "/approvals", "text": 5}),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "what", "make"), JUNK, ids=[j[1] for j in JUNK])
async def test_socket_mode_junk_is_acked_and_refused_like_http(
    rig: SlackRig, kind: str, what: str, make: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 27.3: the same shapes as HTTP mode; a bad one is acked empty, logged in one line, and
    reaches no listener (no reply, no turn, no claim); the socket keeps serving."""
    ts = rig.next_ts()
    event = P.message_im(text="download https://example.org/a.csv", user=OWNER, channel=DM, event_id="EvJ1", ts=ts)
    await rig.standin.push(envelope("events_api", event, 1))
    await rig.settle()
    (card,) = rig.card_calls()
    click = rig.click_payload(card)
    before = await rig.snapshot(card_id_of(card))
    calls = len(rig.standin.calls)
    bad = make(event, click)
    ack = await rig.standin.push(envelope(kind, bad, 2))
    assert ack == {"envelope_id": "00000000-0000-4000-8000-000000000002"}
    await rig.settle()
    assert len(rig.standin.calls) == calls  # nothing posted, updated or answered
    assert await rig.snapshot(card_id_of(card)) == before
    assert any("refused a " + kind in r.getMessage() for r in caplog.records)
    ack = await rig.standin.push(envelope("interactive", click, 3))  # still serving: the real click works
    await rig.settle()
    assert [g.name for g in await rig.approvals.grants(user=OWNER_KEY)] == ["example.org"]


def card_id_of(card: Any) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])
