"""A card shown again leaves no live buttons behind (a follow-up of issue 10, finding 6), through the
running Slack server with signed requests and the stand-in Web API. When the owner's next message
in the thread re-offers their open request (core/protocol/turns.py: a new secret, the old one stops
working), the earlier message, and its copy in the approvers' channel when routed, is updated to a
read-only "shown again below"; a click that still carries the old secret is refused and changes
nothing (R19, R9); the new card resumes once (R12)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from tests.bots.test_policy_slack import ALICE, APPROVALS_CHANNEL, BOB, ORG, POLICY
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons
from tests.support.slack_standin import Call

ASK = "download <https://example.org/a.csv>"


@pytest.fixture
async def routed_rig() -> AsyncIterator[SlackRig]:
    r = await SlackRig(policy=POLICY).start()
    r.standin.usergroups["S0SECOPS"] = [BOB]
    try:
        yield r
    finally:
        await r.stop()


def card_id_of(card: Call) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])


def updates_of(rig: SlackRig, card: Call) -> list[Call]:
    return [u for u in rig.standin.of("chat.update") if (u.args["channel"], u.args["ts"]) == key(card)]


def key(card: Call) -> tuple[str, str]:
    return str(card.args["channel"]), str(card.result["ts"])


def assert_shown_again(rig: SlackRig, old: Call) -> None:
    (update,) = updates_of(rig, old)
    blocks = assert_valid_blocks(update)
    assert not buttons(blocks) and not [b for b in blocks if b["type"] in ("actions", "input")]  # read-only
    assert "Shown again below" in json.dumps(blocks) and "example.org" in json.dumps(blocks)
    assert rig.standin.messages[key(old)]["blocks"] == blocks  # what Slack now shows there


async def test_r19_the_owners_next_message_makes_the_old_card_read_only_and_the_new_one_resumes_once(
    rig: SlackRig,
) -> None:
    (old,) = await rig.owner_says(ASK)
    thread = str(old.args["thread_ts"])
    (new,) = await rig.owner_says("hello? still there?", thread)
    assert new.args["thread_ts"] == thread and card_id_of(new) == card_id_of(old)
    assert buttons(assert_valid_blocks(new))  # the new card is answerable
    assert_shown_again(rig, old)
    assert not updates_of(rig, new)
    card_id = card_id_of(old)
    before = await rig.snapshot(card_id)
    assert before["pointer"]["card_location"]["ts"] == new.result["ts"]  # later updates go to the new card

    # R19: the old copy's button (say a client that never got the update) is refused; nothing changes.
    assert (await rig.click(rig.click_payload(old)))[0] == 200
    await rig.settle()
    (told,) = rig.standin.of("chat.postEphemeral")
    assert "unknown or no longer open" in json.dumps(told.args["blocks"])
    assert await rig.snapshot(card_id) == before
    assert len(rig.standin.of("chat.update")) == 1

    # The new card resumes, once; a second click replays.
    await rig.click(rig.click_payload(new))
    await rig.settle()
    after = await rig.snapshot(card_id)
    assert after["pointer"]["state"] == "done"
    assert [g.name for g in await rig.approvals.grants(user=OWNER_KEY)] == ["example.org"]
    outcome = updates_of(rig, new)[-1]
    assert "Approved" in json.dumps(outcome.args["blocks"]) and not buttons(assert_valid_blocks(outcome))
    assert len(updates_of(rig, old)) == 1  # the outcome went to the new card, not the old one
    await rig.click(rig.click_payload(new))
    await rig.settle()
    kinds = [e.kind for e in await rig.approvals.audit(after["pointer"]["chat"])]
    assert kinds.count("claim_won") == 1 and kinds.count("reoffered") == 1


async def test_r19_each_re_offer_updates_the_copy_before_it(rig: SlackRig) -> None:
    """The location is overwritten on every re-offer, so the next one updates the right message."""
    (first,) = await rig.owner_says(ASK)
    thread = str(first.args["thread_ts"])
    (second,) = await rig.owner_says("hello?", thread)
    (third,) = await rig.owner_says("anyone?", thread)
    assert_shown_again(rig, first)
    assert_shown_again(rig, second)
    assert not updates_of(rig, third) and buttons(assert_valid_blocks(third))


async def test_a_re_offer_that_cannot_be_posted_leaves_the_old_card_alone(rig: SlackRig) -> None:
    """Updated only after the new card is posted: no "shown again below" pointing at nothing."""
    (old,) = await rig.owner_says(ASK)
    rig.standin.fail["chat.postMessage"] = ["channel_not_found"]  # the new card's post
    ts = rig.next_ts()
    payload = P.message_im(text="hello?", user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
    payload["event"]["thread_ts"] = old.args["thread_ts"]
    assert await rig.send(*P.json_body(payload)) == (200, "")
    await rig.standin.wait_for(lambda s: "withdrawn" in str(s.of("chat.postMessage")[-1].args.get("text")))
    await rig.settle()
    assert len(rig.standin.of("chat.postMessage")) == 3  # the card, the failed re-post, "withdrawn"
    assert not updates_of(rig, old)


async def test_r19_a_routed_card_shown_again_makes_both_old_copies_read_only(routed_rig: SlackRig) -> None:
    rig = routed_rig
    old = await rig.owner_says(ORG)
    old_thread, old_routed = pick(old)
    new = await rig.owner_says("hello?", str(old_thread.args["thread_ts"]))
    new_thread, new_routed = pick(new)
    assert buttons(assert_valid_blocks(new_thread)) and buttons(assert_valid_blocks(new_routed))
    assert_shown_again(rig, old_thread)
    assert_shown_again(rig, old_routed)
    card_id = card_id_of(old_thread)
    before = await rig.snapshot(card_id)
    loc = before["pointer"]["card_location"]
    assert (loc["ts"], loc["routed_ts"]) == (new_thread.result["ts"], new_routed.result["ts"])

    # An approver clicking the old copy in the approvers' channel is refused; nothing changes.
    await rig.click(rig.click_payload(old_routed, user=ALICE))
    await rig.settle()
    told = [c for c in rig.standin.of("chat.postEphemeral") if c.args["user"] == ALICE]
    assert len(told) == 1 and "unknown or no longer open" in json.dumps(told[0].args["blocks"])
    assert await rig.snapshot(card_id) == before

    # The new copy resumes; both new copies show the outcome, the old ones stay as they were.
    await rig.click(rig.click_payload(new_routed, user=ALICE))
    await rig.settle()
    assert (await rig.snapshot(card_id))["pointer"]["state"] == "done"
    for copy in (new_thread, new_routed):
        assert "Approved" in json.dumps(updates_of(rig, copy)[-1].args["blocks"])
    assert len(updates_of(rig, old_thread)) == len(updates_of(rig, old_routed)) == 1


def pick(cards: list[Call]) -> tuple[Call, Call]:
    """(the card in the requester's thread, its copy in the approvers' channel)."""
    thread = next(c for c in cards if c.args["channel"] == DM)
    routed = next(c for c in cards if c.args["channel"] == APPROVALS_CHANNEL)
    return thread, routed
