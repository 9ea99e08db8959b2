"""Two `chat-approvals serve` replicas on one PostgreSQL database, and the database restarted in
the middle of a burst of clicks (issue 30).

Every click gets an answer (200 with an outcome, or 503 "try again"; never a 500 or a hang); no
card is resumed twice; every card is resumed once the database is back. While it is down,
/readyz on both replicas answers 503 with the reason; after, 200. The racing clicks and the SIGKILL
mid-resume run on PostgreSQL in tests/test_replicas.py (its Cluster is parametrized). Then the
database down under the Slack and Teams front ends: the same "try again" as any store fault.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from collections import Counter as Tally
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.protocol.wording import STORE_UNAVAILABLE
from tests.support.slack_rig import SlackRig
from tests.support.store_backends import PG, pg_schema, require_env
from tests.teams.harness import Bot, MockConnector, card_data
from tests.test_replicas import Cluster, Replica, _click, _turn

URL_TEXT = "please fetch https://data.example.org/table.csv"

PG_CTL = "CHAT_APPROVALS_TEST_PG_CTL"
CARDS = 16


def _pg(command: str) -> None:
    """The test cluster's own script (scripts/test.d/30-postgres.sh): stop-server / start-server."""
    subprocess.run(["bash", os.environ[PG_CTL], command], check=True, timeout=120)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    require_env(PG, PG_CTL)
    c = Cluster(tmp_path, "postgresql")
    try:
        yield c
    finally:
        if _down():  # the test stopped it and failed before starting it again
            _pg("start-server")
        c.stop()


def _down() -> bool:
    import psycopg

    try:
        psycopg.connect(os.environ[PG], connect_timeout=2).close()
        return False
    except psycopg.OperationalError:
        return True


async def _ready(s: aiohttp.ClientSession, r: Replica) -> tuple[int, dict]:
    async with s.get(f"{r.base}/readyz") as resp:
        return resp.status, await resp.json()


@pytest.mark.slow
async def test_database_restarted_mid_burst_every_click_answered_no_card_lost_or_resumed_twice(
    cluster: Cluster,
) -> None:
    # short statement/pool timeouts so a click during the outage is answered quickly; a short lease so a
    # claim stranded by the outage (its finish failed) is taken over after it
    a = cluster.start("a", lease=3.0)
    b = cluster.start("b", lease=3.0)
    answers: list[tuple[int, str]] = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        cards = [await _turn(s, (a, b)[i % 2], f"http:burst{i}") for i in range(CARDS)]
        assert await _ready(s, a) == (200, {"ready": True})

        async def until_final(i: int, card: dict) -> str:
            """Click (alternating replicas) until the card has a final outcome; every answer recorded."""
            await asyncio.sleep(i * 0.15)  # the burst is spread over ~2.5 s: the outage falls inside it
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                status, res = await _click(s, (a, b)[i % 2], card)
                outcome = str(res.get("outcome"))
                answers.append((status, outcome))
                assert status in (200, 503), (status, res)
                if status == 503:
                    assert "try again" in res["message"], res
                elif outcome in ("resumed", "replayed"):
                    return outcome
                else:
                    assert outcome == "in_progress", res
                i += 1
                await asyncio.sleep(0.2)
            raise AssertionError(f"card {card['card_id']} had no final answer")

        burst = [asyncio.create_task(until_final(i, c)) for i, c in enumerate(cards)]
        await asyncio.sleep(0.5)  # some clicks are in, the rest to come
        await asyncio.to_thread(_pg, "stop-server")
        down = [await _ready(s, r) for r in (a, b)]
        await asyncio.sleep(1.5)  # clicks keep arriving while it is down
        await asyncio.to_thread(_pg, "start-server")
        finals = await asyncio.gather(*burst)
        up = await _ready(s, a)

    for status, body in down:
        assert status == 503 and body["ready"] is False and "store" in body["reason"], body
    assert up == (200, {"ready": True})
    tally = Tally(answers)
    print("answers over the burst:", dict(tally))
    assert all(f in ("resumed", "replayed") for f in finals)
    rows = cluster.rows()
    resumed_once = 0
    for i, card in enumerate(cards):
        p = rows.get_pointer(f"http:burst{i}")
        assert p is not None and p.card.card_id == card["card_id"]
        assert p.state == "done" and p.answer_key is not None, p  # none lost
        resumed_once += 1
    assert resumed_once == CARDS
    # "resumed" is said once per card: no card's turn was finished twice
    assert sum(1 for st, o in answers if (st, o) == (200, "resumed")) == CARDS, tally
    assert tally[(503, "unavailable")] >= 1, tally  # the outage was met, and answered "try again"
    # the post-approval work ran once per card, unless the outage struck between a claim and its
    # finish: that click was answered "try again", and the takeover after the lease ran the work again
    # (at-least-once work, exactly-once resume); never more often than the outage answered a click
    work = len(cluster.work())
    assert CARDS <= work <= CARDS + tally[(503, "unavailable")], (work, tally)


