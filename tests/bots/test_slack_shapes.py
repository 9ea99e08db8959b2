"""Signed Slack bodies whose shape Bolt or the click path cannot read are a 400 through the running
server (issue 27.3), and text that is not valid Unicode is refused before any turn or claim (R20,
issue 27.1). Each case was a 500 or a RecursionError before."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chat_approvals.cards import slack_blocks as sb
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, SlackRig

SURROGATE = "\ud800"


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    r = await SlackRig().start()
    try:
        yield r
    finally:
        await r.stop()


def _event(rig: SlackRig, **changes: Any) -> dict[str, Any]:
    ts = rig.next_ts()
    payload = P.message_im(text="hello", user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
    payload.update(changes)
    return payload


def _click(**changes: Any) -> dict[str, Any]:
    p = P.block_actions(action_id=sb.ACTION_APPROVE, value="{}", user=OWNER, channel=DM, message_ts="1.000001")
    p.update(changes)
    return p


@pytest.mark.parametrize(
    "changes",
    [
        {"actions": []},
        {"actions": {"0": {"action_id": sb.ACTION_APPROVE, "value": "{}"}}},
        {"actions": [{"action_id": sb.ACTION_APPROVE, "value": "[" * 5000}]},
        {"actions": [5]},
        {"user": "U1"},
        {"type": 5},
        {"user": {"id": f"U{SURROGATE}", "team_id": P.TEAM}},
    ],
    ids=["empty", "object", "deep", "not-an-object", "user-string", "type-int", "surrogate"],
)
async def test_a_click_of_a_shape_slack_never_sends_is_a_400(rig: SlackRig, changes: dict[str, Any]) -> None:
    code, _ = await rig.click(_click(**changes))
    assert code == 400


@pytest.mark.parametrize("changes", [{"event": 5}, {"event": []}, {"type": ["event_callback"]}])
async def test_an_event_of_a_shape_slack_never_sends_is_a_400(rig: SlackRig, changes: dict[str, Any]) -> None:
    code, _ = await rig.send(*P.json_body(_event(rig, **changes)))
    assert code == 400


async def test_a_message_with_a_lone_surrogate_starts_no_turn(rig: SlackRig) -> None:
    payload = _event(rig)
    payload["event"]["text"] = f"download <https://example.org/a.csv> x{SURROGATE}y"
    code, _ = await rig.send(*P.json_body(payload))
    assert code == 400
    await rig.settle()
    assert rig.card_calls() == []


@pytest.mark.parametrize(
    "spoil",
    [
        lambda m: {**m, "text": f"no {SURROGATE}"},
        lambda m: {**m, f"k{SURROGATE}": "a key"},
        lambda m: {**m, "blocks": [*m["blocks"], {"deep": [{"x": ["\udfff"]}]}]},
    ],
    ids=["text", "key", "nested-low-surrogate"],
)
async def test_a_click_with_a_lone_surrogate_claims_nothing_and_the_card_stays_answerable(
    rig: SlackRig, spoil: Any
) -> None:
    """R20 on the click's fast path: the payload's JSON text is scanned for a surrogate escape
    (the only way one arrives), and one anywhere, a key included, is a 400 before any claim."""
    [card] = await rig.owner_says("download <https://example.org/a.csv>")
    buttons = [e for b in card.args["blocks"] if b["type"] == "actions" for e in b["elements"]]
    value = json.loads(next(e["value"] for e in buttons if "value" in e))
    card_id = str(value["card"])
    before = await rig.snapshot(card_id)
    bad = rig.click_payload(card, action=sb.ACTION_DENY)
    bad["message"] = spoil(bad["message"])
    assert (await rig.click(bad))[0] == 400
    await rig.settle()
    assert await rig.snapshot(card_id) == before
    assert (await rig.click(rig.click_payload(card)))[0] == 200
    await rig.settle()
    kinds = [e["kind"] for e in (await rig.snapshot(card_id))["audit"]]
    assert kinds.count("claim_won") == 1, kinds


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ('{"a": "\\ud800"}', True),
        ('{"a": "\\uDBFF\\uDFFF"}', True),  # a valid pair is looked at too (the walk clears it)
        ('{"\\uDC00": 1}', True),
        ('{"a": "\\u00e9 \u00e9 \\uD7FF \\uE000"}', False),
        ('{"a": "%ED%A0%80 \ufffd"}', False),  # what yarl makes of surrogate bytes: U+FFFD
    ],
)
def test_r20_a_surrogate_can_reach_a_decoded_payload_only_through_an_escape(text: str, holds: bool) -> None:
    from chat_approvals.core.text import first_invalid, holds_surrogate_escape

    assert holds_surrogate_escape(text) is holds
    if not holds:
        assert first_invalid(json.loads(text)) is None


async def test_a_click_form_sent_as_json_is_a_400_and_claims_nothing(rig: SlackRig) -> None:
    """The click path reads a `payload=` form once, itself; a body that says it is JSON is read as
    JSON (and a form is not JSON), never taken for a click."""
    [card] = await rig.owner_says("download <https://example.org/a.csv>")
    body, _ = P.interactive_body(rig.click_payload(card))
    code, _ = await rig.send(body, "application/json")
    assert code == 400
    await rig.settle()
    assert rig.standin.of("chat.update") == []  # no claim, no resume: the card was not touched
    code, _ = await rig.click(rig.click_payload(card))  # the same click as a form: resumed
    assert code == 200
    await rig.standin.wait_for(lambda s: len(s.of("chat.update")) >= 1, timeout=10)
