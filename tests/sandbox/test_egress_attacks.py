"""Issue 29: attacks on the egress gate that got out, each replayed against the real gate over real
sockets, with a canary origin on loopback that must never be reached."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from chat_approvals.core.sandbox.egress import Gate, GateConfig, Run
from tests.support.gate_support import FakeGrants, start_site, wheel_bytes

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


# ---- item 7: one request per proxy connection, a strict parser, the Host in a plain-HTTP tunnel ----


class RawOrigin:
    """A loopback origin that answers the first head and records every byte it is ever sent on
    each connection (a stdlib or aiohttp origin would hide a smuggled second request's bytes)."""

    def __init__(self) -> None:
        self.conns: list[bytes] = []

    async def handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        got = b""
        try:
            got = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            await w.drain()
            while data := await asyncio.wait_for(r.read(65536), 0.5):
                got += data
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.conns.append(got)
            w.close()

    def requests(self) -> int:
        return sum(c.count(b" HTTP/1.1\r\n") for c in self.conns)


@pytest.fixture
async def smuggle() -> AsyncIterator[tuple[Gate, Run, RawOrigin]]:
    origin = RawOrigin()
    srv = await asyncio.start_server(origin.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    grants = FakeGrants()
    grants.grant(USER, CHAT, "site", "files.test")
    gate = await Gate(GateConfig(resolve=[f"files.test=127.0.0.1:{port}"]), backend=grants).start()
    try:
        yield gate, gate.open_run(user=USER, chat=CHAT, turn_id=TURN), origin
    finally:
        await gate.close()
        srv.close()


async def settle(origin: RawOrigin) -> None:
    await asyncio.sleep(0.3)  # the origin records a connection when it ends


async def test_pipelined_second_request_never_reaches_the_origin(smuggle: tuple[Gate, Run, RawOrigin]) -> None:
    gate, run, origin = smuggle
    for body, framing in [(b"", ""), (b"hello", "Content-Length: 5\r\n"),
                          (b"5\r\nhello\r\n0\r\n\r\n", "Transfer-Encoding: chunked\r\n")]:  # fmt: skip
        origin.conns.clear()
        second = b"GET /b HTTP/1.1\r\nHost: evil.test\r\n\r\n"
        first = f"POST http://files.test/a HTTP/1.1\r\nHost: files.test\r\n{auth(run)}\r\n{framing}\r\n".encode()
        out = await raw(gate.port, first + body + second)
        await settle(origin)
        assert out.startswith(b"HTTP/1.1 200"), out
        assert origin.requests() == 1 and b"evil.test" not in b"".join(origin.conns), origin.conns
        assert b"hello" in origin.conns[0] or not body


@pytest.mark.parametrize(
    "headers",
    [
        "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n",  # CL.TE
        "Transfer-Encoding: chunked\r\nContent-Length: 6\r\n",  # TE.CL
        "Transfer-Encoding: gzip, chunked\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
        "Host: evil.test\r\n",  # a second Host
        "X-A: 1\nHost: evil.test\r\n",  # a bare LF inside a value
        "X-A: 1\rHost: evil.test\r\n",  # a bare CR
        " Host: evil.test\r\n",  # a folded line
    ],
)
async def test_ambiguous_requests_are_refused(smuggle: tuple[Gate, Run, RawOrigin], headers: str) -> None:
    gate, run, origin = smuggle
    req = f"POST http://files.test/a HTTP/1.1\r\nHost: files.test\r\n{auth(run)}\r\n{headers}\r\n"
    req += "0\r\n\r\nGET /b HTTP/1.1\r\n\r\n"
    out = await raw(gate.port, req.encode())
    await settle(origin)
    assert out.startswith(b"HTTP/1.1 400"), out
    assert origin.conns == []


async def test_plain_http_tunnel_carries_one_request_for_the_granted_host(
    smuggle: tuple[Gate, Run, RawOrigin],
) -> None:
    """CONNECT to a granted name's port 80 with an inner Host of an ungranted site is refused; with
    the granted Host one request goes through, and a pipelined second one does not."""
    gate, run, origin = smuggle
    connect = f"CONNECT files.test:80 HTTP/1.1\r\n{auth(run)}\r\n\r\n".encode()
    out = await raw(gate.port, connect + b"GET /x HTTP/1.1\r\nHost: evil.test\r\n\r\n")
    await settle(origin)
    assert out.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 400"), out
    assert origin.requests() == 0
    out = await raw(gate.port, connect + b"GET //evil.test/x HTTP/1.1\r\nHost: files.test\r\n\r\n")
    await settle(origin)
    assert out.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 400"), out
    assert origin.requests() == 0
    inner = b"GET /x HTTP/1.1\r\nHost: files.test\r\n\r\nGET /y HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    out = await raw(gate.port, connect + inner)
    await settle(origin)
    assert b"HTTP/1.1 200 OK" in out and out.endswith(b"ok\n"), out
    assert origin.requests() == 1 and b"evil.test" not in b"".join(origin.conns), origin.conns


# ---- item 4: names resolving to IPv6 transition ranges ----


@pytest.mark.parametrize(
    "addr",
    ["64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "2002:a9fe:a9fe::1", "::7f00:1", "fec0::1",
     "64:ff9b:1::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2"],
)  # fmt: skip
async def test_granted_name_resolving_to_an_ipv6_transition_address_is_refused(
    addr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name is granted and resolves (through the gate's own resolver call) to an address that
    carries loopback, private or metadata IPv4, or to a deprecated range: refused as non-public."""
    import socket

    async def fake_getaddrinfo(host: str, port: int, **kw: object) -> list[tuple[object, ...]]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (addr, port, 0, 0))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", fake_getaddrinfo)
    grants = FakeGrants()
    grants.grant(USER, CHAT, "site", "nat64.test")
    gate = await Gate(GateConfig(connect_timeout=2), backend=grants).start()
    try:
        run = gate.open_run(user=USER, chat=CHAT, turn_id=TURN)
        out = await raw(
            gate.port, f"GET http://nat64.test/ HTTP/1.1\r\nHost: nat64.test\r\n{auth(run)}\r\n\r\n".encode()
        )
        assert out.startswith(b"HTTP/1.1 403") and b"non-public" in out, out
    finally:
        await gate.close()


# ---- item 8: a revoked package stops downloading ----


async def test_revoked_package_file_stops_downloading() -> None:
    """A granted package's file trickles for 20 s; the package is revoked once it has started:
    the gate ends the download within a couple of re-checks (before: it ran to the end)."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            text='<a href="../../packages/slow-1.0.tar.gz">slow-1.0.tar.gz</a>', content_type="text/html"
        )

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": str(200 * 1024)})
        await resp.prepare(request)
        for _ in range(200):
            await resp.write(b"x" * 1024)
            await asyncio.sleep(0.1)
        return resp

    app = web.Application()
    app.router.add_get("/simple/slow/", page)
    app.router.add_get("/packages/{f}", slow)
    idx, iport = await start_site(app)
    grants = FakeGrants()
    grants.grant(USER, CHAT, "package", "slow")
    gate = await Gate(
        GateConfig(package_index=f"http://127.0.0.1:{iport}/simple/", grant_recheck=0.2), backend=grants
    ).start()
    try:
        run = gate.open_run(user=USER, chat=CHAT, turn_id=TURN)
        out = await raw(gate.port, f"GET /run/{run.token}/simple/slow/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        link = out.split(b'href="')[1].split(b'"')[0].decode()
        r, w = await asyncio.open_connection("127.0.0.1", gate.port)
        w.write(f"GET {link} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert (await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)).startswith(b"HTTP/1.1 200")
        await asyncio.wait_for(r.readexactly(1024), 10)
        grants.revoke(USER, CHAT, "package", "slow")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        rest = await asyncio.wait_for(r.read(), 15)  # until the gate closes it
        assert loop.time() - t0 < 3 and len(rest) < 100 * 1024
        w.close()
    finally:
        await gate.close()
        await idx.cleanup()


# ---- item 5: pre-authentication limits per run uid and in total, head bytes, a flood logged once ----

HOLDER = """
import socket, sys, time
held = [socket.socket(socket.AF_UNIX) for _ in range(int(sys.argv[2]))]
for s in held:
    s.connect(sys.argv[1])
print('held', flush=True)
time.sleep(30)
"""


async def test_unauthenticated_limit_is_per_uid_not_per_process(caplog: pytest.LogCaptureFixture) -> None:
    """A fork chain (connect, fork, parent exits) gets new pids but keeps its uid: another process
    of the same uid gets nothing more once the uid's share is held; a flood is logged once."""
    import subprocess
    import sys

    gate = await Gate(GateConfig(max_unauth_per_source=3), backend=FakeGrants()).start()
    assert gate.unix_path is not None
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, gate.unix_path, "3", stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout is not None
        assert await asyncio.wait_for(holder.stdout.readline(), 10) == b"held\n"
        await asyncio.sleep(0.1)
        with caplog.at_level("WARNING", logger="chat_approvals.core.sandbox.egress.gate"):
            for _ in range(5):  # another process, same uid: dropped at once, logged once
                r, w = await asyncio.open_unix_connection(gate.unix_path)
                assert await asyncio.wait_for(r.read(), 5) == b""
                w.close()
        assert len([rec for rec in caplog.records if "dropping new connections" in rec.message]) == 1
    finally:
        holder.kill()
        await holder.wait()
        await gate.close()


async def test_unauthenticated_limit_in_total_and_head_bytes_capped() -> None:
    gate = await Gate(GateConfig(max_unauth_total=4, max_unauth_per_source=100), backend=FakeGrants()).start()
    try:
        held = [await asyncio.open_connection("127.0.0.1", gate.port) for _ in range(4)]
        await asyncio.sleep(0.1)
        r, w = await asyncio.open_connection("127.0.0.1", gate.port)
        assert await asyncio.wait_for(r.read(), 5) == b""  # the fifth, from anyone, is dropped
        for _, hw in held:
            hw.close()
        await asyncio.sleep(0.2)
        # an unfinished 60 KB head is not held: refused once past the head limit
        out = await raw(gate.port, b"GET http://files.test/ HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 60_000)
        assert out.startswith(b"HTTP/1.1 431"), out[:80]
    finally:
        await gate.close()


# ---- item 10: the smaller ones ----


async def test_malformed_port_is_a_400_without_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    gate = await Gate(GateConfig(), backend=FakeGrants()).start()
    try:
        with caplog.at_level("WARNING"):
            for port in ("99999", "8o", "-1"):
                out = await raw(gate.port, f"GET http://files.test:{port}/ HTTP/1.1\r\n\r\n".encode())
                assert out.startswith(b"HTTP/1.1 400"), out
        assert [r for r in caplog.records if r.levelname in ("ERROR", "WARNING")] == []
    finally:
        await gate.close()


async def test_refused_url_is_recorded_without_userinfo() -> None:
    """What a card shows of a refused URL never carries the script's userinfo."""
    grants = FakeGrants()
    gate = await Gate(GateConfig(), backend=grants).start()
    try:
        run = gate.open_run(user=USER, chat=CHAT, turn_id=TURN)
        url = "http://security-team-approved:ok@evil.test/x?y=1"
        out = await raw(gate.port, f"GET {url} HTTP/1.1\r\n{auth(run)}\r\n\r\n".encode())
        assert out.startswith(b"HTTP/1.1 403"), out
        [ref] = grants.refusals
        assert ref.url == "http://evil.test/x?y=1"
    finally:
        await gate.close()


async def test_descriptor_reserve_drops_new_connections_first() -> None:
    """With only a few descriptors left above the reserve, new connections are dropped at once
    rather than the server running out of them for its own work."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    cfg = GateConfig(fd_reserve=soft, max_unauth_per_source=100, max_unauth_total=100)  # leaves the minimum, 8
    gate = await Gate(cfg, backend=FakeGrants()).start()
    try:
        held = [await asyncio.open_connection("127.0.0.1", gate.port) for _ in range(8)]
        await asyncio.sleep(0.1)
        r, w = await asyncio.open_connection("127.0.0.1", gate.port)
        assert await asyncio.wait_for(r.read(), 5) == b""
        for _, hw in held:
            hw.close()
        w.close()
    finally:
        await gate.close()
