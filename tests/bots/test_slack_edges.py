"""Slack at the edges, through the running server with signed requests: R17 (a person is their
enterprise + workspace + user id; the same user id elsewhere is a stranger) and malformed input
that must be a plain 4xx, never a 500 or a silently dropped click."""

from __future__ import annotations

import copy
import json
from typing import Any
from urllib.parse import urlencode

import pytest

from chat_approvals.bots.slack_shapes import MAX_VALUE
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.identity import SlackUser
from tests.support import slack_payloads as P
from tests.support.raw_http import raw_request
from tests.support.slack_rig import DM, OWNER, SlackRig, buttons
from tests.support.slack_standin import Call

GRID = "E0GRID0001"
OTHER_TEAM = "T0OTHER01"


async def grid_card(rig: SlackRig, *, enterprise: str | None) -> Call:
    """The owner asks in a DM of workspace TEAM (of Grid org `enterprise`, when given)."""
    ts = rig.next_ts()
    event = P.message_im(text="download <https://example.org/a.csv>", user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
    if enterprise:
        event["enterprise_id"] = enterprise
        event["authorizations"][0]["enterprise_id"] = enterprise
    assert await rig.send(*P.json_body(event)) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
    await rig.settle()
    return rig.card_calls()[-1]


def card_id_of(card: Call) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])


def from_elsewhere(payload: dict[str, Any], how: str, enterprise: str | None) -> dict[str, Any]:
    p = copy.deepcopy(payload)
    if enterprise:
        p["enterprise"] = {"id": enterprise, "name": "grid"}
        p["team"]["enterprise_id"] = enterprise
    if how == "another workspace" or how == "another workspace of the same Grid org":
        p["team"]["id"] = p["user"]["team_id"] = OTHER_TEAM
    elif how == "a Slack Connect user from another workspace":
        p["user"]["team_id"] = OTHER_TEAM  # clicks in the owner's channel, but is someone else's user
    elif how == "team null":
        p["team"] = None
    elif how == "another Grid org":
        p["enterprise"] = {"id": "E0OTHER001", "name": "other"}
        p["team"]["enterprise_id"] = "E0OTHER001"
    elif how == "no enterprise":
        p["enterprise"] = None
        p["team"].pop("enterprise_id", None)
    return p


CASES = [
    ("another workspace", None),
    ("a Slack Connect user from another workspace", None),
    ("team null", None),
    ("another workspace of the same Grid org", GRID),
    ("another Grid org", GRID),
    ("no enterprise", GRID),
    ("team null", GRID),
]


@pytest.mark.parametrize(("how", "enterprise"), CASES)
async def test_r17_the_same_user_id_from_elsewhere_is_a_stranger(
    rig: SlackRig, how: str, enterprise: str | None
) -> None:
    card = await grid_card(rig, enterprise=enterprise)
    owner = SlackUser(enterprise, P.TEAM, OWNER).key
    before = await rig.snapshot(card_id_of(card))
    assert before["pointer"]["owner"] == owner
    status, _ = await rig.click(from_elsewhere(rig.click_payload(card), how, enterprise))
    assert status == 200
    await rig.settle()
    after = await rig.snapshot(card_id_of(card))
    assert after == before  # no claim, no grant, no audit entry
    assert await rig.approvals.grants(user=owner) == []
    (told,) = rig.standin.of("chat.postEphemeral")
    assert "not yours" in json.dumps(told.args["blocks"])
    assert not rig.standin.of("chat.update")
    # The owner, from the owner's own workspace (and org), still can: the card stayed answerable.
    status, _ = await rig.click(from_elsewhere(rig.click_payload(card), "the owner", enterprise))
    await rig.settle()
    done = await rig.snapshot(card_id_of(card))
    assert done["pointer"]["state"] == "done"
    assert [g.name for g in await rig.approvals.grants(user=owner)] == ["example.org"]
    answered = [e for e in done["audit"] if e["kind"] == "answered"]
    assert [e["actor"] for e in answered] == [owner]


async def test_r17_slash_commands_see_only_their_own_workspaces_grants(rig: SlackRig) -> None:
    card = await grid_card(rig, enterprise=None)
    await rig.click(rig.click_payload(card))
    await rig.settle()
    owner = SlackUser(None, P.TEAM, OWNER).key
    assert [g.name for g in await rig.approvals.grants(user=owner)] == ["example.org"]
    # The same user id in another workspace: lists nothing, revokes nothing.
    for text in ("list", "revoke all"):
        fields = P.slash_command(text=text, user=OWNER, channel=DM, response_url=rig.standin.response_url("cmd"))
        fields["team_id"] = OTHER_TEAM
        assert (await rig.send(*P.form_body(fields)))[0] == 200
        await rig.settle()
    replies = [json.dumps(c.args) for c in rig.standin.of("response_url")]
    assert replies and all("example.org" not in r for r in replies)
    assert [g.name for g in await rig.approvals.grants(user=owner)] == ["example.org"]


