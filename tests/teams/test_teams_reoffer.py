"""A card shown again leaves no live buttons behind in Teams (a follow-up of issue 10, finding 6):
captured Playground activities to the real server, a mock Bot Connector recording what the bot
sends. When the owner's next message re-offers their open request with a new secret, the earlier
card (and its copy in the approvers' conversation when routed) is replaced in place by a read-only
"shown again below" card; a click with the old secret is refused and changes nothing (R19, R9);
the new card resumes once (R12)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chat_approvals.core.clock import ManualClock
from tests.teams.harness import CHAT, OTHER, Bot, MockConnector, card_data, card_text, invoke_card
from tests.teams.schema import assert_valid_card
from tests.teams.test_policy_teams import APPROVERS_CONV, IN_APPROVERS, POLICY

REQUESTING_CONV = "f62ca891-03b2-45a6-b15b-0e20fc6f66b1"  # the Playground's conversation


def cards_posted_in(mock: MockConnector, conversation: str) -> list[dict[str, Any]]:
    """Every card POSTed to `conversation`, in order."""
    return [
        c["body"]["attachments"][0]["content"]
        for c in mock.posts()
        if f"/conversations/{conversation}/" in c["path"] and c["body"].get("attachments")
    ]


async def location(bot: Bot, card: dict[str, Any]) -> dict[str, str]:
    """Where the pointer says the card is (the activity ids the connector gave its copies)."""
    p = await bot.pointer(card_data(card)["card_id"])
    assert p is not None and p.card_location is not None
    return p.card_location


def puts_to(mock: MockConnector, conversation: str, activity_id: str) -> list[dict[str, Any]]:
    path = f"/conversations/{conversation}/activities/{activity_id}"
    return [c["body"]["attachments"][0]["content"] for c in mock.puts() if c["path"].endswith(path)]


def assert_shown_again(mock: MockConnector, conversation: str, activity_id: str) -> None:
    (card,) = puts_to(mock, conversation, activity_id)
    assert_valid_card(card)
    assert "actions" not in card and not [b for b in card["body"] if b["type"].startswith("Input.")]
    assert "Shown again below" in card_text(card)


async def test_r19_the_owners_next_message_makes_the_old_card_read_only_and_the_new_one_resumes_once(
    tmp_path: Path, connector: tuple[MockConnector, str]
) -> None:
    mock, url = connector
    async with Bot(tmp_path / "store", ManualClock(), url) as bot:
        assert (await bot.say("please fetch https://example.com/data.csv"))[0] == 201
        (old,) = cards_posted_in(mock, REQUESTING_CONV)
        old_id = (await location(bot, old))["activity_id"]
        assert (await bot.say("hello? still there?"))[0] == 201
        _, new = cards_posted_in(mock, REQUESTING_CONV)
        first, again = card_data(old), card_data(new)
        assert again["card_id"] == first["card_id"] and again["secret"] != first["secret"]
        assert_valid_card(new) and new["actions"]  # the new card is answerable
        assert_shown_again(mock, REQUESTING_CONV, old_id)
        assert len(mock.puts()) == 1
        p = await bot.pointer(first["card_id"])
        assert p is not None and p.card_location is not None
        assert p.card_location["activity_id"] != old_id  # the re-posted card is the one updated later

        # R19: the old secret (a client still showing the old card) is refused; nothing changes.
        stale = invoke_card(*await bot.click("approve", first))
        assert "Unknown request" in card_text(stale) and "actions" not in stale
        assert await bot.pointer(first["card_id"]) == p

        done = invoke_card(*await bot.click("approve", again))
        assert "Approved by Alex Wilber" in card_text(done)
        again_card = invoke_card(*await bot.click("approve", again))
        assert "Already answered" in card_text(again_card)
        p = await bot.pointer(first["card_id"])
        assert p is not None and p.state == "done"
        assert len(mock.puts()) == 1  # the old card was not touched again (a personal chat: the invoke
        # answer itself replaces the clicked card)
        kinds = [e.kind for e in await bot.approvals.audit(CHAT)]
        assert kinds.count("claim_won") == 1 and kinds.count("reoffered") == 1


async def test_r19_a_routed_card_shown_again_makes_both_old_copies_read_only(
    tmp_path: Path, connector: tuple[MockConnector, str]
) -> None:
    mock, url = connector
    async with Bot(tmp_path / "store", ManualClock(), url, policy=POLICY) as bot:
        assert (await bot.say("please fetch https://example.org/data.csv"))[0] == 201
        (old,) = cards_posted_in(mock, REQUESTING_CONV)
        first = await location(bot, old)
        old_id, old_routed_id = first["activity_id"], first["routed_activity_id"]
        assert (await bot.say("hello?"))[0] == 201
        _, new = cards_posted_in(mock, REQUESTING_CONV)
        _, new_routed = cards_posted_in(mock, APPROVERS_CONV)
        assert card_data(new_routed) == card_data(new) != card_data(old)
        assert_shown_again(mock, REQUESTING_CONV, old_id)
        assert_shown_again(mock, APPROVERS_CONV, old_routed_id)
        assert len(mock.puts()) == 2
        p = await bot.pointer(card_data(old)["card_id"])
        assert p is not None and p.card_location is not None
        new_id, new_routed_id = p.card_location["activity_id"], p.card_location["routed_activity_id"]
        assert new_id != old_id and new_routed_id != old_routed_id

        # An approver clicking the old copy is refused; nothing changes.
        approver = {"from": OTHER, "conversation": IN_APPROVERS}
        stale = invoke_card(*await bot.click("approve", card_data(old), **approver))
        assert "Unknown request" in card_text(stale)
        assert await bot.pointer(card_data(old)["card_id"]) == p

        done = invoke_card(*await bot.click("approve", card_data(new_routed), **approver))
        assert "Approved by Megan Bowen" in card_text(done)
        await bot.drain()
        p = await bot.pointer(card_data(old)["card_id"])
        assert p is not None and p.state == "done"
        # the outcome went to the new copies; each old one was updated once (shown again) and no more
        assert len(puts_to(mock, REQUESTING_CONV, old_id)) == len(puts_to(mock, APPROVERS_CONV, old_routed_id)) == 1
        assert puts_to(mock, REQUESTING_CONV, new_id)


async def test_a_re_offer_that_cannot_be_posted_leaves_the_old_card_alone(
    tmp_path: Path, connector: tuple[MockConnector, str]
) -> None:
    """Replaced only after the new card is posted: no "shown again below" pointing at nothing."""
    mock, url = connector
    async with Bot(tmp_path / "store", ManualClock(), url) as bot:
        assert (await bot.say("please fetch https://example.com/data.csv"))[0] == 201
        mock.fail_cards = 1
        assert (await bot.say("hello?"))[0] == 201
        assert "withdrawn" in mock.texts()[-1]
        assert mock.puts() == []


async def test_r19_a_replay_that_re_offers_the_chained_card_makes_its_old_copy_read_only(
    tmp_path: Path, connector: tuple[MockConnector, str]
) -> None:
    """The other re-offer (core/protocol/resume.py): a second click on an answered card replays its answer and
    shows the still-open chained card again with a new secret; the chained card's first copy goes."""
    mock, url = connector
    async with Bot(tmp_path / "store", ManualClock(), url) as bot:
        assert (await bot.say("download https://a.example/1.csv then https://b.example/2.csv"))[0] == 201
        (first,) = cards_posted_in(mock, REQUESTING_CONV)
        invoke_card(*await bot.click("approve", card_data(first)))
        _, chained = cards_posted_in(mock, REQUESTING_CONV)
        chained_id = (await location(bot, chained))["activity_id"]
        replay = invoke_card(*await bot.click("approve", card_data(first)))
        assert "Already answered" in card_text(replay)
        _, _, again = cards_posted_in(mock, REQUESTING_CONV)
        assert card_data(again)["card_id"] == card_data(chained)["card_id"]
        assert card_data(again)["secret"] != card_data(chained)["secret"]
        assert_shown_again(mock, REQUESTING_CONV, chained_id)
        stale = invoke_card(*await bot.click("approve", card_data(chained)))
        assert "Unknown request" in card_text(stale)
        done = invoke_card(*await bot.click("approve", card_data(again)))
        assert "Approved by Alex Wilber" in card_text(done)
