"""Teams activities of a shape botbuilder cannot read, or holding text that is not valid Unicode,
are a 400 at the running server before any turn or claim (issue 27.1, 27.3; R20)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.clock import ManualClock
from tests.teams.harness import Bot, MockConnector, card_data

URL = "https://example.com/data.csv"
SURROGATE = "\ud800"


@pytest.fixture
async def bot(tmp_path: Path, connector: tuple[MockConnector, str]) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", ManualClock(), connector[1]) as b:
        yield b


@pytest.mark.parametrize(
    "over",
    [
        {"from": 5},
        {"from": {"id": ["x"]}},
        {"conversation": "x"},
        {"channelData": 7},
        {"value": [1]},
        {"text": 5},
        {"entities": {"0": {}}},
        {"text": f"please fetch {URL} x{SURROGATE}y"},
        {"from": {"id": f"29:{SURROGATE}", "aadObjectId": "a"}},
        {"channelData": {f"k{SURROGATE}": "a key"}},  # R20: the JSON text is scanned, keys too
        {"entities": [{"deep": [{"x": ["\udfff"]}]}]},
    ],
)
async def test_a_message_of_a_shape_teams_never_sends_is_a_400(
    bot: Bot, connector: tuple[MockConnector, str], over: dict[str, Any]
) -> None:
    mock, _ = connector
    status, _ = await bot.post(bot.activity("playground-message-text.json", **over))
    assert status == 400
    await bot.drain()
    assert mock.posts() == []  # no turn ran, nothing was said


async def test_a_deny_with_a_lone_surrogate_is_refused_and_the_card_stays_answerable(
    bot: Bot, connector: tuple[MockConnector, str]
) -> None:
    mock, _ = connector
    status, _ = await bot.say(f"please fetch {URL}")
    assert status == 201
    data = card_data(mock.posts()[-1]["body"]["attachments"][0]["content"])
    status, _ = await bot.click("deny", {**data, "reason": f"no {SURROGATE}"})
    assert status == 400
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "pending" and p.claim_count == 0
    status, body = await bot.click("approve", data)
    assert status == 200, body
    p = await bot.pointer(data["card_id"])
    assert p is not None and p.state == "done" and p.claim_count == 1
