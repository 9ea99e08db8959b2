"""Slack front end end to end over real HTTP: signed Slack requests to the running aiohttp server,
the Web API answered by a local stand-in that records every call."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import chat_key
from tests.support import slack_payloads as P
from tests.support.agents import held_resume_factory, policy_factory, results_of
from tests.support.slack_rig import DM, OTHER, OWNER, OWNER_KEY, SlackRig, assert_valid_blocks, buttons
from tests.support.slack_standin import Call

URL = "https://example.org/data.csv"


def texts(calls: list[Call]) -> list[str]:
    return [json.dumps(c.args.get("blocks")) + str(c.args.get("text")) for c in calls]


async def card_for(rig: SlackRig, text: str = f"download <{URL}>") -> Call:  # as Slack sends links
    status, body = await rig.dm(text)
    assert (status, body) == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
    await rig.settle()
    return rig.card_calls()[-1]


def card_id_of(card: Call) -> str:
    value = buttons(card.args["blocks"])[0]["value"]
    card_id: str = json.loads(value)["card"]
    return card_id


def ephemerals_to(rig: SlackRig, user: str) -> list[Call]:
    calls = rig.standin.of("chat.postEphemeral")
    for c in calls:
        assert_valid_blocks(c)
    return [c for c in calls if c.args["user"] == user]


# ----------------------------------------------------------------------------- the happy path


async def test_r9_r12_dm_card_click_resume_update_reply_in_thread(rig: SlackRig) -> None:
    assert [c.method for c in rig.standin.calls] == ["auth.test"]  # warmed up before the first request
    card = await card_for(rig)
    blocks = assert_valid_blocks(card)
    assert card.args["channel"] == DM and card.args["thread_ts"]
    assert "example.org" in json.dumps(blocks) and "<!date^" in json.dumps(blocks)
    card_id = card_id_of(card)
    io = rig.store
    pointer = await io.run(io.rows.get_pointer_by_card, card_id)
    assert pointer is not None and pointer.card_location == {
        "channel": DM,
        "ts": card.result["ts"],
        "thread_ts": card.args["thread_ts"],
    }

    status, body = await rig.click(rig.click_payload(card))
    assert (status, body) == (200, "")  # acked at once, the resume runs after
    await rig.settle()

    updates = rig.standin.of("chat.update")
    assert [u.args["ts"] for u in updates] == [card.result["ts"]] * 2
    for u in updates:
        assert not buttons(assert_valid_blocks(u))
    assert "Resuming" in texts(updates)[0]
    assert "Approved" in texts(updates)[1] and f"<@{OWNER}>" in texts(updates)[1]
    replies = [c for c in rig.standin.of("chat.postMessage") if c is not card]
    assert len(replies) == 1 and replies[0].args["thread_ts"] == card.args["thread_ts"]
    assert_valid_blocks(replies[0])
    audit = [e.kind for e in await rig.approvals.audit(pointer.chat)]
    assert audit.count("claim_won") == 1
    assert [g.name for g in await rig.approvals.grants(user=OWNER_KEY)] == ["example.org"]
    assert not rig.standin.of("chat.postEphemeral")


async def test_r12_the_resumed_turn_does_not_wait_for_the_resuming_update(rig: SlackRig) -> None:
    """A slow chat.update delays neither the resume nor its durable finish; the outcome's update
    still comes after "Resuming…", so the card never ends on "Resuming…"."""
    card = await card_for(rig)
    card_id = card_id_of(card)
    io = rig.store
    slow = rig.standin.hold["chat.update"] = asyncio.Event()
    status, _ = await rig.click(rig.click_payload(card))
    assert status == 200

    async def finished() -> bool:
        p = await io.run(io.rows.get_pointer_by_card, card_id)
        return p is not None and p.state == "done"

    try:
        async with asyncio.timeout(10):
            while not await finished():  # the turn ran to its finish while Slack held the update
                await asyncio.sleep(0.01)
        assert not rig.standin.of("chat.update")
    finally:
        slow.set()  # a failure must not leave the server's updates hanging
    await rig.settle()
    updates = rig.standin.of("chat.update")
    assert len(updates) == 2 and "Resuming" in texts(updates)[0] and "Approved" in texts(updates)[1]
    assert len([c for c in rig.standin.of("chat.postMessage") if c is not card]) == 1  # the reply


async def test_r13_chained_card_is_a_new_message_in_the_thread(rig: SlackRig) -> None:
    card = await card_for(rig, f"download {URL} then https://b.example.com/x")
    await rig.click(rig.click_payload(card))
    await rig.settle()
    cards = rig.card_calls()
    assert len(cards) == 2 and cards[1].args["thread_ts"] == card.args["thread_ts"]
    assert "b.example.com" in json.dumps(cards[1].args["blocks"])
    await rig.click(rig.click_payload(cards[1]))
    await rig.settle()
    assert sorted(g.name for g in await rig.approvals.grants(user=OWNER_KEY)) == ["b.example.com", "example.org"]


async def test_r15_deny_updates_card_and_grants_nothing(rig: SlackRig) -> None:
    card = await card_for(rig)
    await rig.click(rig.click_payload(card, action=sb.ACTION_DENY))
    await rig.settle()
    assert "Denied" in texts(rig.standin.of("chat.update"))[-1]
    assert await rig.approvals.grants(user=OWNER_KEY) == []


# ----------------------------------------------------------------------------- concurrency


async def test_r10_twenty_concurrent_signed_clicks_resume_once(rig: SlackRig) -> None:
    card = await card_for(rig)
    payload = rig.click_payload(card)
    results = await asyncio.gather(*(rig.click(payload) for _ in range(20)))
    assert results == [(200, "")] * 20
    await rig.settle()
    io = rig.store
    pointer = await io.run(io.rows.get_pointer_by_card, card_id_of(card))
    assert pointer is not None and pointer.state == "done" and pointer.claim_count == 1
    audit = [e.kind for e in await rig.approvals.audit(pointer.chat)]
    assert audit.count("claim_won") == 1, audit
    assert sum("Resuming" in t for t in texts(rig.standin.of("chat.update"))) == 1
    assert len(rig.standin.of("auth.test")) == 1  # once, at startup, never per request
    replies = [c for c in rig.standin.of("chat.postMessage") if c is not card]
    assert len(replies) == 1, "the turn was resumed exactly once"
    told = ephemerals_to(rig, OWNER)
    assert len(told) == 19  # everyone else is told why, privately
    assert all(("already being resumed" in t) or ("already answered" in t) for t in texts(told))


# ----------------------------------------------------------------------------- refusals


async def test_r9_click_from_another_user_is_refused_and_changes_nothing(rig: SlackRig) -> None:
    card = await card_for(rig)
    before = await rig.snapshot(card_id_of(card))
    assert (await rig.click(rig.click_payload(card, user=OTHER)))[0] == 200
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    (told,) = ephemerals_to(rig, OTHER)
    assert "not yours" in texts([told])[0] and f"<@{OWNER}>" in texts([told])[0]
    assert not rig.standin.of("chat.update")


@pytest.mark.parametrize(
    ("how", "kw"),
    [
        ("forged signature", {"secret": "not-the-signing-secret"}),
        ("stale timestamp", {"timestamp": -301}),  # seconds from now, at the time of sending
        # int(time.time()) below drops up to 1 s and the request takes a moment: a margin past 300
        ("future timestamp", {"timestamp": +305}),
    ],
)
async def test_r9_unsigned_clicks_get_401_and_change_nothing(rig: SlackRig, how: str, kw: dict[str, Any]) -> None:
    card = await card_for(rig)
    before = await rig.snapshot(card_id_of(card))
    calls = len(rig.standin.calls)
    if "timestamp" in kw:
        kw = {"timestamp": int(time.time()) + kw["timestamp"]}
    status, body = await rig.click(rig.click_payload(card), **kw)
    assert (status, body) == (401, '{"error": "invalid request"}'), how
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    assert len(rig.standin.calls) == calls  # not even an ephemeral: the request never happened


async def test_r9_missing_signature_headers_get_401(rig: SlackRig) -> None:
    assert rig.session is not None
    body, ctype = P.interactive_body({"type": "block_actions"})
    async with rig.session.post(rig.url, data=body, headers={"Content-Type": ctype}) as r:
        assert r.status == 401


async def test_r9_click_on_an_expired_card_is_refused(rig: SlackRig) -> None:
    card = await card_for(rig)
    rig.clock.advance(rig.approvals.settings.card_expiry + 1)
    before = await rig.snapshot(card_id_of(card))
    await rig.click(rig.click_payload(card))
    await rig.settle()
    after = await rig.snapshot(card_id_of(card))
    # the only change R9 allows: the pointer is marked expired; no claim, no answer, no grant
    assert after["grants"] == before["grants"] == []
    assert after["pointer"]["state"] == "expired" and after["pointer"]["claim_count"] == 0
    assert after["pointer"]["answer_key"] is None
    assert "claim_won" not in [e["kind"] for e in after["audit"]]
    (told,) = ephemerals_to(rig, OWNER)
    assert "expired" in texts([told])[0]
    assert "Expired" in texts(rig.standin.of("chat.update"))[-1]
    assert len(rig.standin.of("chat.postMessage")) == 1  # no reply: the turn did not resume


async def test_r12_replayed_click_after_done_runs_nothing(rig: SlackRig) -> None:
    card = await card_for(rig)
    await rig.click(rig.click_payload(card))
    await rig.settle()
    before = await rig.snapshot(card_id_of(card))
    posts = len(rig.standin.of("chat.postMessage"))
    await rig.click(rig.click_payload(card))
    await rig.settle()
    after = await rig.snapshot(card_id_of(card))
    assert after["pointer"] == before["pointer"] and after["grants"] == before["grants"]
    assert [e["kind"] for e in after["audit"]][len(before["audit"]) :] == ["replayed"]
    assert len(rig.standin.of("chat.postMessage")) == posts  # the agent did not run again
    (told,) = ephemerals_to(rig, OWNER)
    assert "already answered" in texts([told])[0] and "Approved" in texts([told])[0]


@pytest.mark.parametrize(
    "breakage",
    ["value not json", "value with extra key", "unknown action", "two actions", "no value"],
)
async def test_r15_malformed_click_is_refused_and_changes_nothing(rig: SlackRig, breakage: str) -> None:
    card = await card_for(rig)
    before = await rig.snapshot(card_id_of(card))
    payload = rig.click_payload(card)
    action = payload["actions"][0]
    if breakage == "value not json":
        action["value"] = "garbage"
    elif breakage == "value with extra key":
        action["value"] = json.dumps({**json.loads(action["value"]), "approved": True})
    elif breakage == "unknown action":
        action["action_id"] = "approvals.approve_all"
    elif breakage == "two actions":
        payload["actions"] = [action, action]
    else:
        del action["value"]
    status, _ = await rig.click(payload)
    assert status in (200, 404)  # 404: Bolt had no listener for that action id
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    assert not rig.standin.of("chat.update")
    if status == 200:
        (told,) = ephemerals_to(rig, OWNER)
        assert "could not be read" in texts([told])[0]


async def test_r15_wrong_secret_looks_unknown_and_changes_nothing(rig: SlackRig) -> None:
    card = await card_for(rig)
    before = await rig.snapshot(card_id_of(card))
    payload = rig.click_payload(card)
    payload["actions"][0]["value"] = json.dumps({"card": card_id_of(card), "secret": "guess"})
    await rig.click(payload)
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    (told,) = ephemerals_to(rig, OWNER)
    assert "unknown" in texts([told])[0]


async def test_r15_package_choice_reaches_the_resume() -> None:
    """Several packages: the card offers a choice; what stays ticked is what is granted."""

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        if not results_of(messages):
            ask = {"reason": "need libraries", "packages": ["numpy", "pandas", "scipy"]}
            return "", [{"name": "request_approval", "input": ask}]
        return "installed what was allowed", []

    rig = await SlackRig(factory=policy_factory(policy)).start()
    try:
        card = await card_for(rig, "set up the environment")
        groups = [e for b in assert_valid_blocks(card) for e in b.get("elements", []) if e.get("type") == "checkboxes"]
        assert [o["value"] for o in groups[0]["initial_options"]] == ["numpy", "pandas", "scipy"]
        payload = rig.click_payload(card)
        keep = [o for o in groups[0]["options"] if o["value"] != "pandas"]
        payload["state"] = {
            "values": {
                sb.packages_block_id(card_id_of(card)): {
                    groups[0]["action_id"]: {"type": "checkboxes", "selected_options": keep}
                }
            }
        }
        await rig.click(payload)
        await rig.settle()
        granted = sorted(g.name for g in await rig.approvals.grants(user=OWNER_KEY) if g.kind == "package")
        assert granted == ["numpy", "scipy"]
        outcome = texts(rig.standin.of("chat.update"))[-1]
        assert "Approved" in outcome and "Not allowed" in outcome and "pandas" in outcome
    finally:
        await rig.stop()


# ----------------------------------------------------------------------------- events


async def test_event_retries_and_duplicates_start_one_turn(rig: SlackRig) -> None:
    ts = rig.next_ts()
    payload = P.message_im(text=f"download {URL}", user=OWNER, channel=DM, event_id="Ev0DUP0001", ts=ts)
    body, ctype = P.json_body(payload)
    retry = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
    results = await asyncio.gather(
        rig.send(body, ctype),
        rig.send(body, ctype),
        rig.send(body, ctype, headers=retry),
        rig.send(body, ctype, headers={"X-Slack-Retry-Num": "2", "X-Slack-Retry-Reason": "http_error"}),
    )
    assert [s for s, _ in results] == [200] * 4
    await rig.settle()
    assert len(rig.standin.of("chat.postMessage")) == 1


async def test_event_retry_reaching_another_replica_starts_no_second_turn(rig: SlackRig) -> None:
    """The dedupe is in the store, not in process memory: a second server on the same store."""
    replica = await SlackRig(rig.folder).start(standin=rig.standin)
    try:
        ts = rig.next_ts()
        payload = P.message_im(text=f"download {URL}", user=OWNER, channel=DM, event_id="Ev0REPL001", ts=ts)
        body, ctype = P.json_body(payload)
        assert (await rig.send(body, ctype))[0] == 200
        await rig.settle()
        assert (await replica.send(body, ctype, headers={"X-Slack-Retry-Num": "1"}))[0] == 200
        await replica.settle()
        assert len(rig.standin.of("chat.postMessage")) == 1
    finally:
        await replica.stop(standin=False)


async def test_mention_in_a_channel_thread_and_ignored_messages(rig: SlackRig) -> None:
    ts = rig.next_ts()
    mention = P.app_mention(text="<@U0BOTUSER> hello there", user=OWNER, channel="C0CHAN", event_id="Ev0M1", ts=ts)
    mention["event"]["thread_ts"] = "1800000000.000001"
    assert (await rig.send(*P.json_body(mention)))[0] == 200
    # a bot's own message and an edit are acknowledged (no 404, so no Slack retry) and dropped
    edit = P.message_im(text="x", user=OWNER, channel=DM, event_id="Ev0E1", ts=rig.next_ts())
    edit["event"]["subtype"] = "message_changed"
    assert (await rig.send(*P.json_body(edit)))[0] == 200
    await rig.settle()
    (reply,) = rig.standin.of("chat.postMessage")
    assert (reply.args["channel"], reply.args["thread_ts"]) == ("C0CHAN", "1800000000.000001")
    assert_valid_blocks(reply)


async def test_owners_next_message_reposts_the_open_card_with_a_new_secret(rig: SlackRig) -> None:
    """Issue 10 finding 6: the card may never have reached its owner; their next message brings it back."""
    card = await card_for(rig)
    payload = P.message_im(text="anyone there?", user=OWNER, channel=DM, event_id="Ev0R1", ts=rig.next_ts())
    payload["event"]["thread_ts"] = card.args["thread_ts"]
    await rig.send(*P.json_body(payload))
    await rig.settle()
    again = rig.card_calls()[-1]
    assert again is not card and again.args["thread_ts"] == card.args["thread_ts"]
    assert card_id_of(again) == card_id_of(card)
    old_value, new_value = (json.loads(buttons(c.args["blocks"])[0]["value"]) for c in (card, again))
    assert old_value["secret"] != new_value["secret"]
    p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(card))
    assert p is not None and p.card_location is not None and p.card_location["ts"] == again.result["ts"]
    await rig.click(rig.click_payload(card))  # the old card's secret no longer works
    await rig.settle()
    assert "unknown or no longer open" in texts(rig.standin.of("chat.postEphemeral"))[-1]
    await rig.click(rig.click_payload(again))
    await rig.settle()
    p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(card))
    assert p is not None and p.state == "done"


async def test_card_that_cannot_be_posted_after_retries_withdraws_its_request(rig: SlackRig) -> None:
    """Issue 10 finding 6: rate-limited past the client's retries, the card is withdrawn and the user told."""
    rig.standin.fail["chat.postMessage"] = ["ratelimited"] * 4  # the first attempt and its 3 retries
    status, _ = await rig.dm(f"download <{URL}>")
    assert status == 200
    await rig.settle()
    assert [c.result["ok"] for c in rig.card_calls()] == [False] * 4  # tried, and retried
    reply = rig.standin.of("chat.postMessage")[-1]
    assert reply.result["ok"] and "could not show you the approval card" in texts([reply])[0]
    chat = chat_key(P.TEAM, DM, reply.args["thread_ts"])
    p = await rig.store.run(rig.store.rows.get_pointer, chat)
    assert p is not None and p.state == "expired"
    assert "withdrawn" in [e.kind for e in await rig.approvals.audit(chat)]
    card = await card_for(rig)  # the chat is free again: the next message gets a card
    assert card.result["ok"]


