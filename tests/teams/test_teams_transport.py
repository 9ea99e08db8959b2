"""Workaround 11 (bots/teams_transport.py): the pooled connector clients send with aiohttp on the
loop, not `requests` in a thread, and keep what msrest's requests pipeline did: the body as sent,
and urllib3 2's retries (a status msrest lists as unsafe retried for an update, PUT; never for a
new post, POST, which may have been processed). Real HTTP, to a connector stand-in. (R20: the
text arrives intact; R21: nothing is sent from a thread the loop waits on, and the proxy is read
off the loop.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from botbuilder.schema import Activity
from botframework.connector.aio import ConnectorClient
from msrest.exceptions import HttpOperationError

from chat_approvals.bots import teams_compat, teams_transport
from chat_approvals.bots.teams_compat import TeamsAuth


class Connector:
    """Answers each call with the next of `statuses` (then 200/201), recording what arrived."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.calls: list[tuple[str, bytes, dict[str, str]]] = []
        self.servers: list[TestServer] = []

    async def handle(self, req: web.Request) -> web.Response:
        self.calls.append((req.method, await req.read(), dict(req.headers)))
        if self.statuses:
            return web.json_response({"error": {"code": "X", "message": "injected"}}, status=self.statuses.pop(0),
                                     headers={"Retry-After": "0"})  # fmt: skip
        return web.json_response({"id": "42"}, status=201 if req.method == "POST" else 200)


@pytest.fixture
async def connector() -> AsyncIterator[tuple[Connector, ConnectorClient]]:
    stand_in = Connector()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stand_in.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    stand_in.servers.append(server)
    url = str(server.make_url(""))
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    turn = await auth.authenticate_request(Activity(type="message", channel_id="msteams", service_url=url), "")
    client = await turn.connector_factory.create(url, turn.audience)
    yield stand_in, client
    await client.__aexit__(None, None, None)
    await server.close()


def reply(text: str) -> Activity:
    return Activity(type="message", text=text, conversation={"id": "c1"}, from_property={"id": "bot"},
                    recipient={"id": "u1"}, reply_to_id="r1", channel_id="msteams")  # fmt: skip


async def test_a_reply_goes_out_on_the_loop_as_json_with_its_text_intact(connector: tuple[Connector, Any]) -> None:
    stand_in, client = connector
    assert isinstance(client.config.pipeline._sender, teams_transport.AiohttpSender)  # not requests in a thread
    sent = await client.conversations.reply_to_activity("c1", "r1", reply("Approved: café ☕ 𝔘"))
    assert sent.id == "42"
    ((method, body, headers),) = stand_in.calls
    assert method == "POST" and headers["Content-Type"].startswith("application/json")
    assert int(headers["Content-Length"]) == len(body)
    assert __import__("json").loads(body)["text"] == "Approved: café ☕ 𝔘"
    assert "Authorization" not in headers  # no app id: no token (teams_token_off_loop checks one is sent)


async def test_an_update_answered_503_is_retried_as_urllib3_would(connector: tuple[Connector, Any]) -> None:
    stand_in, client = connector
    stand_in.statuses = [503, 500]
    done = await client.conversations.update_activity("c1", "a1", reply("Approved"))
    assert done.id == "42"
    assert [m for m, _, _ in stand_in.calls] == ["PUT", "PUT", "PUT"]


async def test_an_update_gives_up_after_three_retries(connector: tuple[Connector, Any]) -> None:
    stand_in, client = connector
    stand_in.statuses = [503] * 5
    with pytest.raises(HttpOperationError):
        await client.conversations.update_activity("c1", "a1", reply("Approved"))
    assert len(stand_in.calls) == 1 + teams_transport.RETRIES


async def test_a_new_post_answered_500_is_not_sent_again(connector: tuple[Connector, Any]) -> None:
    """It may have been posted: a second copy would be worse than the refusal the caller handles."""
    stand_in, client = connector
    stand_in.statuses = [500]
    with pytest.raises(HttpOperationError):
        await client.conversations.reply_to_activity("c1", "r1", reply("a card"))
    assert len(stand_in.calls) == 1


async def test_the_proxy_the_environment_names_carries_the_replies(
    connector: tuple[Connector, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As requests and aiohttp's trust_env would: HTTP_PROXY (read once per host, off the loop)."""
    proxy, _ = connector
    proxy_url = str(next(iter(proxy.servers)).make_url(""))
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, proxy_url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    far = "http://connector.invalid/"  # reachable only through the proxy
    turn = await auth.authenticate_request(Activity(type="message", channel_id="msteams", service_url=far), "")
    client = await turn.connector_factory.create(far, turn.audience)
    try:
        for text in ("one", "two"):
            assert (await client.conversations.reply_to_activity("c1", "r1", reply(text))).id == "42"
    finally:
        await client.__aexit__(None, None, None)
    assert [m for m, _, _ in proxy.calls] == ["POST", "POST"]


async def test_a_client_dropped_from_the_pool_is_closed_after_its_grace(connector: tuple[Connector, Any]) -> None:
    """Past the pool's size the least recently used client goes; its aiohttp session (and socket)
    is closed once a turn that took it can no longer be sending, not left to the collector."""
    stand_in, _ = connector
    url = str(stand_in.servers[0].make_url(""))
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    auth.clients = teams_compat._ClientPool(size=1, retire_after=0.2)
    turn = await auth.authenticate_request(Activity(type="message", channel_id="msteams", service_url=url), "")
    first = await turn.connector_factory.create(url, turn.audience)
    await first.conversations.reply_to_activity("c1", "r1", reply("one"))
    sender = first.config.pipeline._sender
    assert sender._session is not None and not sender._session.closed
    second = await turn.connector_factory.create(url + "other/", turn.audience)  # the first is dropped
    assert second is not first and len(auth.clients) == 1
    assert not sender._session.closed  # still usable by a turn that took it
    await asyncio.sleep(0.5)
    assert sender._session is None  # closed
    await auth.clients.close()


async def test_an_attachment_asked_as_a_stream_is_streamed(connector: tuple[Connector, Any]) -> None:
    """stream=True (botbuilder's get_attachment): the body comes in chunks, each to the callback."""
    _, client = connector
    seen: list[bytes] = []
    chunks = await client.attachments.get_attachment("a1", "original", callback=lambda chunk, _: seen.append(chunk))
    got = [chunk async for chunk in chunks]
    assert b"".join(got) == b"".join(seen) == b'{"id": "42"}'
