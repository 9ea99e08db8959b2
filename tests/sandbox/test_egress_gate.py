"""The egress gate with real clients (curl, urllib, pip) against local origins on 127.0.0.1.

Test host names (files.test, other.test) reach the local servers only through the gate's
--gate-resolve mapping, so a client that got through really went through the gate. Grants
come from an in-memory backend implementing the gate's Protocol; refusals land there.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox.egress import Gate, GateConfig, GrantsBackend, Run
from chat_approvals.core.sandbox.egress.policy import Pattern, Resolve, Rules
from tests.support.gate_support import FakeGrants, index_app, make_cert, need_curl, origin_app, start_site

USER, CHAT, TURN = "U1", "http:chat-1", "turn-1"


@dataclass
class Env:
    gate: Gate
    grants: FakeGrants
    clock: ManualClock
    cafile: Path
    tmp: Path

    def run(self, **kw: str) -> Run:
        return self.gate.open_run(user=kw.get("user", USER), chat=kw.get("chat", CHAT), turn_id=TURN)


async def _env(tmp_path: Path, **cfg: object) -> AsyncIterator[Env]:
    cert, key = make_cert(tmp_path)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    http_runner, http_port = await start_site(origin_app("http"))
    https_runner, https_port = await start_site(origin_app("https"), ctx)
    idx_runner, idx_port = await start_site(
        index_app({"demo-pkg": ("1.0", []), "needs-dep": ("2.0", ["dep-pkg"]), "dep-pkg": ("0.1", [])})
    )
    resolve = []
    for host in ("files.test", "other.test", "cdn.test"):
        resolve += [f"{host}:80=127.0.0.1:{http_port}", f"{host}:443=127.0.0.1:{https_port}"]
    grants, clock = FakeGrants(), ManualClock()
    config = GateConfig(resolve=resolve, package_index=f"http://127.0.0.1:{idx_port}/simple/", **cfg)  # type: ignore[arg-type]
    gate = await Gate(config, backend=grants, clock=clock).start()
    try:
        yield Env(gate, grants, clock, cert, tmp_path)
    finally:
        await gate.close()
        for r in (http_runner, https_runner, idx_runner):
            await r.cleanup()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async for e in _env(tmp_path):
        yield e


async def curl(env: Env, run: Run | None, url: str, *extra: str) -> tuple[int, str, str]:
    proxy = env.gate.proxy_url(run) if run else f"http://127.0.0.1:{env.gate.port}"
    proc = await asyncio.create_subprocess_exec(
        need_curl(), "-sS", "--max-time", "20", "--proxy", proxy, "--cacert", str(env.cafile),
        "-w", "\n%{http_code}", *extra, url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def urllib_get(env: Env, run: Run, url: str) -> str:
    proxy = env.gate.proxy_url(run)
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": proxy, "https": proxy}),
        urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(env.cafile))),
    )
    with opener.open(url, timeout=20) as r:
        return str(r.read().decode())


def test_fake_backend_implements_the_protocol() -> None:
    assert isinstance(FakeGrants(), GrantsBackend)


# ---- curl ----


async def test_curl_allowed_by_grant_http_and_https(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    rc, out, _ = await curl(env, run, "http://files.test/hello")
    assert rc == 0 and out == "hello from files.test over http\n\n200"
    rc, out, _ = await curl(env, run, "https://files.test/hello")
    assert rc == 0 and out == "hello from files.test over https\n\n200"
    assert env.grants.refusals == [] and run.blocked_subjects() == []


async def test_r3_curl_refused_and_recorded_for_the_turn(env: Env) -> None:
    run = env.run()
    env.clock.set(1_800_000_123.0)
    rc, out, err = await curl(env, run, "http://other.test/hello")
    assert rc == 0 and out.endswith("\n403") and "other.test is not approved" in out
    rc, _, err = await curl(env, run, "https://other.test/hello")
    assert rc != 0 and "403" in err  # CONNECT refused: the tunnel never opens
    [ref] = env.grants.refusals  # recorded once per run and subject, not per connection
    assert (ref.chat, ref.turn_id, ref.kind, ref.name, ref.port) == (CHAT, TURN, "site", "other.test", 80)
    assert ref.url == "http://other.test/hello" and ref.at == 1_800_000_123.0
    assert run.blocked_subjects() == ["other.test"]


async def test_curl_revoked_then_refused_again_on_the_next_connection(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    rc, out, _ = await curl(env, run, "https://files.test/hello")
    assert rc == 0 and out.endswith("200")
    env.grants.revoke(USER, CHAT, "site", "files.test")
    rc, _, err = await curl(env, run, "https://files.test/hello")
    assert rc != 0 and "403" in err
    _, out, _ = await curl(env, run, "http://files.test/hello")
    assert out.endswith("403")
    assert [(r.name, r.port) for r in env.grants.refusals] == [("files.test", 443)]
    assert run.blocked_subjects() == ["files.test"]


async def test_grant_is_per_chat_and_per_user(env: Env) -> None:
    env.grants.grant(USER, "http:another-chat", "site", "files.test")
    env.grants.grant("U2", CHAT, "site", "files.test")
    _rc, out, _ = await curl(env, env.run(), "http://files.test/hello")
    assert out.endswith("403")
    assert [r.name for r in env.grants.refusals] == ["files.test"]


async def test_curl_redirect_to_unapproved_host_is_refused(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    rc, out, _ = await curl(env, run, "http://files.test/redirect?to=other.test", "-L")
    assert out.endswith("403") and "other.test is not approved" in out
    rc, _, err = await curl(env, run, "https://files.test/redirect?to=other.test", "-L")
    assert rc != 0 and "403" in err
    assert [(r.name, r.port, r.url) for r in env.grants.refusals] == [("other.test", 80, "http://other.test/hello")]
    # and a redirect to an approved host is followed: each hop is decided, none is waved through
    env.grants.grant(USER, CHAT, "site", "other.test")
    rc, out, _ = await curl(env, run, "https://files.test/redirect?to=other.test", "-L")
    assert rc == 0 and out == "hello from other.test over https\n\n200"


async def test_curl_keepalive_second_request_to_other_host_is_decided(env: Env) -> None:
    """Two URLs in one curl call would share a proxy connection; the gate closes after each
    request, so the second host is decided on its own connection."""
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    _rc, out, _ = await curl(env, run, "http://other.test/hello", "http://files.test/hello")
    assert out == (  # curl puts the extra URL first: files.test, then other.test
        "hello from files.test over http\n\n200other.test is not approved for this chat. The egress gate "
        "refused it; the agent can ask for it with request_approval.\n\n403"
    )
    assert [r.name for r in env.grants.refusals] == ["other.test"]


async def test_no_credentials_or_closed_run_gets_407(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    _, out, _ = await curl(env, None, "http://files.test/hello")
    assert out.endswith("407")
    run = env.run()
    env.gate.close_run(run)
    _rc, out, _ = await curl(env, run, "http://files.test/hello")
    assert out.endswith("407")
    assert env.grants.checks == 0 and env.grants.refusals == []


# ---- urllib ----


async def test_urllib_allowed_then_revoked_then_refused_again(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    assert await asyncio.to_thread(urllib_get, env, run, "https://files.test/hello") == (
        "hello from files.test over https\n"
    )
    assert await asyncio.to_thread(urllib_get, env, run, "http://files.test/hello") == (
        "hello from files.test over http\n"
    )
    env.grants.revoke(USER, CHAT, "site", "files.test")  # the next connection sees it
    with pytest.raises(OSError, match="403"):
        await asyncio.to_thread(urllib_get, env, run, "https://files.test/hello")
    with pytest.raises(urllib.error.HTTPError) as e:
        await asyncio.to_thread(urllib_get, env, run, "http://files.test/hello")
    assert e.value.code == 403
    assert [(r.kind, r.name) for r in env.grants.refusals] == [("site", "files.test")]


async def test_urllib_follows_redirect_only_to_approved_host(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    with pytest.raises(urllib.error.HTTPError) as e:
        await asyncio.to_thread(urllib_get, env, run, "http://files.test/redirect?to=cdn.test")
    assert e.value.code == 403 and e.value.headers["X-Egress-Gate-Refused"] == "site=cdn.test"
    assert [r.name for r in env.grants.refusals] == ["cdn.test"]


async def test_request_bodies_pass_through_forward_and_tunnel(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    _, out, _ = await curl(env, run, "http://files.test/echo", "--data-binary", "a" * 100_000)
    assert out == "got " + "a" * 100_000 + "\n200"
    _, out, _ = await curl(env, run, "https://files.test/echo", "-H", "Transfer-Encoding: chunked", "--data", "xyz")
    assert out == "got xyz\n200"
    _, out, _ = await curl(env, run, "http://files.test/echo", "-H", "Transfer-Encoding: chunked", "--data", "q" * 9000)
    assert out == "got " + "q" * 9000 + "\n200"  # a chunked body through the plain-HTTP forward


# ---- launch-time lists and safety ----


async def test_deny_list_wins_over_grant_and_allow_list(tmp_path: Path) -> None:
    async for env in _env(tmp_path, allow=["*.test", "files.test"], deny=["other.test"]):
        env.grants.grant(USER, CHAT, "site", "other.test")
        run = env.run()
        _, out, _ = await curl(env, run, "http://cdn.test/hello")  # allow list, no grant needed
        assert out.endswith("200")
        _, out, _ = await curl(env, run, "http://other.test/hello")
        assert out.endswith("403") and "denied by the operator" in out
        # an operator denial is not an approvable refusal: nothing for R3 to put on a card
        assert env.grants.refusals == [] and run.denied_subjects() == ["other.test"]
        assert env.grants.checks == 0


async def test_grant_check_failure_fails_closed_and_records_nothing(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    env.grants.broken = True
    _, out, _ = await curl(env, env.run(), "http://files.test/hello")
    assert out.endswith("403") and "could not check" in out
    assert env.grants.refusals == []


async def test_granted_name_resolving_to_loopback_is_not_reached(env: Env) -> None:
    """Approving a name must not open the host's own loopback (only --gate-resolve may)."""
    env.grants.grant(USER, CHAT, "site", "localhost")
    _, out, _ = await curl(env, env.run(), f"http://localhost:{env.gate.port}/hello")
    assert out.endswith("404") and "egress gate: nothing here" in out  # the gate itself, not a proxy hop
    _, out, _ = await curl(env, env.run(), "http://localhost/hello")
    assert out.endswith("403") and "non-public address" in out


