"""Issue 28: the Slack welcome, with two example prompts, once per chat: when a person opens the
bot's DM (app_home_opened, Messages tab) or the bot is added to a channel (member_joined_channel
for the bot itself). Signed events over real HTTP to the real server; the Slack stand-in records
what was posted."""

from __future__ import annotations

from typing import Any

from chat_approvals.cards import wording as words
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, SlackRig
from tests.support.slack_standin import BOT_USER

CHANNEL = "C0PROJECTS"


def envelope(event: dict[str, Any], event_id: str) -> dict[str, Any]:
    """An event_callback as Slack sends it (the shape of fixtures/slack/event_message_im_docs.json)."""
    return {
        "token": "one-long-verification-token",
        "team_id": P.TEAM,
        "api_app_id": "A0PNCHHK2",
        "event": event,
        "type": "event_callback",
        "authorizations": [{"team_id": P.TEAM, "user_id": BOT_USER, "is_bot": True, "is_enterprise_install": False}],
        "event_id": event_id,
        "event_time": 1800000000,
    }


def home_opened(event_id: str, tab: str = "messages") -> dict[str, Any]:
    ev = {"type": "app_home_opened", "user": OWNER, "channel": DM, "tab": tab, "event_ts": "1800000000.000100"}
    return envelope(ev, event_id)


def joined(event_id: str, user: str = BOT_USER, channel: str = CHANNEL) -> dict[str, Any]:
    ev = {
        "type": "member_joined_channel",
        "user": user,
        "channel": channel,
        "channel_type": "C",
        "team": P.TEAM,
        "inviter": OWNER,
        "event_ts": "1800000000.000200",
    }
    return envelope(ev, event_id)


async def send(rig: SlackRig, payload: dict[str, Any]) -> None:
    assert await rig.send(*P.json_body(payload)) == (200, "")
    await rig.settle()


def welcomes(rig: SlackRig, channel: str) -> list[dict[str, Any]]:
    return [
        c.args
        for c in rig.standin.of("chat.postMessage")
        if c.args.get("channel") == channel and "Hello!" in str(c.args.get("text"))
    ]


async def test_opening_the_dm_welcomes_once_with_two_example_prompts(rig: SlackRig) -> None:
    await send(rig, home_opened("EvHOME1"))
    (first,) = welcomes(rig, DM)
    assert words.DEMO_FETCH in first["text"] and words.DEMO_NOTE in first["text"]
    assert "thread_ts" not in first  # a message of its own, not a reply
    await send(rig, home_opened("EvHOME2"))  # opened again later: a new event, no second welcome
    await send(rig, home_opened("EvHOME3", tab="home"))  # the Home tab is not the chat
    rig.clock.advance(30 * 86400)  # a month on (past the one-day event dedupe), after a sweep
    await rig.approvals.sweep()
    await send(rig, home_opened("EvHOME4"))
    assert len(welcomes(rig, DM)) == 1


async def test_the_bot_added_to_a_channel_welcomes_once_and_people_joining_get_nothing(rig: SlackRig) -> None:
    await send(rig, joined("EvJOIN1", user="U0SOMEONE"))
    assert welcomes(rig, CHANNEL) == []
    await send(rig, joined("EvJOIN2"))
    (first,) = welcomes(rig, CHANNEL)
    assert words.DEMO_FETCH in first["text"]
    await send(rig, joined("EvJOIN3"))  # removed and added again: still once per chat
    await send(rig, joined("EvJOIN4", channel="C0OTHERS"))
    assert len(welcomes(rig, CHANNEL)) == 1 and len(welcomes(rig, "C0OTHERS")) == 1


async def test_a_welcome_event_with_a_forged_channel_posts_nothing(rig: SlackRig) -> None:
    await send(rig, joined("EvJOIN9", channel="C0X>*<!channel>"))
    forged = home_opened("EvHOME9")
    forged["event"]["channel"] = "D0" + "A" * 5000
    await send(rig, forged)
    assert rig.standin.of("chat.postMessage") == []
