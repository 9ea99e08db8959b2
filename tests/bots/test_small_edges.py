"""Issue 27's smaller edges, each through a real server: one refusal for the stated user on every
route, no controls or bidi overrides in users, chats and reasons; /readyz refuses while the store
cannot take a write; a pointer write that fails says so; /healthz says only "ok" to a stranger;
the access log redacts query values."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import AuditWrite, Pointer, SessionWrite
from chat_approvals.core.protocol.edge_wording import POINTER_NOT_SAVED
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import TOKEN, Api, make_approvals, serve
from tests.support.agents import Counter, scripted_factory
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

URL_TEXT = "please fetch https://data.example.org/table.csv"


# ------------------------------------------------------------------ users, chats and reasons


@pytest.mark.parametrize("user", [" alice", "alice ", "   ", "al\u202eice", "al\u2066ice", "al\x85ice", "al\tice"])
async def test_one_refusal_for_a_stated_user_on_every_route(api: Api, user: str) -> None:
    code, body = await api.turn("chat-u", "alice", URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval"
    card = body["card"]
    code, body = await api.turn("chat-v", user, "hello")
    assert code == 422, body
    code, body = await api.resume(card["card_id"], user, card["secret"])
    assert code == 422, body
    q = aiohttp.helpers.quote(user, safe="")  # type: ignore[attr-defined]
    code, body = await api.get(f"/v1/chats/chat-u/grants?user={q}")
    assert code == 422, body
    code, body = await api.delete(f"/v1/chats/chat-u/grants/all?user={q}")
    assert code == 422, body


@pytest.mark.parametrize("url", ["https://x.example/\x00a", "https://x.example/\x1b[2Ja", "https://x.\x9bexample/"])
async def test_a_url_with_a_control_character_makes_no_card(api: Api, url: str) -> None:
    """R20: a control character is never part of a URL (RFC 3986); the approval tool refuses it
    (the model is told why), so it never reaches a card, its text or the store (PostgreSQL's
    text refuses a NUL outright)."""
    code, body = await api.turn("chat-nul", "alice", f"please fetch {url}")
    assert code == 200 and body["status"] != "awaiting_approval", body
    code, body = await api.turn("chat-nul", "alice", URL_TEXT)  # the chat is not stuck
    assert code == 200 and body["status"] == "awaiting_approval", body


@pytest.mark.parametrize("chat", ["c\u202e1", "c\x001", "c\x9b1"])
async def test_a_chat_with_a_control_or_bidi_override_is_refused(api: Api, chat: str) -> None:
    code, body = await api.turn(chat, "alice", "hello")
    assert code == 422, body


async def test_a_deny_reason_with_a_bidi_override_is_refused_and_the_card_stays_answerable(api: Api) -> None:
    code, body = await api.turn("chat-r", "alice", URL_TEXT)
    card = body["card"]
    code, body = await api.resume(card["card_id"], "alice", card["secret"], approved=False, reason="no \u202egnp.exe")
    assert code == 422, body
    code, body = await api.resume(card["card_id"], "alice", card["secret"], approved=False, reason="not now")
    assert code == 200 and body["outcome"] == "resumed", body


# ------------------------------------------------------------------ a pointer write that fails


class PointerWriteFails(SqliteRows):
    def end_turn(
        self,
        chat: str,
        holder: str,
        *,
        now: float,
        pointer: Pointer | None = None,
        audit: Sequence[AuditWrite] = (),
        session: SessionWrite | None = None,
    ) -> bool:
        if pointer is not None:
            raise sqlite3.OperationalError("disk I/O error")
        return super().end_turn(chat, holder, now=now, pointer=pointer, audit=audit, session=session)


async def test_a_failed_pointer_write_says_what_happened(tmp_path: Path) -> None:
    clock = ManualClock()
    store = StoreIO(PointerWriteFails(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock))
    server = await serve(make_approvals(store, clock, scripted_factory(Counter())))
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, str(server.make_url("")).rstrip("/"))
            code, body = await api.turn("chat-p", "alice", URL_TEXT)
            assert code == 200 and body["text"] == POINTER_NOT_SAVED, body
            assert "already open" not in body["text"]
    finally:
        await server.close()
        store.close()


# ------------------------------------------------------------------ /readyz under a held write lock


@pytest.fixture
async def ready_server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    clock = ManualClock()
    db = tmp_path / "r.db"
    store = StoreIO(SqliteRows(db), FileObjects(tmp_path / "o", clock=clock))
    approvals = make_approvals(store, clock, scripted_factory(Counter()))
    from aiohttp.test_utils import TestServer

    server = TestServer(build_app(approvals, ServerConfig(api_token=TOKEN, readyz_timeout=0.5), sweep=False))
    await server.start_server()
    yield str(server.make_url("")).rstrip("/"), db
    await server.close()
    store.close()


async def test_readyz_is_503_while_the_store_cannot_take_a_write(ready_server: tuple[str, Path]) -> None:
    base, db = ready_server
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{base}/readyz") as r:
            assert r.status == 200, await r.text()
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holding the write lock
        try:
            started = asyncio.get_running_loop().time()
            async with session.get(f"{base}/readyz") as r:
                body: dict[str, Any] = await r.json()
                assert r.status == 503 and "write" in body["reason"], body
            assert asyncio.get_running_loop().time() - started < 2.0  # bounded by --readyz-timeout
            async with session.get(f"{base}/healthz") as r:
                assert r.status == 200  # liveness is not readiness
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        for _ in range(100):  # the probe still in flight finishes once the lock is free
            async with session.get(f"{base}/readyz") as r:
                if r.status == 200:
                    break
            await asyncio.sleep(0.05)
        assert r.status == 200


# ------------------------------------------------------------------ /healthz and the access log


def _outside_address() -> str | None:
    """An address of this machine that is not loopback (a client from it is a stranger)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: only the route is looked up
            address: str = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


async def test_healthz_details_and_the_access_log(tmp_path: Path) -> None:
    outside = _outside_address()
    if outside is None:
        pytest.skip("this machine has no address but loopback")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env["CHAT_APPROVALS_STORE"] = f"sqlite:///{tmp_path}/rows.db"
    cli = os.path.join(os.path.dirname(sys.executable), "chat-approvals")
    args = [cli, "serve", "--host", "0.0.0.0", "--port", str(port), "--api-token", TOKEN]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        await wait_healthy(proc, port)
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://{outside}:{port}/healthz") as r:
                assert r.status == 200 and await r.json() == {"ok": True}
            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with session.get(f"http://{outside}:{port}/healthz", headers=auth) as r:
                assert "store" in await r.json()
            async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                assert "store" in await r.json()
            url = f"http://127.0.0.1:{port}/v1/chats/chat-1/grants?user=alice-the-stated-id"
            async with session.get(url, headers=auth) as r:
                assert r.status == 200
    finally:
        await stop(proc)
    out, err = proc.communicate(timeout=10)
    logged = (out + err).decode()
    assert "/grants?user=" in logged, logged[-2000:]  # the access log has the line
    # with aiohttp's own start time, to the second and with its UTC offset (bots/logs.AccessLog)
    assert re.search(r'\[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] "GET /v1/chats/chat-1/grants', logged)
    assert "alice-the-stated-id" not in logged