async def test_non_standard_port_needs_the_allow_list(env: Env) -> None:
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    _, out, _ = await curl(env, run, "http://files.test:8081/hello")
    assert out.endswith("403") and "port 8081" in out
    assert env.grants.refusals == [] and run.denied_subjects() == ["files.test:8081"]


async def test_connections_per_run_are_capped(tmp_path: Path) -> None:
    async for env in _env(tmp_path, max_conns_per_run=2):
        env.grants.grant(USER, CHAT, "site", "files.test")
        run = env.run()
        auth = base64.b64encode(f"{run.username}:x".encode()).decode()
        connect = f"CONNECT files.test:443 HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode()

        async def tunnel(port: int = env.gate.port, connect: bytes = connect) -> tuple[bytes, asyncio.StreamWriter]:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(connect)
            return (await asyncio.wait_for(r.readuntil(b"\r\n"), 10)), w

        held = [await tunnel(), await tunnel()]
        assert [h[0] for h in held] == [b"HTTP/1.1 200 Connection Established\r\n"] * 2
        third, w3 = await tunnel()
        assert third == b"HTTP/1.1 429 Too Many Requests\r\n"
        w3.close()
        held[0][1].close()
        for _ in range(100):  # the gate notices the close on its next read; bounded
            if run.active < 2:
                break
            await asyncio.sleep(0.02)
        again, w4 = await tunnel()
        assert again == b"HTTP/1.1 200 Connection Established\r\n"
        for w in (w4, held[1][1]):
            w.close()


