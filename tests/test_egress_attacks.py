"""Issue 29: attacks on the egress gate that got out, each replayed against the real gate over real
sockets, with a canary origin on loopback that must never be reached."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from chat_approvals.core.egress import Gate, GateConfig, Run
from tests.gate_support import FakeGrants, start_site, wheel_bytes

USER, CHAT, TURN = "U1", "http:chat-1", "turn-1"


@dataclass
class Canary:
    """A loopback origin that records every request it is sent (path and headers)."""

    hits: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)

    def app(self) -> web.Application:
        async def any_path(request: web.Request) -> web.Response:
            self.hits.append((request.path_qs, list(request.headers.items())))
            return web.Response(text="canary secret\n")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", any_path)
        return app


@pytest.fixture
async def canary() -> AsyncIterator[tuple[Canary, int]]:
    c = Canary()
    runner, port = await start_site(c.app())
    try:
        yield c, port
    finally:
        await runner.cleanup()


async def raw(port: int, data: bytes, *, read_timeout: float = 10) -> bytes:
    """Send bytes to the gate and read everything it answers until it closes."""
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        w.write(data)
        await w.drain()
        return await asyncio.wait_for(r.read(), read_timeout)
    finally:
        w.close()


def auth(run: Run) -> str:
    return "Proxy-Authorization: Basic " + base64.b64encode(f"{run.username}:x".encode()).decode()


# ---- item 2: the package index follows no redirect ----


async def test_index_follows_no_redirect_for_files_or_pages(canary: tuple[Canary, int]) -> None:
    """A granted package whose file link and project page answer 302 to a loopback canary: the gate
    answers 502 and the canary is never reached (before: aiohttp followed both)."""
    c, cport = canary
    wheel = wheel_bytes("demo-pkg", "1.0")

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text='<a href="../../packages/demo_pkg-1.0-py3-none-any.whl">demo_pkg-1.0-py3-none-any.whl</a>',
            content_type="text/html",
        )

    async def to_canary(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{cport}/stolen{request.path}")

    async def good(request: web.Request) -> web.Response:
        return web.Response(body=wheel)

    app = web.Application()
    app.router.add_get("/simple/demo-pkg/", page)
    app.router.add_get("/simple/moved-pkg/", to_canary)
    app.router.add_get("/packages/{f}", to_canary)
    app.router.add_get("/ok/{f}", good)
    idx, iport = await start_site(app)
    grants = FakeGrants()
    for name in ("demo-pkg", "moved-pkg"):
        grants.grant(USER, CHAT, "package", name)
    gate = await Gate(GateConfig(package_index=f"http://127.0.0.1:{iport}/simple/"), backend=grants).start()
    try:
        run = gate.open_run(user=USER, chat=CHAT, turn_id=TURN)
        base = f"/run/{run.token}"
        out = await raw(gate.port, f"GET {base}/simple/demo-pkg/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 200")
        link = out.split(b'href="')[1].split(b'"')[0].decode()
        out = await raw(gate.port, f"GET {link} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 502") and b"canary" not in out, out
        out = await raw(gate.port, f"GET {base}/simple/moved-pkg/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 502") and b"canary" not in out, out
        assert c.hits == []
    finally:
        await gate.close()
        await idx.cleanup()
