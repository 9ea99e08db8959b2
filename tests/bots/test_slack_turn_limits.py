"""What a turn may carry (issue 27.2) on Slack: a signed message naming more URLs or hosts than a
turn may is answered with a plain reply in its thread, and no turn starts (no card, nothing in
the audit), through the running server."""

from __future__ import annotations

import pytest

from chat_approvals.bots.turn_limits import MAX_HOSTS, MAX_URLS
from chat_approvals.cards.slack_chat import chat_key
from tests.support import slack_payloads as P
from tests.support.slack_rig import DM, OWNER, SlackRig

TOO_MANY_URLS = " ".join(f"<https://example.org/{n}.csv>" for n in range(MAX_URLS + 1))
TOO_MANY_HOSTS = " ".join(f"<https://h{n}.example.org/a.csv>" for n in range(MAX_HOSTS + 1))


@pytest.mark.parametrize(("text", "why"), [(TOO_MANY_URLS, "URLs"), (TOO_MANY_HOSTS, "hosts")])
async def test_a_message_past_the_turn_caps_gets_a_reply_and_no_turn(rig: SlackRig, text: str, why: str) -> None:
    ts = rig.next_ts()
    payload = P.message_im(text=f"download {text}", user=OWNER, channel=DM, event_id=f"Ev{ts}", ts=ts)
    assert await rig.send(*P.json_body(payload)) == (200, "")
    await rig.standin.wait_for(lambda s: len(s.of("chat.postMessage")) >= 1)
    await rig.settle()
    posts = rig.standin.of("chat.postMessage")
    assert len(posts) == 1 and rig.card_calls() == []
    assert posts[0].args["text"].startswith("Not started:") and "more than" in posts[0].args["text"]
    assert why in posts[0].args["text"]
    assert posts[0].args["thread_ts"] == ts
    assert await rig.approvals.audit(chat_key(P.TEAM, DM, ts)) == []  # no turn, no lease, no card


async def test_a_message_at_the_caps_still_starts_a_turn(rig: SlackRig) -> None:
    at_cap = " ".join(f"<https://h{n % MAX_HOSTS}.example.org/{n}.csv>" for n in range(MAX_URLS))
    cards = await rig.owner_says(f"download {at_cap}")
    assert len(cards) == 1
