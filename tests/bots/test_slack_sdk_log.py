"""slack_sdk's debug lines cost a click's CPU only when they are written (issue 34, target 2).

slack_sdk formats each request's whole body into a debug line whenever `logger.level <= DEBUG`,
and its own logger, left at NOTSET (0), always passes that test. The client the front end builds
(`web_client`) reads the level in effect instead: no line is built at INFO; at DEBUG the lines
are still written. Real calls, over HTTP, to the Slack stand-in."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from chat_approvals.bots.slack_config import SlackConfig, web_client
from tests.support.slack_standin import SlackStandIn


class Counted(str):
    """A block's text that counts how often it is formatted as a repr (what slack_sdk's debug
    line does to the request's JSON); json.dumps sends it as a plain string."""

    reprs = 0

    def __repr__(self) -> str:
        Counted.reprs += 1
        return super().__repr__()


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    s = await SlackStandIn().start()
    yield s
    await s.stop()


async def _post(standin: SlackStandIn) -> None:
    cfg = SlackConfig(bot_token="xoxb-test", signing_secret="s" * 32, api_url=standin.api_url)
    client = web_client(cfg, cfg.bot_token)
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": Counted("Resuming…")}}]
    await client.chat_postMessage(channel="C1", text="Resuming…", blocks=blocks)
    assert "Resuming…" in str(standin.of("chat.postMessage")[-1].args["blocks"])  # sent as a plain string


async def test_at_info_no_debug_line_is_built(standin: SlackStandIn, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    Counted.reprs = 0
    await _post(standin)
    assert Counted.reprs == 0  # slack_sdk's own logger would have formatted the body once
    assert not [r for r in caplog.records if r.name.startswith("slack_sdk") and r.levelno < logging.INFO]


async def test_at_debug_the_lines_are_still_written(standin: SlackStandIn, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    Counted.reprs = 0
    await _post(standin)
    sent = [r.getMessage() for r in caplog.records if r.name == "slack_sdk.web.async_base_client"]
    assert any(m.startswith("Sending a request") and "Resuming" in m for m in sent), sent
    assert Counted.reprs >= 1