async def test_waiting_while_a_card_is_open(rig: SlackRig) -> None:
    card = await card_for(rig)
    payload = P.message_im(text="and another thing", user=OTHER, channel=DM, event_id="Ev0W1", ts=rig.next_ts())
    payload["event"]["thread_ts"] = card.args["thread_ts"]
    await rig.send(*P.json_body(payload))
    await rig.settle()
    last = rig.standin.of("chat.postMessage")[-1]
    assert "Waiting for your approval" in texts([last])[0] and last.args["thread_ts"] == card.args["thread_ts"]


async def test_url_verification_is_answered_when_signed(rig: SlackRig) -> None:
    body, ctype = P.json_body({"type": "url_verification", "challenge": "abc123", "token": "x"})
    assert await rig.send(body, ctype) == (200, '{"challenge": "abc123"}')
    assert (await rig.send(body, ctype, secret="wrong"))[0] == 401


# ----------------------------------------------------------------------------- Web API faults


async def test_web_api_faults_never_lose_the_result(rig: SlackRig) -> None:
    # the card's post is rate limited once (retried by slack_sdk's handler)
    rig.standin.fail["chat.postMessage"] = ["ratelimited"]
    card = await card_for(rig)
    assert [c.result["ok"] for c in rig.standin.of("chat.postMessage")] == [False, True]
    # then the card message vanished: both updates fail, the outcome is posted in the thread instead
    rig.standin.fail["chat.update"] = ["message_not_found", "message_not_found"]
    await rig.click(rig.click_payload(card))
    await rig.settle()
    io = rig.store
    pointer = await io.run(io.rows.get_pointer_by_card, card_id_of(card))
    assert pointer is not None and pointer.state == "done"
    posted = texts(rig.standin.of("chat.postMessage")[2:])
    assert any("Approved" in t for t in posted), posted  # the outcome, as a new message
    assert len(posted) == 2  # outcome + the turn's reply
    # a later click replays and repairs the card in place
    await rig.click(rig.click_payload(card))
    await rig.settle()
    assert rig.standin.of("chat.update")[-1].result["ok"] is True
    assert "Approved" in texts(rig.standin.of("chat.update"))[-1]