def test_patterns_and_resolve_parse() -> None:
    rules = Rules.parse(["*.example.com", "api.test:8443", "package:Foo_Bar"], ["bad.example.com"])
    assert rules.allowed("site", "a.example.com") and not rules.allowed("site", "example.com")
    assert rules.allowed("site", "api.test", 8443) and not rules.allowed("site", "api.test", 443)
    assert rules.allowed("package", "foo-bar") and rules.denied("site", "bad.example.com", 443)
    assert Pattern.parse("Files.Test.") == Pattern("site", "files.test")
    r = Resolve.parse(["a.test=127.0.0.1:1234", "a.test:443=127.0.0.2:99"])
    assert r.lookup("a.test", 80) == ("127.0.0.1", 1234) and r.lookup("a.test", 443) == ("127.0.0.2", 99)
    for bad in ["a.test", "a.test=localhost:80", "a.test=127.0.0.1:x", "*.a.test=127.0.0.1:1"]:
        with pytest.raises(ValueError):
            Resolve.parse([bad])
    with pytest.raises(ValueError):
        Pattern.parse("bad host!")


# ---- packages: pip download through the package-index view ----


async def pip_download(env: Env, run: Run, *args: str) -> tuple[int, str, Path]:
    dest = env.tmp / f"dl-{run.token[:6]}-{len(list(env.tmp.iterdir()))}"
    dest.mkdir()
    penv = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(env.tmp),
        "PIP_NO_CACHE_DIR": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
        **env.gate.sandbox_env(run),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "pip", "download", "-d", str(dest), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=penv,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), dest