# --- the database down under the Slack and Teams front ends: the same "try again" as today ------


@pytest.fixture
def pg_down_url() -> Iterator[str]:
    """A fresh schema on the test server, with a short pool wait (a click meets the outage at once)."""
    require_env(PG, PG_CTL)
    with pg_schema() as url:
        try:
            yield f"{url}&pool_timeout=1"
        finally:
            if _down():
                _pg("start-server")


async def test_slack_click_while_the_database_is_down_is_told_so_and_the_card_resumes_after(
    pg_down_url: str,
) -> None:
    rig = await SlackRig(store=pg_down_url).start()
    try:
        await rig.dm("download <https://example.org/a.csv>")
        await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
        await rig.settle()
        card = rig.card_calls()[-1]
        await asyncio.to_thread(_pg, "stop-server")
        try:
            assert (await rig.click(rig.click_payload(card)))[0] == 200  # acked at once all the same
            await rig.standin.wait_for(lambda s: len(s.of("chat.postEphemeral")) >= 1)
            await rig.settle()
        finally:
            await asyncio.to_thread(_pg, "start-server")
        (told,) = rig.standin.of("chat.postEphemeral")
        assert STORE_UNAVAILABLE in json.dumps(told.args)
        assert not rig.standin.of("chat.update")  # the card was not touched
        deadline = time.monotonic() + 30  # the pool reconnects in the background
        while not rig.standin.of("chat.update") and time.monotonic() < deadline:
            await rig.click(rig.click_payload(card))
            await rig.settle()
            await asyncio.sleep(0.3)
        assert rig.standin.of("chat.update"), "the card never resumed after the database came back"
    finally:
        await rig.stop()


async def test_teams_click_while_the_database_is_down_is_503_and_the_card_resumes_after(
    pg_down_url: str, tmp_path: Path
) -> None:
    mock = MockConnector()
    server = TestServer(mock.app(), host="127.0.0.1")
    await server.start_server()
    try:
        async with Bot(
            tmp_path / "store", ManualClock(), str(server.make_url("/_connector")), store=pg_down_url
        ) as bot:
            assert (await bot.say(URL_TEXT))[0] == 201
            card = card_data(mock.posts()[-1]["body"]["attachments"][0]["content"])
            await asyncio.to_thread(_pg, "stop-server")
            try:
                status, body = await bot.click("approve", card)
            finally:
                await asyncio.to_thread(_pg, "start-server")
            assert body["statusCode"] == 503 and body["value"]["message"] == STORE_UNAVAILABLE, body
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                status, body = await bot.click("approve", card)
                if body["statusCode"] != 503:
                    break
                await asyncio.sleep(0.3)
            assert status == 200 and body["statusCode"] == 200, body
    finally:
        await server.close()