async def test_ticking_a_package_checkbox_is_acked_and_changes_nothing(rig: SlackRig) -> None:
    card = await card_for(rig)
    before = await rig.snapshot(card_id_of(card))
    payload = rig.click_payload(card)
    payload["actions"] = [
        {"action_id": f"{sb.ACTION_PACKAGES}.0", "block_id": sb.packages_block_id(card_id_of(card)),
         "type": "checkboxes", "selected_options": [], "action_ts": "1.1"}
    ]  # fmt: skip
    assert await rig.click(payload) == (200, "")
    await rig.settle()
    assert await rig.snapshot(card_id_of(card)) == before
    assert not rig.standin.of("chat.update") and not rig.standin.of("chat.postEphemeral")


async def test_click_is_acked_before_the_resumed_agent_finishes() -> None:
    """The ack does not wait for the agent: the agent is held mid-resume while the click is answered."""
    gate = threading.Event()
    rig = await SlackRig(factory=held_resume_factory(lambda: gate.wait(timeout=30), URL)).start()
    try:
        card = await card_for(rig, "go")
        assert await rig.click(rig.click_payload(card)) == (200, "")
        await rig.standin.wait_for(lambda s: bool(s.of("chat.update")))  # "Resuming…", then the agent runs
        io = rig.store
        pointer = await io.run(io.rows.get_pointer_by_card, card_id_of(card))
        assert pointer is not None and pointer.state == "claimed"  # acked while the agent is still held
        assert len(rig.standin.of("chat.postMessage")) == 1
        gate.set()
        await rig.settle()
        pointer = await io.run(io.rows.get_pointer_by_card, card_id_of(card))
        assert pointer is not None and pointer.state == "done"
        assert "finished" in texts(rig.standin.of("chat.postMessage"))[-1]
    finally:
        gate.set()
        await rig.stop()
