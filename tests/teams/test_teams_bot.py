"""The Teams front end end to end over HTTP: captured Playground activities are posted to a real
aiohttp server at /api/messages; a mock Bot Connector records what the bot sends back. Every card
the bot emits is validated against the official Adaptive Card 1.5 schema."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from botbuilder.core import InvokeResponse, Middleware, TurnContext
from botbuilder.schema import Activity, ActivityTypes

from chat_approvals.bots.teams_bot import TEAMS
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ClaimRead
from chat_approvals.core.settings import Settings
from tests.teams.harness import (
    CHAT,
    OTHER,
    OWNER,
    OWNER_AAD,
    TENANT,
    Bot,
    MockConnector,
    card_data,
    card_text,
    invoke_card,
)
from tests.teams.schema import assert_valid_card

URL = "https://example.com/data.csv"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def bot(tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", clock, connector[1]) as b:
        yield b


def all_cards_valid(mock: MockConnector, *extra: dict[str, Any]) -> None:
    for card in [*mock.cards(), *extra]:
        assert_valid_card(card)


async def ask(bot: Bot, mock: MockConnector, text: str = f"please fetch {URL}") -> dict[str, Any]:
    status, _ = await bot.say(text)
    assert status == 201
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(card)
    return card


# --------------------------------------------------------------------------- message -> card


async def test_r7_message_posts_card_and_records_its_location(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    card = await ask(bot, mock)
    post = mock.posts()[-1]
    assert post["auth"] is None  # no app id: no token is sent (local, unauthenticated)
    assert post["path"].startswith("/_connector/v3/conversations/f62ca891-03b2-45a6-b15b-0e20fc6f66b1/activities/")
    assert "example.com" in card_text(card) and URL in card_text(card)
    data = card_data(card)
    assert set(data) == {"card_id", "secret"}  # R4: identity never rides on the card
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "pending" and p.owner == OWNER and p.chat == CHAT
    assert p.card_location is not None
    assert p.card_location["activity_id"] == str(mock._next)  # the id the connector gave the card
    ref = json.loads(p.card_location["reference"])
    assert ref["conversation"]["id"] == "f62ca891-03b2-45a6-b15b-0e20fc6f66b1"
    assert p.card_location["tenant"] == "00000000-0000-0000-0000-0000000000001"


async def test_message_without_url_gets_the_agents_reply(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    status, _ = await bot.say("hello there")
    assert status == 201
    assert mock.texts() and not mock.cards()


async def test_redelivered_message_runs_once(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    act = bot.activity("playground-message-text.json", text=f"fetch {URL}")
    assert (await bot.post(act))[0] == 201
    assert (await bot.post(act))[0] == 201
    assert len(mock.cards()) == 1


async def test_second_message_from_someone_else_while_open_says_waiting(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    await ask(bot, mock)
    await bot.say("fetch https://other.example/x.csv", **{"from": OTHER})
    assert "Waiting for your approval" in mock.texts()[-1]
    assert len(mock.cards()) == 1


async def test_owners_next_message_gets_the_open_request_back_with_a_new_secret(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    """Issue 10 finding 6: the card may never have reached its owner; their next message re-posts it."""
    mock, _ = connector
    first = card_data(await ask(bot, mock))
    again = card_data(await ask(bot, mock, "hello? still there?"))
    assert again["card_id"] == first["card_id"] and again["secret"] != first["secret"]
    p = await bot.pointer(first["card_id"])
    assert p is not None and p.card_location is not None
    assert p.card_location["activity_id"] == str(mock._next)  # the re-posted card is the one updated later
    stale = invoke_card(*await bot.click("approve", first))  # the old secret stops working
    assert "Unknown request" in card_text(stale)
    done = invoke_card(*await bot.click("approve", again))
    assert "Approved by Alex Wilber" in card_text(done)
    p = await bot.pointer(first["card_id"])
    assert p is not None and p.state == "done"


async def test_card_that_cannot_be_posted_withdraws_its_request_and_says_so(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    """Issue 10 finding 6: a card the connector refuses (after botbuilder's retries) does not hold the chat."""
    mock, _ = connector
    mock.fail_cards = 100
    status, _ = await bot.say(f"please fetch {URL}")
    assert status == 201
    assert any((c["body"] or {}).get("attachments") for c in mock.posts())  # the card was tried
    assert "could not show you the approval card" in mock.texts()[-1]
    store = bot.store
    p = await store.run(store.rows.get_pointer, CHAT)
    assert p is not None and p.state == "expired"
    audit = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert "withdrawn" in audit
    mock.fail_cards = 0  # the chat is free: the next message gets a new card
    card = await ask(bot, mock)
    assert card_data(card)["card_id"] != p.card_id


async def test_membership_events_need_nothing_but_one_welcome(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    for name in ("playground-conversationUpdate.json", "playground-installationUpdate.json"):
        status, _ = await bot.post(bot.activity(name))
        assert status == 201
    assert [c["body"]["text"][:6] for c in mock.calls] == ["Hello!"]  # the bot added: a welcome (issue 28)


# --------------------------------------------------------------------------- the click


async def test_r9_r12_execute_resumes_once_and_replaces_card(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    posts_before = len(mock.posts())
    card = invoke_card(*await bot.click("approve", data))
    assert "Approved by Alex Wilber" in card_text(card) and "actions" not in card
    replies = mock.posts()[posts_before:]
    assert len(replies) == 1 and replies[0]["body"]["text"]  # the agent's reply, in the conversation
    assert "example.com" in replies[0]["body"]["text"]
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "done"
    grants = await bot.approvals.grants(user=OWNER, chat=CHAT)
    assert [(g.kind, g.name) for g in grants] == [("site", "example.com")]
    # R12: a second click replays: nothing runs, nothing is posted, the answer is told again
    again = invoke_card(*await bot.click("approve", data))
    assert "Already answered" in card_text(again) and "approved by Alex Wilber" in card_text(again)
    assert len(mock.posts()) == posts_before + 1
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1 and "replayed" in kinds
    all_cards_valid(mock)


async def test_r15_deny_grants_nothing(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    card = invoke_card(*await bot.click("deny", data))
    assert "Denied by Alex Wilber" in card_text(card)
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []
    assert mock.texts()  # the agent continued without the data and said so


async def test_r9_another_users_click_is_read_only_and_changes_nothing(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    before = await bot.pointer(data["card_id"])
    posts = len(mock.posts())
    card = invoke_card(*await bot.click("approve", data, **{"from": OTHER}))
    assert "Not yours to answer" in card_text(card) and "Only Alex Wilber may answer" in card_text(card)
    assert "actions" not in card
    assert await bot.pointer(data["card_id"]) == before
    assert await bot.approvals.grants(user=f"teams:{TENANT}:{OTHER['aadObjectId']}", chat=CHAT) == []
    assert len(mock.posts()) == posts
    # the owner can still answer afterwards
    assert "Approved by" in card_text(invoke_card(*await bot.click("approve", data)))


def _in_tenant(tenant: str) -> dict[str, Any]:
    """The activity fields that say which tenant a click comes from."""
    return {
        "channelData": {"tenant": {"id": tenant}, "source": {"name": "message"}},
        "conversation": {"conversationType": "personal", "tenantId": tenant, "id": CHAT.split(":", 2)[2]},
    }


@pytest.mark.parametrize(
    "elsewhere",
    [
        # R17: the same Entra object id in another tenant is someone else
        _in_tenant("99999999-0000-0000-0000-000000000001"),
        # no Entra object id: the channel's from.id (even the owner's) is never an approver
        {"from": {"id": "user-id-0", "name": "Alex Wilber"}},
        {"from": {"id": OWNER_AAD, "name": "Alex Wilber"}},
        # no tenant at all
        {"channelData": {"source": {"name": "message"}}, "conversation": {"conversationType": "personal", "id": "x"}},
    ],
)
async def test_r17_a_click_without_the_owners_full_identity_is_refused(
    bot: Bot, connector: tuple[MockConnector, str], elsewhere: dict[str, Any]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    before = await bot.pointer(data["card_id"])
    audit = await bot.approvals.audit(CHAT)
    posts = len(mock.posts())
    card = invoke_card(*await bot.click("approve", data, **elsewhere))
    assert "Not yours to answer" in card_text(card) and "actions" not in card
    assert await bot.pointer(data["card_id"]) == before and await bot.approvals.audit(CHAT) == audit
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []
    assert len(mock.posts()) == posts
    assert "Approved by" in card_text(invoke_card(*await bot.click("approve", data)))  # still answerable


async def test_r17_a_message_without_an_entra_object_id_runs_nothing(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    status, _ = await bot.say(f"please fetch {URL}", **{"from": {"id": "user-id-0", "name": "Alex Wilber"}})
    assert status == 201
    assert mock.texts()[-1].startswith("I cannot tell who you are")
    assert not mock.cards()
    store = bot.store
    assert await store.run(store.rows.get_pointer, CHAT) is None


async def test_r9_expired_card_is_refused(bot: Bot, clock: ManualClock, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    posts = len(mock.posts())
    clock.advance(Settings().card_expiry + 1)
    card = invoke_card(*await bot.click("approve", data))
    assert "This request has expired" in card_text(card) and "actions" not in card
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []
    assert len(mock.posts()) == posts  # no resume ran
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "expired"


async def test_r9_wrong_secret_looks_unknown_and_changes_nothing(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    before = await bot.pointer(data["card_id"])
    card = invoke_card(*await bot.click("approve", {**data, "secret": "guess"}))
    assert "Unknown request" in card_text(card)
    card2 = invoke_card(*await bot.click("approve", {"card_id": "c_" + "n" * 22, "secret": data["secret"]}))
    assert "Unknown request" in card_text(card2)
    assert await bot.pointer(data["card_id"]) == before


async def test_r10_click_while_claimed_is_in_progress(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    p = await bot.pointer(data["card_id"])
    assert p is not None
    store, now = bot.store, bot.approvals.clock.now()
    read = ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count)
    claimed = await store.run(
        store.rows.claim, read, worker="other-worker", now=now, lease_until=now + 30, resume_deadline=now + 900
    )
    assert claimed is not None
    card = invoke_card(*await bot.click("approve", data))
    assert "Already being answered" in card_text(card)
    assert await bot.pointer(data["card_id"]) == claimed


@pytest.mark.parametrize(
    "value",
    [
        {"action": {"type": "Action.Submit", "verb": "approve", "data": {}}},  # botbuilder alone would 500
        {"action": {"type": "Action.Execute", "verb": "approve", "data": {"card_id": "c"}}},
        {"action": {"type": "Action.Execute", "verb": "bogus", "data": {"card_id": "c", "secret": "s"}}},
        {},
    ],
)
async def test_malformed_invoke_is_400_and_changes_nothing(
    bot: Bot, connector: tuple[MockConnector, str], value: dict[str, Any]
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    before = await bot.pointer(data["card_id"])
    act = bot.activity("playground-invoke-adaptiveCard-action.json", value=value)
    status, body = await bot.post(act)
    assert status == 400
    assert body["statusCode"] == 400 and body["type"] == "application/vnd.microsoft.error"
    assert body["value"]["code"] == "BadRequest" and body["value"]["message"]
    assert await bot.pointer(data["card_id"]) == before


async def test_packages_not_on_the_card_are_400(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    before = await bot.pointer(data["card_id"])
    status, body = await bot.click("approve", {**data, "packages": "evilpkg"})
    assert status == 400 and "packages" in body["value"]["message"]
    assert await bot.pointer(data["card_id"]) == before


@pytest.mark.parametrize(
    ("headers", "payload", "expected"),
    [
        ({"Content-Type": "application/json"}, b"{not json", 400),
        ({"Content-Type": "text/plain"}, b"hello", 415),
        ({"Content-Type": "application/json"}, b"[1, 2]", 400),
        ({"Content-Type": "application/json", "Authorization": "Bearer abc"}, b'{"type": "message"}', 401),
    ],
)
async def test_bad_requests_get_a_clear_4xx(bot: Bot, headers: dict[str, str], payload: bytes, expected: int) -> None:
    resp = await bot.client.post("/api/messages", data=payload, headers=headers)
    assert resp.status == expected


# --------------------------------------------------------------------------- chained card and late finish


async def test_r13_chained_card_is_posted_and_located(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    first = card_data(await ask(bot, mock, "download https://a.example/1.csv then https://b.example/2.csv"))
    card = invoke_card(*await bot.click("approve", first))
    assert "one more approval" in card_text(card)
    chained = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(chained)
    second = card_data(chained)
    assert second["card_id"] != first["card_id"] and "b.example" in card_text(chained)
    p = await bot.pointer(second["card_id"])
    assert p is not None and p.card_location is not None
    assert p.card_location["activity_id"] == str(mock._next)
    final = invoke_card(*await bot.click("approve", second))
    assert "Approved by" in card_text(final)
    assert "b.example" in mock.texts()[-1]
    all_cards_valid(mock)


async def test_proactive_update_from_a_second_process(
    tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]
) -> None:
    """Bot A posts the card and stops. Bot B (its own facade, adapter and server; only the store is
    shared) takes the click, answers it at once with "resuming…", and when the resume finishes it
    replaces the card and posts the reply from the conversation reference A stored."""
    mock, url = connector
    folder = tmp_path / "shared-store"
    async with Bot(folder, clock, url) as a:
        data = card_data(await ask(a, mock))
        card_activity = (await a.pointer(data["card_id"])).card_location["activity_id"]  # type: ignore[union-attr]
    posts = len(mock.posts())
    async with Bot(folder, clock, url, invoke_budget=0.0) as b:
        resolved = invoke_card(*await b.click("approve", data))
        assert "Resuming the agent's turn" in card_text(resolved)
        await b.drain()
        puts = mock.puts()
        assert len(puts) == 1 and puts[0]["path"].endswith(f"/activities/{card_activity}")
        updated = puts[0]["body"]["attachments"][0]["content"]
        assert_valid_card(updated)
        assert "Approved by Alex Wilber" in card_text(updated) and "actions" not in updated
        assert len(mock.posts()) == posts + 1 and "example.com" in mock.texts()[-1]
        p = await b.pointer(data["card_id"])
        assert p is not None and p.state == "done"


async def test_r11_a_claim_won_within_the_budget_answers_with_the_resolved_card(
    tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]
) -> None:
    """The resumed turn outlasts the invoke budget but the claim is won inside it: the Claimed event
    (core/protocol/events.py) reaches this front end, so the invoke answers with the card resolved ("Approved
    by …, resuming"), not the bare "Answer recorded" shown when even the claim is not yet known."""
    import threading

    from tests.support.agents import held_resume_factory

    mock, url = connector
    gate = threading.Event()
    factory = held_resume_factory(lambda: gate.wait(timeout=30), URL)
    try:
        async with Bot(tmp_path / "s", clock, url, invoke_budget=0.5, agent_factory=factory) as b:
            data = card_data(await ask(b, mock))
            resolved = invoke_card(*await b.click("approve", data))
            assert_valid_card(resolved)
            text = card_text(resolved)
            assert "Approved" in text and "Alex Wilber" in text and "Resuming the agent's turn" in text
            assert "Answer recorded" not in text
            gate.set()
            await b.drain()
            assert "finished" in mock.texts()[-1]
    finally:
        gate.set()


# --------------------------------------------------------------------------- grants commands


async def approve_one(bot: Bot, mock: MockConnector) -> None:
    data = card_data(await ask(bot, mock))
    invoke_card(*await bot.click("approve", data))


async def test_r14_approvals_lists_grants_and_revoke_button(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    await approve_one(bot, mock)
    await bot.say("approvals")
    listing = mock.posts()[-1]["body"]["attachments"][0]["content"]
    assert_valid_card(listing)
    assert "example.com" in card_text(listing) and '"verb": "revoke"' in card_text(listing)
    after = invoke_card(*await bot.click("revoke", {"subject": "example.com"}))
    assert "Revoked: example.com." in card_text(after) and "no approvals" in card_text(after)
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []


async def test_r14_revoke_text_commands(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    await approve_one(bot, mock)
    await bot.say("revoke nothing.example")
    assert "Nothing to revoke" in card_text(mock.cards()[-1])
    assert len(await bot.approvals.grants(user=OWNER, chat=CHAT)) == 1
    await bot.say("revoke all")
    assert "Revoked: example.com." in card_text(mock.cards()[-1])
    assert await bot.approvals.grants(user=OWNER, chat=CHAT) == []
    await bot.say("revoke")
    assert "revoke HOST_OR_PACKAGE" in mock.texts()[-1]
    await bot.say("help")
    assert "approvals" in card_text(mock.cards()[-1])
    all_cards_valid(mock)


async def test_r14_another_user_cannot_revoke_the_owners_grants(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    await approve_one(bot, mock)
    card = invoke_card(*await bot.click("revoke", {"subject": "all"}, **{"from": OTHER}))
    assert "Nothing to revoke" in card_text(card)
    assert len(await bot.approvals.grants(user=OWNER, chat=CHAT)) == 1


async def test_proactive_update_from_another_os_process(
    tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]
) -> None:
    """The same as above with a real second OS process: this test's bot posts the card and stops;
    `python -m tests.teams.bot_process` takes the click and replaces the card from the stored reference."""
    import asyncio
    import sys

    import aiohttp

    mock, url = connector
    folder = tmp_path / "shared-store"
    async with Bot(folder, clock, url) as a:
        data = card_data(await ask(a, mock))
        location = (await a.pointer(data["card_id"])).card_location  # type: ignore[union-attr]
        invoke = a.activity("playground-invoke-adaptiveCard-action.json")
    assert location is not None
    invoke["value"] = {"action": {"type": "Action.Execute", "verb": "approve", "data": data}}
    root = Path(__file__).resolve().parents[2]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.teams.bot_process", str(folder), str(clock.now()), "0",
        cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = ""
        while not line.startswith("PORT "):
            raw = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert raw, "the second process exited before listening"
            line = raw.decode().strip()
        port = int(line.split()[1])
        async with aiohttp.ClientSession() as http:
            resp = await http.post(f"http://127.0.0.1:{port}/api/messages", json=invoke)
            assert resp.status == 200
            resolved = (await resp.json())["value"]
        assert_valid_card(resolved)
        assert "Resuming the agent's turn" in card_text(resolved)
        for _ in range(200):  # bounded wait for the other process's resume to reach the connector
            if mock.puts() and mock.texts()[-1:] and "example.com" in mock.texts()[-1]:
                break
            await asyncio.sleep(0.05)
        puts = mock.puts()
        assert len(puts) == 1 and puts[0]["path"].endswith(f"/activities/{location['activity_id']}")
        assert "Approved by Alex Wilber" in card_text(puts[0]["body"]["attachments"][0]["content"])
        assert "example.com" in mock.texts()[-1]
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), timeout=30)


async def test_r10_racing_clicks_resume_once(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    import asyncio

    mock, _ = connector
    data = card_data(await ask(bot, mock))
    posts = len(mock.posts())
    results = await asyncio.gather(*(bot.click("approve", data) for _ in range(5)))
    cards = [invoke_card(*r) for r in results]
    winners = [c for c in cards if "Approved by Alex Wilber" in card_text(c)]
    others = [c for c in cards if "Already being answered" in card_text(c) or "Already answered" in card_text(c)]
    assert len(winners) == 1 and len(others) == 4
    assert len(mock.posts()) == posts + 1  # one agent reply
    kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
    assert kinds.count("claim_won") == 1


async def test_group_chat_click_also_replaces_the_card_for_everyone(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    """In a personal chat the invoke answer alone replaces the card; where others share the
    conversation the bot also updates the message itself, so nobody else sees live buttons."""
    mock, _ = connector
    group = {
        "conversationType": "groupChat",
        "tenantId": "00000000-0000-0000-0000-0000000000001",
        "id": "19:g@thread.v2",
    }
    status, _ = await bot.say(f"fetch {URL}", conversation=group)
    assert status == 201
    card = mock.posts()[-1]["body"]["attachments"][0]["content"]
    data = card_data(card)
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.chat == "teams:00000000-0000-0000-0000-0000000000001:19:g@thread.v2"
    invoke_card(*await bot.click("approve", data, conversation=group))
    puts = mock.puts()
    assert len(puts) == 1 and puts[0]["path"].endswith(f"/activities/{p.card_location['activity_id']}")  # type: ignore[index]
    assert "Approved by Alex Wilber" in card_text(puts[0]["body"]["attachments"][0]["content"])
    all_cards_valid(mock)


async def test_personal_chat_click_needs_no_message_update(bot: Bot, connector: tuple[MockConnector, str]) -> None:
    mock, _ = connector
    invoke_card(*await bot.click("approve", card_data(await ask(bot, mock))))
    assert mock.puts() == []


async def test_slow_turn_answers_at_once_and_posts_the_card_proactively(
    tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]
) -> None:
    """A turn longer than message_budget: the message is answered at once (typing), and the card is
    posted to the conversation from the stored reference when the turn pauses; it stays clickable."""
    mock, url = connector
    async with Bot(tmp_path / "s", clock, url, message_budget=0.0) as b:
        status, _ = await b.say(f"fetch {URL}")
        assert status == 201
        await b.drain()
        typing = [c for c in mock.posts() if c["body"].get("type") == "typing"]
        assert len(typing) == 1
        card_post = mock.posts()[-1]
        # sent from a continuation of the stored reference, not as the answer to the message's request
        assert card_post["path"].startswith("/_connector/v3/conversations/f62ca891-03b2-45a6-b15b-0e20fc6f66b1/")
        card = card_post["body"]["attachments"][0]["content"]
        assert_valid_card(card)
        data = card_data(card)
        p = await b.pointer(data["card_id"])
        assert p is not None and p.card_location is not None
        assert p.card_location["activity_id"] == str(mock._next)
        assert "Approved by" in card_text(invoke_card(*await b.click("approve", data)))


def packages_policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Asks for two packages, then reports what the approval tool answered."""
    from tests.support.agents import results_of, text_of

    results = results_of(messages)
    if not results:
        ask = {"reason": "analyse the table", "packages": ["numpy", "pandas"]}
        return "", [{"name": "request_approval", "input": ask}]
    return "tool said: " + text_of(results[-1]), []


async def test_r15_package_choice_approves_only_the_chosen_subset(
    tmp_path: Path, clock: ManualClock, connector: tuple[MockConnector, str]
) -> None:
    from tests.support.agents import policy_factory

    mock, url = connector
    async with Bot(tmp_path / "s", clock, url, agent_factory=policy_factory(packages_policy)) as b:
        card = await ask(b, mock, "analyse it")
        choice = next(el for el in card["body"] if el.get("type") == "Input.ChoiceSet")
        assert [c["value"] for c in choice["choices"]] == ["numpy", "pandas"]
        # Teams merges the multi-select's value (comma-separated) into the Execute data
        done = invoke_card(*await b.click("approve", {**card_data(card), "packages": "pandas"}))
        assert "Approved by Alex Wilber at" in card_text(done) and "Not allowed: numpy" in card_text(done)
        grants = await b.approvals.grants(user=OWNER, chat=CHAT)
        assert [(g.kind, g.name) for g in grants] == [("package", "pandas")]


@pytest.mark.parametrize("bad", ["{id}/1", "%2e%2e", "{id}\x00", "c_" + "a" * 150, "{id}.json"])
async def test_a_card_id_not_of_the_minted_shape_is_a_400_and_replays_nothing(
    bot: Bot, connector: tuple[MockConnector, str], bad: str
) -> None:
    mock, _ = connector
    data = card_data(await ask(bot, mock))
    assert "Approved by" in card_text(invoke_card(*await bot.click("approve", data)))  # A's answer is stored
    audit = await bot.approvals.audit(CHAT)
    status, body = await bot.click("approve", {**data, "card_id": bad.format(id=data["card_id"])})
    assert status == 400 and body["statusCode"] == 400 and "not a card id" in body["value"]["message"]
    assert await bot.approvals.audit(CHAT) == audit  # no "replayed"


async def test_a_click_is_answered_by_one_invoke_response_that_botbuilder_copies_shallow(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    """The invoke answer goes out once per click (not also botbuilder's own), in a SentActivity, so
    botbuilder's copy of it before sending is shallow; what Teams gets is the same answer. No rule
    covers it: Bot Framework takes one invoke response per invoke, and this checks Teams still gets one."""
    mock, _ = connector
    sent: list[Activity] = []

    class Recorder(Middleware):
        async def on_turn(self, context: TurnContext, logic: Callable[[], Awaitable[None]]) -> None:
            async def record(_: TurnContext, activities: list[Activity], send: Callable[[], Awaitable[Any]]) -> Any:
                sent.extend(a for a in activities if a.type == ActivityTypes.invoke_response)
                return await send()

            context.on_send_activities(record)
            await logic()

    bot.app[TEAMS].adapter.use(Recorder())
    data = card_data(await ask(bot, mock))
    card = invoke_card(*await bot.click("approve", data))
    assert "Approved by Alex Wilber" in card_text(card)
    (answer,) = sent
    assert isinstance(answer.value, InvokeResponse) and answer.value.status == 200
    assert copy.deepcopy(answer).value is answer.value  # the shallow copy: the answer is not copied
    status, body = await bot.click("approve", {**data, "secret": "x" * 43})  # a refusal, answered the same way
    assert status == 200 and len(sent) == 2
