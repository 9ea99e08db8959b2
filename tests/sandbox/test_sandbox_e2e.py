"""End to end through the HTTP front end with the offline model and the real sandbox and gate:
the script is blocked -> the card names the refused host -> approve -> the second run downloads
-> the reply quotes it; deny -> the model continues without the data and says so."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.tools import make_run_script
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from tests.conftest import TOKEN, Api
from tests.support.gate_support import origin_app, start_site

URL = "http://files.test/hello"


@dataclass
class Rig:
    api: Api
    approvals: Approvals
    store: StoreIO


@pytest.fixture
async def rig(store: StoreIO, clock: ManualClock) -> AsyncIterator[Rig]:
    origin, port = await start_site(origin_app("http"))
    gate = Gate(GateConfig(resolve=[f"files.test=127.0.0.1:{port}", f"other.test=127.0.0.1:{port}"]), clock=clock)
    factory = default_factory("scripted", [make_run_script(gate, timeout=30)])
    approvals = bootstrap(store, settings=Settings(), clock=clock, agent_factory=factory).approvals
    app = build_app(approvals, ServerConfig(api_token=TOKEN), sweep=False, gate=gate)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        assert gate.port != 0  # started with the app
        async with aiohttp.ClientSession() as session:
            yield Rig(Api(session, base), approvals, store)
    finally:
        await runner.cleanup()
        await origin.cleanup()
    assert gate.port != 0 and gate._servers == []  # and stopped with it


async def test_r3_blocked_card_names_host_approve_second_run_downloads(rig: Rig) -> None:
    code, body = await rig.api.turn("chat-e2e", "alice", f"please fetch {URL}")
    assert code == 200 and body["status"] == "awaiting_approval", body
    card = body["card"]
    assert card["sites"] == ["files.test"] and card["urls"] == [URL]  # from the gate's refusal (R3)
    [ref] = rig.store.rows.list_refusals("chat-e2e", rig.store.rows.get_pointer("chat-e2e").turn_id)  # type: ignore[union-attr]
    assert (ref.kind, ref.name, ref.port, ref.url) == ("site", "files.test", 80, URL)
    code, res = await rig.api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and res["outcome"] == "resumed", res
    assert res["result"]["status"] == "answered"
    assert res["result"]["text"] == f"Downloaded {URL}: one line, “hello from files.test over http” (32 bytes)."
    # the grant stays for the chat: a new turn downloads at once, no card
    code, body = await rig.api.turn("chat-e2e", "alice", f"again {URL}")
    assert body["status"] == "answered" and "“hello from files.test over http”" in body["text"]
    # revoked: the next run is refused again and asks again
    code, gone = await rig.api.delete("/v1/chats/chat-e2e/grants/files.test?user=alice")
    assert code == 200 and [g["name"] for g in gone["revoked"]] == ["files.test"]
    code, body = await rig.api.turn("chat-e2e", "alice", f"once more {URL}")
    assert body["status"] == "awaiting_approval" and body["card"]["sites"] == ["files.test"]


async def test_r16_deny_model_continues_without_the_data_and_says_so(rig: Rig) -> None:
    code, body = await rig.api.turn("chat-deny", "bob", f"get {URL}")
    card = body["card"]
    code, res = await rig.api.resume(card["card_id"], "bob", card["secret"], approved=False)
    assert code == 200 and res["outcome"] == "resumed", res
    text = res["result"]["text"]
    assert text == f"Not downloaded: you denied {URL}."  # for the person: no instruction meant for the model
    assert "files.test" in text and "hello from files.test" not in text
    assert rig.store.rows.list_grants("bob", "chat-deny", 0) == []


async def test_r13_download_then_download_chains_a_second_card_for_the_second_host(rig: Rig) -> None:
    other = "http://other.test/hello"
    code, body = await rig.api.turn("chat-chain", "carol", f"download {URL} then {other}")
    first = body["card"]
    assert first["sites"] == ["files.test"]
    code, res = await rig.api.resume(first["card_id"], "carol", first["secret"])
    assert res["outcome"] == "resumed" and res["result"]["status"] == "awaiting_approval", res
    second = res["result"]["card"]
    assert second["sites"] == ["other.test"] and second["urls"] == [other]  # files.test is approved already
    code, res = await rig.api.resume(second["card_id"], "carol", second["secret"])
    assert res["outcome"] == "resumed" and res["result"]["status"] == "answered", res
    assert res["result"]["text"] == (
        f"Downloaded {URL}: one line, “hello from files.test over http” (32 bytes).\n"
        f"Downloaded {other}: one line, “hello from other.test over http” (32 bytes)."
    )


async def test_r6_unattended_run_is_blocked_and_continues_without(rig: Rig) -> None:
    code, body = await rig.api.turn("chat-cron", "dave", f"get {URL}", unattended=True)
    assert code == 200 and body["status"] == "answered", body
    assert body["text"].startswith(f"Not downloaded, {URL}: Access denied: download approval cannot be asked")
    assert "files.test" in body["text"] and rig.store.rows.get_pointer("chat-cron") is None  # no card


async def test_r18_no_card_ever_for_a_loopback_or_private_address(rig: Rig) -> None:
    """10.x goes to the gate (NO_PROXY sends 127.0.0.1 straight into the sandbox's own empty
    loopback): both fail, no refusal is recorded and no card appears."""
    for chat, url, why in [
        ("chat-lo", "http://127.0.0.1:9/x", "Could not download http://127.0.0.1:9/x: the site could not be reached."),
        ("chat-priv", "http://10.1.2.3/x", "Could not download http://10.1.2.3/x: the site answered 403 Forbidden."),
    ]:
        code, body = await rig.api.turn(chat, "eve", f"please fetch {url}")
        assert code == 200 and body["status"] == "answered", body
        assert body.get("card") is None and rig.store.rows.get_pointer(chat) is None
        assert why in body["text"], body["text"]
