"""A claimed card's "Resuming…" (bots/slack_app.py): shown only once the resumed turn has run for
`CHAT_APPROVALS_SLACK_RESUMING_AFTER` seconds (default 0.5). A quicker turn goes straight to its
outcome: one chat.update less per click (Slack rate-limits it per workspace), no flash. Whatever
the timing, the card never ends on "Resuming…" (R12) and an approver never sees a slow turn without
a sign that their click took (R22).

Real signed HTTP to the running server and the Web API stand-in. A tool in the resumed turn holds
it until the test lets it go, so "slow" and "quick" are decided by the test, not by the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chat_approvals.bots.slack_config import DEFAULT_RESUMING_AFTER, SlackConfig
from chat_approvals.core.models import ResumeResult
from tests.bots.test_admission import Hold, held_factory
from tests.support.slack_rig import SlackRig
from tests.support.slack_standin import Call

DELAY = 0.3  # seconds: short, so the slow-turn tests do not wait long
QUICK_DELAY = 1.0  # the quick-turn test's: a turn let go at once ends well inside it, even under load


def texts(calls: list[Call]) -> list[str]:
    return [json.dumps(c.args.get("blocks")) for c in calls]


def states(rig: SlackRig) -> list[str]:
    """Each chat.update of the card so far, as the approver saw it."""
    return [
        "resuming" if "Resuming" in t else "approved" if "Approved" in t else t
        for t in texts(rig.standin.of("chat.update"))
    ]


@pytest.fixture
def hold() -> Iterator[Hold]:
    h = Hold()
    yield h
    h.release()


@contextlib.asynccontextmanager
async def running(hold: Hold, delay: float) -> AsyncIterator[SlackRig]:
    r = await SlackRig(factory=held_factory(hold), resuming_after=delay).start()
    try:
        yield r
    finally:
        hold.release()
        await r.stop()


@pytest.fixture
async def rig(hold: Hold) -> AsyncIterator[SlackRig]:
    async with running(hold, DELAY) as r:
        yield r


async def open_card(rig: SlackRig) -> Call:
    assert await rig.dm("download <https://example.org/data.csv>") == (200, "")
    await rig.standin.wait_for(lambda s: bool(rig.card_calls()))
    await rig.settle()
    (card,) = rig.card_calls()
    return card


async def test_r12_a_quick_turn_goes_straight_to_its_outcome_and_no_late_resuming_follows(hold: Hold) -> None:
    """The turn is let go as soon as it runs: the card goes from its buttons to "Approved" in one
    update. After the delay has passed, still only that update: the pending "Resuming…" was
    dropped, not sent late over the outcome."""
    async with running(hold, QUICK_DELAY) as rig:
        card = await open_card(rig)
        hold.release()  # the resumed turn passes straight on
        clicked = time.monotonic()
        assert await rig.click(rig.click_payload(card)) == (200, "")
        await rig.standin.wait_for(lambda s: "approved" in states(rig))
        assert time.monotonic() - clicked < QUICK_DELAY, "the machine was too slow to show a quick turn"
        await rig.settle()
        await asyncio.sleep(clicked + QUICK_DELAY + 0.3 - time.monotonic())  # a "Resuming…" not dropped lands by now
        assert states(rig) == ["approved"]
        assert len([c for c in rig.standin.of("chat.postMessage") if c is not card]) == 1  # the reply


async def test_r22_a_slow_turn_shows_resuming_while_it_runs_then_its_outcome(rig: SlackRig, hold: Hold) -> None:
    """The turn is held past the delay: "Resuming…" appears while it runs (the approver sees the
    click took), and the outcome replaces it when it ends."""
    card = await open_card(rig)
    assert await rig.click(rig.click_payload(card)) == (200, "")
    await hold.wait_entered()
    await rig.standin.wait_for(lambda s: bool(s.of("chat.update")), timeout=10)
    assert states(rig) == ["resuming"]  # shown while the turn is still held
    hold.release()
    await rig.standin.wait_for(lambda s: "approved" in states(rig))
    await rig.settle()
    assert states(rig) == ["resuming", "approved"]


async def test_r12_a_second_click_of_the_same_person_does_not_drop_the_winner_s_resuming(
    rig: SlackRig, hold: Hold
) -> None:
    """Five clicks of the owner at once (two windows, a double click): one claim wins and its turn
    is held. The other clicks end first; they must not drop the "Resuming…" the held turn still
    needs, and it is shown once, before the one outcome."""
    card = await open_card(rig)
    payload = rig.click_payload(card)
    assert await asyncio.gather(*(rig.click(payload) for _ in range(5))) == [(200, "")] * 5
    await hold.wait_entered()
    await rig.standin.wait_for(lambda s: bool(s.of("chat.update")), timeout=10)
    hold.release()
    await rig.standin.wait_for(lambda s: "approved" in states(rig))
    await rig.settle()
    seen = states(rig)
    assert seen.count("resuming") == 1 and seen[0] == "resuming" and seen[-1] == "approved", seen
    assert len([c for c in rig.standin.of("chat.postMessage") if c is not card]) == 1  # resumed once


async def test_r12_a_resuming_still_on_its_way_lands_before_the_outcome(
    hold: Hold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn is held past the delay, so "Resuming…" is sent, but its chat.update is slow (Slack
    rate-limits it per workspace). The turn ends while it is on its way: the click's outcome waits
    for it, so the card ends on the outcome, never on "Resuming…" (R12)."""
    async with running(hold, DELAY) as rig:
        card = await open_card(rig)
        real_update, real_settle = rig.front.web.update, rig.front._settle_resuming
        on_its_way, settled = asyncio.Event(), asyncio.Event()

        async def settle(click: Any, **kw: Any) -> None:
            await real_settle(click, **kw)
            settled.set()

        async def update(loc: Any, msg: Any, **kw: Any) -> Any:
            if not on_its_way.is_set():  # the card's first update after the click: its "Resuming…"
                on_its_way.set()
                with contextlib.suppress(TimeoutError):  # slow: until the click settles, 1 s at most
                    await asyncio.wait_for(settled.wait(), 1.0)
                if settled.is_set():  # the click went on without waiting for it: it lands last
                    await rig.standin.wait_for(lambda s: "approved" in states(rig), timeout=10)
            return await real_update(loc, msg, **kw)

        monkeypatch.setattr(rig.front.web, "update", update)
        monkeypatch.setattr(rig.front, "_settle_resuming", settle)
        assert await rig.click(rig.click_payload(card)) == (200, "")
        await hold.wait_entered()
        await asyncio.wait_for(on_its_way.wait(), 10)
        hold.release()
        await rig.standin.wait_for(lambda s: "approved" in states(rig))
        await rig.settle()
        assert states(rig) == ["resuming", "approved"]