# ----------------------------------------------------------------------------- no 500s


async def test_malformed_requests_are_a_plain_4xx(rig: SlackRig) -> None:
    card = await grid_card(rig, enterprise=None)
    before = await rig.snapshot(card_id_of(card))
    payload = json.dumps(rig.click_payload(card))
    cases: dict[str, tuple[bytes, str, dict[str, str]]] = {
        "not UTF-8": (b"payload=\xff\xfe" + payload.encode(), "application/x-www-form-urlencoded", {}),
        "JSON array": (b"[1, 2]", "application/json", {}),
        "JSON array without its type": (b'[{"type": "block_actions"}]', "text/plain", {}),
        "payload not JSON": (b"payload=%7Bnot-json", "application/x-www-form-urlencoded", {}),
        "payload a JSON array": (urlencode({"payload": "[1]"}).encode(), "application/x-www-form-urlencoded", {}),
        "deep JSON": (b"[" * 100_000 + b"]" * 100_000, "application/json", {}),
    }
    for name, (body, ctype, extra) in cases.items():
        status, text = await rig.send(body, ctype, headers=extra)  # correctly signed
        # 400 from the server; a body Bolt reads as an empty form is its own 404 "unhandled request"
        assert status == (404 if ctype == "text/plain" else 400), (name, status, text)
        assert "error" in json.loads(text)
    unsigned: dict[str, dict[str, str]] = {
        "timestamp not a number": {"X-Slack-Request-Timestamp": "soon"},
        "timestamp in other digits": {"X-Slack-Request-Timestamp": "١٢٣٤٥"},
        "signature not hex": {"X-Slack-Signature": "v0=zz"},
    }
    body = urlencode({"payload": payload}).encode()
    for name, headers in unsigned.items():
        status, text = await rig.send(body, "application/x-www-form-urlencoded", headers=headers)
        assert status == 401, (name, status, text)
    # Shapes Bolt would read ids out of before checking any signature: refused unsigned.
    assert rig.session is not None
    for raw in (b'{"team": 5}', b'{"authorizations": 5}', b"authorizations=x&team_id=T1", b'{"enterprise": [1]}'):
        async with rig.session.post(rig.url, data=raw, headers={"Content-Type": "application/json"}) as r:
            assert r.status == 401, raw
    # Header bytes that are not UTF-8 (no client library will send them: raw socket).
    base = f"http://127.0.0.1:{rig.port}"
    status, _ = await raw_request(
        base,
        "POST",
        b"/slack/events",
        headers={
            b"Content-Type": b"application/x-www-form-urlencoded",
            b"X-Slack-Request-Timestamp": b"\xff\xfe",
            b"X-Slack-Signature": b"v0=\xff" + b"a" * 63,
        },
        body=body,
    )
    assert status == 401
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    assert not rig.standin.of("chat.update")


async def test_slacks_unsigned_ssl_check_is_still_answered(rig: SlackRig) -> None:
    assert rig.session is not None
    async with rig.session.post(
        rig.url, data=b"ssl_check=1&token=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    ) as r:
        assert (r.status, await r.text()) == (200, "")


@pytest.mark.parametrize(
    "card_id",
    ["{id}/1", "{id}%2F1", "%2e%2e", "..", "{id}\x00", "c_" + "a" * 4998, "{id}.json", ""],
)
async def test_a_card_id_not_of_the_minted_shape_is_refused_before_use(rig: SlackRig, card_id: str) -> None:
    card = await grid_card(rig, enterprise=None)
    real = card_id_of(card)
    secret = json.loads(buttons(card.args["blocks"])[0]["value"])["secret"]
    await rig.click(rig.click_payload(card))  # card A is answered: its answer object now exists
    await rig.settle()
    before = await rig.snapshot(real)
    ephemerals = len(rig.standin.of("chat.postEphemeral"))
    payload = rig.click_payload(card)
    payload["actions"][0]["value"] = json.dumps({"card": card_id.format(id=real), "secret": secret})
    too_long = len(payload["actions"][0]["value"]) > MAX_VALUE  # longer than Slack lets a button carry
    assert (await rig.click(payload))[0] == (400 if too_long else 200)
    await rig.settle()
    assert await rig.snapshot(real) == before  # no replay of card A's answer ("replayed" would be audited)
    told = rig.standin.of("chat.postEphemeral")[ephemerals:]
    if too_long:
        assert told == []  # refused at the ingress (bots/slack_shapes.py), before the front end
    else:
        assert len(told) == 1 and "could not be read" in json.dumps(told[0].args["blocks"])


async def test_approve_button_value_is_still_readable(rig: SlackRig) -> None:
    """The control for the test above: the button as minted is what a click carries."""
    card = await grid_card(rig, enterprise=None)
    value = json.loads(next(b for b in buttons(card.args["blocks"]) if b["action_id"] == sb.ACTION_APPROVE)["value"])
    assert set(value) == {"card", "secret"} and value["card"] == card_id_of(card)