async def test_pip_download_granted_package(env: Env) -> None:
    env.grants.grant(USER, CHAT, "package", "demo-pkg")
    run = env.run()
    rc, out, dest = await pip_download(env, run, "--no-deps", "Demo_Pkg")
    assert rc == 0, out
    assert [p.name for p in dest.iterdir()] == ["demo_pkg-1.0-py3-none-any.whl"]
    assert env.grants.refusals == []


async def test_pip_download_refused_recorded_then_revoked(env: Env) -> None:
    run = env.run()
    rc, out, dest = await pip_download(env, run, "--no-deps", "demo-pkg")
    assert rc != 0 and list(dest.iterdir()) == []
    [ref] = env.grants.refusals
    assert (ref.kind, ref.name, ref.turn_id, ref.port) == ("package", "demo-pkg", TURN, None)
    assert run.blocked_subjects() == ["package:demo-pkg"]
    env.grants.grant(USER, CHAT, "package", "demo-pkg")
    rc, out, dest = await pip_download(env, run, "--no-deps", "demo-pkg")
    assert rc == 0, out
    env.grants.revoke(USER, CHAT, "package", "demo-pkg")
    run2 = env.run()
    rc, out, dest = await pip_download(env, run2, "--no-deps", "demo-pkg")
    assert rc != 0 and list(dest.iterdir()) == []
    assert run2.blocked_subjects() == ["package:demo-pkg"]


async def test_pip_dependency_not_granted_is_refused_by_name(env: Env) -> None:
    env.grants.grant(USER, CHAT, "package", "needs-dep")
    run = env.run()
    rc, _out, _ = await pip_download(env, run, "needs-dep")
    assert rc != 0
    assert run.blocked_subjects() == ["package:dep-pkg"]
    assert [(r.kind, r.name) for r in env.grants.refusals] == [("package", "dep-pkg")]


async def test_package_files_are_only_those_the_gate_listed(env: Env) -> None:
    env.grants.grant(USER, CHAT, "package", "demo-pkg")
    run = env.run()
    base = f"http://127.0.0.1:{env.gate.port}/run/{run.token}"
    _, out, _ = await curl(env, None, f"{base}/simple/demo-pkg/", "--noproxy", "*")
    assert out.endswith("200") and f"/run/{run.token}/files/demo-pkg/" in out
    _, out, _ = await curl(env, None, f"{base}/files/demo-pkg/aGVsbG8.deadbeef/x.whl", "--noproxy", "*")
    assert out.endswith("404")
    _, out, _ = await curl(env, None, f"http://127.0.0.1:{env.gate.port}/run/nope/simple/demo-pkg/",
                           "--noproxy", "*")  # fmt: skip
    assert out.endswith("403")
    _, out, _ = await curl(env, None, f"{base}/simple/", "--noproxy", "*")
    assert out.endswith("200") and ">demo-pkg<" in out


# ---- issue 9: what the gate forwards, what the index signs, what it never offers ----


async def test_host_header_must_match_the_decided_host(env: Env) -> None:
    """A granted target with another Host would reach a name nobody approved on the same origin."""
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    _, out, _ = await curl(env, run, "http://files.test/hello", "-H", "Host: other.test")
    assert out.endswith("400") and "does not match the request target" in out
    _, out, _ = await curl(env, run, "http://files.test/hello", "-H", "Host: files.test:8080")
    assert out.endswith("400")
    _, out, _ = await curl(env, run, "http://files.test/hello", "-H", "Host: FILES.test:80")
    assert out == "hello from files.test over http\n\n200"
    assert env.grants.refusals == []


async def test_never_allowable_names_are_refused_as_such_and_never_recorded(env: Env) -> None:
    """IP literals of loopback, private and link-local space (in any spelling), IPv6 literals and
    invalid package names: refused even with a (forged) grant row, never recorded for a card."""
    run = env.run()
    for name in ["127.0.0.1", "10.0.0.7", "169.254.169.254", "::1"]:
        env.grants.grant(USER, CHAT, "site", name)
    for url in ["http://127.0.0.1/x", "http://2130706433/x", "http://10.0.0.7/x", "http://169.254.169.254/x",
                "http://[::1]/x"]:  # fmt: skip
        _, out, _ = await curl(env, run, url)
        assert out.endswith("403") and ("no approval can allow it" in out or "IPv6 literal" in out), (url, out)
    rc, _, err = await curl(env, run, "https://127.0.0.1/x")
    assert rc != 0 and "403" in err
    base = f"http://127.0.0.1:{env.gate.port}/run/{run.token}"
    _, out, _ = await curl(env, None, f"{base}/simple/%2e%2e/", "--noproxy", "*", "--path-as-is")
    assert out.endswith("403") and "not a valid package name" in out
    assert env.grants.refusals == [] and run.blocked_subjects() == []
    assert run.denied_subjects() == ["127.0.0.1", "10.0.0.7", "169.254.169.254", "::1"]
    assert env.grants.checks == 0  # decided before any grant was looked at