def test_the_delay_defaults_to_half_a_second_and_zero_shows_it_at_once() -> None:
    base = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}
    assert SlackConfig.from_env(base).resuming_after == DEFAULT_RESUMING_AFTER == 0.5
    assert SlackConfig.from_env({**base, "CHAT_APPROVALS_SLACK_RESUMING_AFTER": "0"}).resuming_after == 0
    assert SlackConfig.from_env({**base, "CHAT_APPROVALS_SLACK_RESUMING_AFTER": " 2.5 "}).resuming_after == 2.5


@pytest.mark.parametrize("value", ["soon", "-1", "61", "nan", "inf", str(math.pi * 100)])
def test_a_bad_delay_is_refused_by_name(value: str) -> None:
    env = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "CHAT_APPROVALS_SLACK_RESUMING_AFTER": value}
    with pytest.raises(
        ValueError, match="CHAT_APPROVALS_SLACK_RESUMING_AFTER must be a number of seconds from 0 to 60"
    ):
        SlackConfig.from_env(env)


async def test_r12_a_stalled_second_click_does_not_send_resuming_over_the_outcome(
    hold: Hold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two clicks of the owner at once; both are waiting when the claim is won, so both hold its
    "Resuming…". The turn ends quickly, but the losing click's resume stalls (a slow store) past
    the delay. The turn is over once the winning click ends: the unsent "Resuming…" is dropped
    then, and never lands over the outcome while the stalled click still waits."""
    async with running(hold, QUICK_DELAY) as rig:
        card = await open_card(rig)
        real = rig.front.approvals.resume
        both_in, loser_back, loser_go = asyncio.Event(), asyncio.Event(), asyncio.Event()
        entered = 0

        async def resume(**kw: Any) -> ResumeResult:
            nonlocal entered
            entered += 1
            if entered == 2:
                both_in.set()
            await asyncio.wait_for(both_in.wait(), 10)  # both clicks wait before the claim is won
            res = await real(**kw)
            if res.outcome != "resumed":
                loser_back.set()
                await asyncio.wait_for(loser_go.wait(), 10)  # the losing click's stall
            return res

        monkeypatch.setattr(rig.front.approvals, "resume", resume)
        payload = rig.click_payload(card)
        clicked = time.monotonic()
        assert await asyncio.gather(rig.click(payload), rig.click(payload)) == [(200, "")] * 2
        await hold.wait_entered()  # the claim is won by now
        claimed_by = time.monotonic()
        await asyncio.wait_for(loser_back.wait(), 10)
        hold.release()
        await rig.standin.wait_for(lambda s: "approved" in states(rig))
        assert time.monotonic() - clicked < QUICK_DELAY, "the machine was too slow to show a quick turn"
        await asyncio.sleep(claimed_by + QUICK_DELAY + 0.3 - time.monotonic())  # an undropped one lands by now
        assert states(rig) == ["approved"]
        loser_go.set()
        await rig.settle()
        assert states(rig) == ["approved"]
        assert len([c for c in rig.standin.of("chat.postMessage") if c is not card]) == 1  # resumed once
