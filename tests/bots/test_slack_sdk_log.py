"""slack_sdk's debug lines cost a click's CPU only when they are written, and its URLs are made
once (issue 34, target 2).

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


async def test_each_call_reaches_its_own_base_url_and_method(standin: SlackStandIn) -> None:
    """slack_sdk's URL for a call is made once per base URL and method (`remember_urls`): calls on
    two Slack stand-ins (two base URLs), three methods each, each reach their own; and every URL is
    slack_sdk's own join. No rule covers the URL's making."""
    from urllib.parse import urljoin

    from slack_sdk.web import async_base_client

    other = await SlackStandIn().start()
    try:
        for s in (standin, other, standin):
            cfg = SlackConfig(bot_token="xoxb-test", signing_secret="s" * 32, api_url=s.api_url)
            client = web_client(cfg, cfg.bot_token)
            posted = await client.api_call("chat.postMessage", json={"channel": "C1", "text": "hi"})
            await client.api_call("chat.update", json={"channel": "C1", "ts": posted["ts"], "text": "hi"})
            await client.api_call("auth.test")
        assert [c.method for c in standin.calls] == ["chat.postMessage", "chat.update", "auth.test"] * 2
        assert [c.method for c in other.calls] == ["chat.postMessage", "chat.update", "auth.test"]
    finally:
        await other.stop()
    for base in (standin.api_url, "https://slack.com/api/", "https://example.test/x/api/"):
        for method in ("chat.update", "/chat.update", "views.open"):
            assert async_base_client._get_url(base, method) == urljoin(base, method.lstrip("/"))