async def test_package_page_keeps_only_links_to_the_index_own_hosts(tmp_path: Path) -> None:
    """A granted project's page with foreign and loopback links: only the index's own origin and
    allow-listed hosts are signed; the rest never appear, so the gate cannot be made to fetch them."""
    from aiohttp import web

    other, other_port = await start_site(origin_app("http"))
    links = [
        "../../packages/demo_pkg-1.0-py3-none-any.whl#sha256=00",
        "http://evil.test/packages/evil-1.0.whl",
        f"http://127.0.0.1:{other_port}/hello-1.0.whl",
        "http://localhost/packages/local-1.0.whl",
        "http://169.254.169.254/latest/meta-1.0.whl",
        "http://10.0.0.1/packages/private-1.0.whl",
        "https://mirror.allowed.test/packages/mirrored-1.0.whl",
    ]

    async def page(request: web.Request) -> web.Response:
        body = "".join(f'<a href="{h}">{h.rsplit("/", 1)[-1].split("#")[0]}</a>\n' for h in links)
        return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/simple/demo-pkg/", page)
    idx, idx_port = await start_site(app)
    grants = FakeGrants()
    grants.grant(USER, CHAT, "package", "demo-pkg")
    gate = await Gate(
        GateConfig(package_index=f"http://127.0.0.1:{idx_port}/simple/", allow=["mirror.allowed.test"]),
        backend=grants,
        clock=ManualClock(),
    ).start()
    try:
        run = gate.open_run(user=USER, chat=CHAT, turn_id=TURN)
        env = Env(gate, grants, ManualClock(), tmp_path / "none", tmp_path)
        _, out, _ = await curl(env, None, f"http://127.0.0.1:{gate.port}/run/{run.token}/simple/demo-pkg/",
                               "--noproxy", "*")  # fmt: skip
        assert out.endswith("200")
        shown = sorted(a.split(">")[1].split("<")[0] for a in out.split("<a ")[1:])
        assert shown == ["demo_pkg-1.0-py3-none-any.whl", "mirrored-1.0.whl"]
        assert gate.index is not None
        for h in links[1:6]:
            assert not gate.index.file_link_allowed(h), h
        assert grants.refusals == []
    finally:
        await gate.close()
        await idx.cleanup()
        await other.cleanup()


async def test_closing_a_run_ends_its_open_tunnels(env: Env) -> None:
    """Credentials stop working when the run ends, for connections already open too."""
    env.grants.grant(USER, CHAT, "site", "files.test")
    run = env.run()
    auth = base64.b64encode(f"{run.username}:x".encode()).decode()
    r, w = await asyncio.open_connection("127.0.0.1", env.gate.port)
    w.write(f"CONNECT files.test:443 HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
    assert await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
    assert run.active == 1
    env.gate.close_run(run)
    assert await asyncio.wait_for(r.read(), 10) == b""  # the gate closed the tunnel
    assert run.active == 0
    w.close()


async def test_unauthenticated_connections_are_bounded_per_source(tmp_path: Path) -> None:
    async for env in _env(tmp_path, max_unauth_per_source=3, max_conns_per_run=1):
        held = [await asyncio.open_connection("127.0.0.1", env.gate.port) for _ in range(3)]
        await asyncio.sleep(0.1)
        r4, w4 = await asyncio.open_connection("127.0.0.1", env.gate.port)
        assert await asyncio.wait_for(r4.read(), 5) == b""  # dropped at once, nothing read from it
        held[0][1].close()
        await asyncio.sleep(0.1)
        r5, w5 = await asyncio.open_connection("127.0.0.1", env.gate.port)  # a slot is free again
        env.grants.grant(USER, CHAT, "site", "files.test")
        run = env.run()
        auth = base64.b64encode(f"{run.username}:x".encode()).decode()
        w5.write(f"CONNECT files.test:443 HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
        assert await asyncio.wait_for(r5.readuntil(b"\r\n\r\n"), 10) == b"HTTP/1.1 200 Connection Established\r\n\r\n"
        # an index request takes a slot like a proxied one: the run's only slot is held by the tunnel
        _, out, _ = await curl(env, None, f"http://127.0.0.1:{env.gate.port}/run/{run.token}/simple/",
                               "--noproxy", "*")  # fmt: skip
        assert out.endswith("429")
        for _, w in [*held[1:], (r4, w4), (r5, w5)]:
            w.close()
