"""`/approvals` (list, revoke HOST, revoke all, help, bad argument) and the list's Revoke buttons (R14),
over signed HTTP to the running server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from slack_sdk.models.blocks import Block

from chat_approvals.cards import slack_blocks as sb
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OTHER, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call


async def approve(rig: SlackRig, url: str) -> None:
    before = len(rig.card_calls())
    await rig.dm(f"download {url}")
    await rig.settle()
    card = rig.card_calls()[before]
    await rig.click(rig.click_payload(card))
    await rig.settle()


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig()) as r:
        # three approvals in three chats (each top-level DM starts its own thread)
        await approve(r, "https://example.org/a.csv")
        await approve(r, "https://example.org/b.csv")
        await approve(r, "https://other.org/c.csv")
        yield r


def hooks(rig: SlackRig) -> list[Call]:
    calls = rig.standin.of("response_url")
    for c in calls:
        assert_valid_blocks(c)
    return calls


async def names(rig: SlackRig) -> list[str]:
    return sorted(g.name for g in await rig.approvals.grants(user=OWNER_KEY))


async def test_r14_list_shows_grants_by_chat_with_revoke_buttons(rig: SlackRig) -> None:
    assert await rig.command("") == (200, "")  # acked at once, the list follows via response_url
    await rig.settle()
    (listing,) = hooks(rig)
    assert listing.args["response_type"] == "ephemeral"
    revokes = buttons(listing.args["blocks"])
    assert sorted(json.loads(b["value"])["name"] for b in revokes) == ["example.org", "example.org", "other.org"]
    assert len({json.loads(b["value"])["chat"] for b in revokes}) == 3
    assert json.dumps(listing.args["blocks"]).count(f"<#{DM}>") == 3


async def test_r14_list_is_per_user(rig: SlackRig) -> None:
    await rig.command("list", user=OTHER)
    await rig.settle()
    (listing,) = hooks(rig)
    assert not buttons(listing.args["blocks"]) and "approved nothing" in listing.args["text"]


async def test_r14_revoke_host_in_all_chats_takes_effect_at_once(rig: SlackRig) -> None:
    chats = {g.chat for g in await rig.approvals.grants(user=OWNER_KEY) if g.name == "example.org"}
    assert await rig.command("revoke example.org") == (200, "")
    await rig.settle()
    assert await names(rig) == ["other.org"]
    for chat in chats:
        assert not await rig.approvals.is_allowed(user=OWNER_KEY, chat=chat, kind="site", name="example.org")
    (said,) = hooks(rig)
    assert "Revoked" in said.args["text"] and "2 chats" in said.args["text"]


async def test_r14_revoke_all(rig: SlackRig) -> None:
    await rig.command("revoke all")
    await rig.settle()
    assert await names(rig) == []
    await rig.command("revoke all")
    await rig.settle()
    assert "nothing to revoke" in hooks(rig)[-1].args["text"]


@pytest.mark.parametrize("text", ["frobnicate", "revoke", "revoke a b", "revoke <!channel>"])
async def test_bad_argument_gets_the_usage_line_and_changes_nothing(rig: SlackRig, text: str) -> None:
    before = await names(rig)
    status, body = await rig.command(text)
    await rig.settle()
    assert status == 200
    reply = json.loads(body)  # the ack itself is the ephemeral reply
    assert reply["response_type"] == "ephemeral" and reply["text"].startswith("Usage:")
    assert [b.to_dict() for b in Block.parse_all(reply["blocks"])] == reply["blocks"]
    assert await names(rig) == before and not hooks(rig)


async def test_help(rig: SlackRig) -> None:
    status, body = await rig.command("help")
    assert status == 200 and "revoke all" in json.dumps(json.loads(body)["blocks"])


async def test_r14_revoke_button_replaces_the_list(rig: SlackRig) -> None:
    await rig.command("")
    await rig.settle()
    (listing,) = hooks(rig)
    target = next(b for b in buttons(listing.args["blocks"]) if json.loads(b["value"])["name"] == "other.org")
    payload = P.block_actions(
        action_id=sb.ACTION_REVOKE, value=target["value"], user=OWNER, channel=DM, message_ts="1.1",
        response_url=rig.standin.response_url("list"),
    )  # fmt: skip
    payload["container"]["is_ephemeral"] = True
    assert await rig.click(payload) == (200, "")
    await rig.settle()
    assert await names(rig) == ["example.org", "example.org"]
    replaced = hooks(rig)[-1]
    assert replaced.args["replace_original"] is True and "Revoked" in json.dumps(replaced.args["blocks"])
    assert len(buttons(replaced.args["blocks"])) == 2


async def test_r14_revoke_button_cannot_reach_another_users_grants(rig: SlackRig) -> None:
    await rig.command("")
    await rig.settle()
    target = buttons(hooks(rig)[0].args["blocks"])[0]
    payload = P.block_actions(
        action_id=sb.ACTION_REVOKE, value=target["value"], user=OTHER, channel=DM, message_ts="1.1",
        response_url=rig.standin.response_url("list"),
    )  # fmt: skip
    await rig.click(payload)
    await rig.settle()
    assert len(await names(rig)) == 3  # revocation is keyed by the clicker, who owns nothing here
