"""Issue 33 through Slack: the real server's timer loop, the injected clock, signed requests and
the stand-in Web API. A reminder at 10 m and at 1 h, each once, mentioning only those who have
not voted; an answer before the next timer stops the rest; expiry updates every copy of the card
in place, once, and the card is refused after it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import pytest

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.identity import SlackUser
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, SlackRig, assert_valid_blocks, buttons, running
from tests.support.slack_standin import Call

ALICE, BOB, CAROL, SEC = "U0ALICE", "U0BOB", "U0CAROL", "U0SECLEAD"
APPROVALS_CHANNEL = "C0APPROVALS"
SECURITY_CHANNEL = "C0SECURITY"
TICK = 0.05  # the timer loop's look, in real seconds (the clock itself is the test's)
MIN = 60.0
POLICY = f"""\
[defaults]
expires_after = "2h"
remind_after = ["10m", "1h"]

[approvers]
slack = ["{ALICE}", "{BOB}", "{CAROL}"]

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
quorum = 2

[[rule]]
match = "example.org"
escalate_after = "30m"
escalate_to = ["{SEC}"]
escalate_channel = "{SECURITY_CHANNEL}"

[routing]
slack_channel = "{APPROVALS_CHANNEL}"
"""
CORP = "download <https://files.corp.example.com/report.csv>"
ORG = "download <https://example.org/data.csv>"


@pytest.fixture
async def rig() -> AsyncIterator[SlackRig]:
    async with running(SlackRig(policy=POLICY, timers=True, server={"timer_every": TICK})) as r:
        yield r


def text_of(c: Call) -> str:
    return json.dumps(c.args.get("blocks")) + str(c.args.get("text"))


def reminders(rig: SlackRig) -> list[Call]:
    out = [c for c in rig.standin.of("chat.postMessage") if "Reminder for" in text_of(c)]
    for c in out:
        assert_valid_blocks(c)
    return out


async def card(rig: SlackRig, text: str) -> tuple[Call, Call]:
    before = len(rig.card_calls())
    assert await rig.dm(text) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= before + 2)
    await rig.settle()
    new = rig.card_calls()[before:]
    return next(c for c in new if c.args["channel"] == DM), next(c for c in new if c.args["channel"] != DM)


async def at(rig: SlackRig, seconds: float, until: Callable[[], bool] | None = None) -> None:
    """Move the clock to `seconds` after the card was made and let the timer loop look (until
    `until` holds, or for a few looks when nothing is expected)."""
    rig.clock.set(rig.start + seconds)
    if until is not None:
        await rig.standin.wait_for(lambda s: until())
    else:
        await asyncio.sleep(TICK * 8)
    await rig.settle()


async def audit_kinds(rig: SlackRig, card_call: Call) -> list[str]:
    card_id = card_call.args["blocks"][-1]["elements"][0]["text"].split("`")[1]
    p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id)
    chat = p.chat if p is not None else ""
    return [e.kind for e in await rig.approvals.audit(chat) if e.card_id == card_id]


async def test_reminders_at_10m_and_1h_once_each_only_to_those_who_have_not_voted(rig: SlackRig) -> None:
    rig.start = rig.clock.now()
    thread, routed = await card(rig, CORP)
    await at(rig, 9 * MIN)
    assert reminders(rig) == []
    # Alice votes (1 of 2): she is not reminded; Bob and Carol are
    assert await rig.click(rig.click_payload(routed, user=ALICE)) == (200, "")
    await rig.settle()
    await at(rig, 10 * MIN, until=lambda: len(reminders(rig)) == 2)
    first = reminders(rig)
    assert {c.args["channel"] for c in first} == {DM, APPROVALS_CHANNEL}  # under each copy, in its thread
    assert {c.args.get("thread_ts") for c in first} == {thread.args["thread_ts"], routed.result["ts"]}
    for c in first:
        t = text_of(c)
        assert f"<@{BOB}>" in t and f"<@{CAROL}>" in t
        assert f"<@{ALICE}>" not in t and f"<@{OWNER}>" not in t  # voted / may not answer under "approvers"
    await at(rig, 20 * MIN)
    assert len(reminders(rig)) == 2  # once
    await at(rig, 60 * MIN, until=lambda: len(reminders(rig)) == 4)
    await at(rig, 110 * MIN)
    assert len(reminders(rig)) == 4
    kinds = await audit_kinds(rig, thread)
    assert kinds.count("card.reminder") == 2


async def test_an_answer_between_the_reminder_and_the_escalation_stops_both(rig: SlackRig) -> None:
    rig.start = rig.clock.now()
    thread, routed = await card(rig, ORG)
    await at(rig, 10 * MIN, until=lambda: len(reminders(rig)) == 2)
    assert all(f"<@{OWNER}>" in text_of(c) for c in reminders(rig))  # the requester answers this one
    rig.clock.set(rig.start + 15 * MIN)
    assert await rig.click(rig.click_payload(thread, user=OWNER)) == (200, "")
    await rig.settle()
    posted = len(rig.standin.of("chat.postMessage"))
    await at(rig, 125 * MIN)
    assert len(reminders(rig)) == 2
    assert len(rig.standin.of("chat.postMessage")) == posted  # no reminder, no escalation post
    kinds = await audit_kinds(rig, thread)
    assert "card.escalated" not in kinds and kinds.count("card.reminder") == 1 and "expired" not in kinds


async def test_expiry_denies_once_updates_every_copy_and_the_agents_reply_reaches_the_thread(rig: SlackRig) -> None:
    rig.start = rig.clock.now()
    thread, routed = await card(rig, ORG)
    copies = {(thread.args["channel"], thread.result["ts"]), (routed.args["channel"], routed.result["ts"])}

    def expired_updates() -> list[Call]:
        return [
            c
            for c in rig.standin.of("chat.update")
            if "the agent was told" in text_of(c) and (c.args["channel"], c.args["ts"]) in copies
        ]

    def agent_replies() -> list[Call]:
        return [c for c in rig.standin.of("chat.postMessage") if "Not downloaded" in text_of(c)]

    await at(rig, 119 * MIN)
    assert expired_updates() == [] and agent_replies() == []
    # just before the expiry shown on the card: the system denies it and the paused turn is told
    await at(rig, 120 * MIN - 5, until=lambda: len(expired_updates()) == 2 and len(agent_replies()) == 1)
    for c in expired_updates():
        assert_valid_blocks(c)
        assert sb.ACTION_APPROVE not in json.dumps(c.args["blocks"])  # read-only now
    reply = agent_replies()[0]
    assert (reply.args["channel"], reply.args.get("thread_ts")) == (DM, thread.args["thread_ts"])
    await at(rig, 180 * MIN)
    assert len(expired_updates()) == 2 and len(agent_replies()) == 1  # once
    kinds = await audit_kinds(rig, thread)
    assert kinds.count("expired") == 1 and kinds.count("answered") == 1 and kinds.count("claim_won") == 1
    # an expired card never counts as an approval: a late click changes nothing, nothing is granted
    updates = len(rig.standin.of("chat.update"))
    assert await rig.click(rig.click_payload(thread, user=OWNER)) == (200, "")
    await rig.settle()
    assert await rig.approvals.grants(user=SlackUser(None, P.TEAM, OWNER).key) == []
    assert (await audit_kinds(rig, thread)).count("answered") == 1
    assert len(agent_replies()) == 1
    assert len(rig.standin.of("chat.update")) == updates  # the card still says it expired


async def test_an_expiry_timer_that_fires_late_still_expires_every_copy(rig: SlackRig) -> None:
    rig.start = rig.clock.now()
    thread, routed = await card(rig, ORG)
    await at(
        rig,
        121 * MIN,  # the loop was down past the expiry: too late to claim; the card is expired in place
        until=lambda: len([c for c in rig.standin.of("chat.update") if "the agent was told" in text_of(c)]) == 2,
    )
    kinds = await audit_kinds(rig, thread)
    assert kinds.count("expired") == 1 and "answered" not in kinds


async def test_escalation_at_30m_posts_to_the_escalation_channel_and_lets_its_approver_resume_once(
    rig: SlackRig,
) -> None:
    rig.start = rig.clock.now()
    thread, routed = await card(rig, ORG)
    before = await rig.snapshot(_card_id(thread))
    # not yet escalated: the escalation approver is a stranger to this card (refused, nothing changes)
    rig.clock.set(rig.start + 29 * MIN)
    assert await rig.click(rig.click_payload(routed, user=SEC)) == (200, "")
    await rig.settle()
    after = await rig.snapshot(_card_id(thread))
    assert after["pointer"] == before["pointer"] and after["grants"] == before["grants"] == []

    def escalation_posts() -> list[Call]:
        return [c for c in rig.card_calls() if c.args["channel"] == SECURITY_CHANNEL]

    await at(rig, 30 * MIN, until=lambda: len(escalation_posts()) == 1)
    posted = escalation_posts()[0]
    assert_valid_blocks(posted)
    assert f"escalated to <@{SEC}>" in text_of(posted)
    updated = {(c.args["channel"], c.args["ts"]) for c in rig.standin.of("chat.update") if "escalated to" in text_of(c)}
    assert updated == {(DM, thread.result["ts"]), (APPROVALS_CHANNEL, routed.result["ts"])}  # every copy says so
    kinds = await audit_kinds(rig, thread)
    assert kinds.count("card.escalated") == 1
    # the old copies' buttons no longer work (the card was reissued with a fresh secret, R19)
    assert await rig.click(rig.click_payload(thread, user=OWNER)) == (200, "")
    await rig.settle()
    assert (await audit_kinds(rig, thread)).count("answered") == 0
    # the 1 h reminder goes under every copy (the escalated one too) and names the escalation approver
    await at(rig, 60 * MIN, until=lambda: len(reminders(rig)) == 2 + 3)
    late = reminders(rig)[2:]
    assert {c.args["channel"] for c in late} == {DM, APPROVALS_CHANNEL, SECURITY_CHANNEL}
    assert all(f"<@{SEC}>" in text_of(c) and f"<@{OWNER}>" in text_of(c) for c in late)
    # the escalation approver answers from the escalation channel's copy: the turn resumes, once
    assert await rig.click(rig.click_payload(posted, user=SEC)) == (200, "")
    await rig.settle()
    assert await rig.click(rig.click_payload(posted, user=SEC)) == (200, "")
    await rig.settle()
    kinds = await audit_kinds(rig, thread)
    assert kinds.count("answered") == 1 and kinds.count("claim_won") == 1
    outcome = [c for c in rig.standin.of("chat.update") if "Approved" in text_of(c)]
    assert {(c.args["channel"], c.args["ts"]) for c in outcome} >= {
        (DM, thread.result["ts"]),
        (SECURITY_CHANNEL, posted.result["ts"]),
    }  # the outcome reaches the escalation copy too
    await at(rig, 125 * MIN)
    assert len(escalation_posts()) == 1


def _card_id(c: Call) -> str:
    return str(json.loads(next(b["value"] for b in buttons_of(c) if b["action_id"] == sb.ACTION_APPROVE))["card"])


def buttons_of(c: Call) -> list[dict[str, str]]:
    return buttons(c.args.get("blocks") or [])
