"""R18: the sandboxed script cannot approve itself. Every attack runs inside the real confined
sandbox (bubblewrap), either through `chat-approvals sandbox run` or the sandbox class, and the
test fails if the confinement breaks."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.agent.context import invocation_state
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.runner import GatedLocalSandbox, Limits, detect_confinement
from chat_approvals.core.sandbox.tools import make_run_script
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.sandbox.test_sandbox import CHAT, TURN, USER, ToolThenText, agent_turn, ctx
from tests.support.gate_support import FakeGrants
from tests.support.serve_process import ROOT

CONF = detect_confinement()


@pytest.fixture(autouse=True)
def need_confinement() -> None:
    if not CONF.confined:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the sandbox cannot be confined here: {CONF.note}")
        pytest.skip(CONF.note)


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    g = await Gate(GateConfig(), backend=FakeGrants(), clock=ManualClock()).start()
    try:
        yield g
    finally:
        await g.close()


def sandbox_run(tmp_path: Path, script: str, *extra: str, suffix: str = ".py") -> subprocess.CompletedProcess[str]:
    """`chat-approvals sandbox run` as an operator would type it, on the store in tmp_path."""
    f = tmp_path / f"attack{suffix}"
    f.write_text(script)
    cmd = [sys.executable, "-m", "chat_approvals", "sandbox", "run", "--chat", "c-attack", "--user", "mallory",
           "--store", f"sqlite:///{tmp_path}/rows.db", "--objects", str(tmp_path / "objects"),
           *extra, str(f)]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def open_store(tmp_path: Path) -> StoreIO:
    return StoreIO(SqliteRows(tmp_path / "rows.db"), FileObjects(tmp_path / "objects", clock=ManualClock()))


# ---- the filesystem: the store, the objects, the project ----


def test_r18_script_cannot_open_or_write_the_store_or_objects(tmp_path: Path) -> None:
    """The issue's attack: open the SQLite store, insert a grant for itself, then fetch. The store,
    the objects folder, the project and its default store are not in the sandbox at all."""
    store = open_store(tmp_path)  # create the store and an object the way the server would
    (tmp_path / "objects" / "chat-secret.json").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "objects" / "chat-secret.json").write_text('{"secret": "other chat"}')
    store.close()
    targets = [str(tmp_path / "rows.db"), str(tmp_path / "objects" / "chat-secret.json"), str(tmp_path / "objects"),
               str(ROOT / "var"), str(ROOT / "core" / "approvals.py"), str(tmp_path)]  # fmt: skip
    script = f"""
import os, sqlite3, json, urllib.request
out = {{}}
for t in {targets!r}:
    try:
        if os.path.isdir(t):
            out[t] = 'LISTED ' + repr(os.listdir(t))
        else:
            open(t, 'rb').read(); out[t] = 'READ'
    except OSError as e:
        out[t] = type(e).__name__
try:
    db = sqlite3.connect({str(tmp_path / "rows.db")!r})
    db.execute("insert into grants values ('mallory', 'c-attack', 'site', 'evil.test', 'x', 0, 9e9, 9e9)")
    db.commit(); out['insert'] = 'WROTE'
except Exception as e:
    out['insert'] = type(e).__name__
try:
    urllib.request.urlopen('http://evil.test/', timeout=10); out['fetch'] = 'FETCHED'
except Exception as e:
    out['fetch'] = str(e)
print(json.dumps(out))
"""
    p = sandbox_run(tmp_path, script)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    for t in targets:
        assert out[t] == "FileNotFoundError", (t, out[t])
    assert out["insert"] == "OperationalError"  # sqlite cannot even open the file
    assert out["fetch"] == "HTTP Error 403: Forbidden"
    assert "blocked: evil.test" in p.stderr and "sandbox confined (bubblewrap)" in p.stderr
    store = open_store(tmp_path)
    try:
        assert store.rows.list_grants("mallory", "c-attack", 0) == []  # no forged grant
        turn = p.stderr.split("recorded for turn ")[1].split(")")[0]
        [ref] = store.rows.list_refusals("c-attack", turn)  # the refusal is recorded as for a turn
        assert (ref.kind, ref.name) == ("site", "evil.test")
    finally:
        store.close()


def test_sandbox_run_passes_arguments_and_exit_code(tmp_path: Path) -> None:
    (tmp_path / "attack.sh").write_text('echo "args: $*"; id -u; exit 3\n')
    p2 = subprocess.run(
        [sys.executable, "-m", "chat_approvals", "sandbox", "run", "--chat", "c", "--user", "u",
         "--store", f"sqlite:///{tmp_path}/rows.db", "--objects", str(tmp_path / "objects"),
         str(tmp_path / "attack.sh"), "one", "two"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p2.returncode == 3, p2.stderr
    lines = p2.stdout.splitlines()
    assert lines[0] == "args: one two"
    assert int(lines[1]) != 0  # never root


# ---- other runs, the server's process, other sockets ----


async def test_r18_concurrent_run_folder_and_credentials_are_invisible(gate: Gate) -> None:
    """Run A keeps a secret in its folder while run B looks for it, and for A's proxy credentials
    in every /proc/*/environ it can see (with the PID namespace nothing else is visible)."""
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    run_a = gate.open_run(user="UA", chat="CA", turn_id="TA")
    run_b = gate.open_run(user="UB", chat="CB", turn_id="TB")
    a_code = (
        "import os, sys, time\nopen('secret.txt', 'w').write('A-secret')\n"
        "print(os.getcwd(), flush=True)\ntime.sleep(8)\n"
    )
    cwd_a: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def run_a_task() -> None:
        async for item in box.execute_code_streaming(a_code, "python", env=gate.sandbox_env(run_a)):
            if hasattr(item, "data") and not cwd_a.done():
                cwd_a.set_result(item.data.strip())

    task = asyncio.ensure_future(run_a_task())
    try:
        path_a = await asyncio.wait_for(cwd_a, 30)
        b_code = f"""
import os, glob, json
out = {{'read': None, 'environs': 0, 'token_seen': False}}
out['pids'] = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
try:
    out['read'] = open({path_a!r} + '/secret.txt').read()
except OSError as e:
    out['read'] = type(e).__name__
for f in glob.glob('/proc/*/environ'):
    try:
        data = open(f, 'rb').read()
    except OSError:
        continue
    out['environs'] += 1
    out['token_seen'] |= {run_a.token!r}.encode() in data
print(json.dumps(out))
"""
        res = await box.execute_code(b_code, "python", env=gate.sandbox_env(run_b))
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out["read"] == "FileNotFoundError"
        assert out["environs"] >= 1 and out["token_seen"] is False  # B sees only its own processes
        assert max(out["pids"]) < 100  # its own PID namespace
    finally:
        task.cancel()
        with pytest.raises(BaseException):  # noqa: B017 - cancelled or finished, either is fine
            await task
            raise asyncio.CancelledError
        gate.close_run(run_a)
        gate.close_run(run_b)


async def test_r18_server_proc_environ_is_not_visible(gate: Gate, monkeypatch: pytest.MonkeyPatch) -> None:
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    pid = os.getpid()
    code = f"""
import os, json
out = {{}}
try:
    out['environ'] = open('/proc/{pid}/environ', 'rb').read().decode(errors='replace')
except OSError as e:
    out['environ'] = type(e).__name__
out['one'] = open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0].decode()
out['uid'] = os.getuid()
print(json.dumps(out))
"""
    res = await box.execute_code(code, "python")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["environ"] == "FileNotFoundError"
    assert out["one"].endswith("bwrap")  # PID 1 is the sandbox's own init, not the host's
    assert out["uid"] not in (0, os.getuid())


async def test_r18_unix_sockets_outside_are_unreachable(gate: Gate, tmp_path: Path) -> None:
    """A host service's unix socket (a path, and an abstract name) cannot be reached; only the
    gate's socket is bound in."""
    accepted: list[str] = []

    async def on_conn(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append("x")
        w.close()

    path = tmp_path / "host-service.sock"
    srv = await asyncio.start_unix_server(on_conn, str(path))
    os.chmod(path, 0o777)
    os.chmod(tmp_path, 0o755)
    abstract = await asyncio.start_unix_server(on_conn, "\0chat-approvals-host-service")
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    assert gate.unix_path is not None
    code = f"""
import socket, json
out = {{}}
for name, addr in [('path', {str(path)!r}), ('abstract', '\\0chat-approvals-host-service'),
                   ('gate-host-path', {gate.unix_path!r}), ('gate', '/run/sandbox/gate.sock')]:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(addr); out[name] = 'CONNECTED'
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""
    try:
        res = await box.execute_code(code, "python")
        out = json.loads(res.stdout.strip().splitlines()[-1])
        assert out == {
            "path": "FileNotFoundError",
            "abstract": "ConnectionRefusedError",  # abstract names belong to the network namespace
            "gate-host-path": "FileNotFoundError",
            "gate": "CONNECTED",  # the one way out
        }
        assert accepted == []
    finally:
        srv.close()
        abstract.close()


# ---- the whole tree dies with the run, and so do its tunnels ----


class RecordingOrigin:
    """A TCP origin behind the gate that keeps what each connection sent and marks each one's end."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.conns: list[asyncio.Event] = []  # one per connection, set when that connection closed
        self.server: asyncio.AbstractServer | None = None
        self.port = 0

    async def _on_conn(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        closed = asyncio.Event()
        self.conns.append(closed)
        while data := await r.read(1024):
            self.received.append(data)
        closed.set()
        w.close()

    async def start(self) -> RecordingOrigin:
        self.server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def some_data(self) -> None:
        """Returns once anything arrived (callers bound it with wait_for)."""
        while not self.received:
            await asyncio.sleep(0.02)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


async def test_r18_setsid_daemon_and_its_tunnel_die_with_the_run(tmp_path: Path) -> None:
    """A double-forked, setsid daemon holds a CONNECT tunnel through the gate and keeps writing.
    When the run ends the daemon is gone, the tunnel is closed, nothing more arrives, and after a
    revoke nothing can connect either."""
    origin = await RecordingOrigin().start()
    received, conns = origin.received, origin.conns
    grants = FakeGrants()
    grants.grant(USER, CHAT, "site", "files.test")
    gate = await Gate(GateConfig(resolve=[f"files.test:443=127.0.0.1:{origin.port}"]), backend=grants).start()
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    code = """
import base64, os, socket, sys, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
auth = base64.b64encode(f'{proxy.username}:{proxy.password}'.encode()).decode()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        s = socket.create_connection((proxy.hostname, proxy.port))
        s.sendall(f'CONNECT files.test:443 HTTP/1.1\\r\\nProxy-Authorization: Basic {auth}\\r\\n\\r\\n'.encode())
        s.recv(100)
        s.sendall(b'\\x16')  # a TLS record starts so: a granted tunnel carries TLS (or one HTTP request)
        while True:
            s.sendall(b'daemon alive\\n')
            time.sleep(0.1)
    os._exit(0)
time.sleep(1.5)
print('main done', flush=True)
"""
    try:
        with gate.run(user=USER, chat=CHAT, turn_id=TURN) as run:
            res = await box.execute_code(code, "python", env=gate.sandbox_env(run))
            assert res.stdout.strip() == "main done"
            assert received, "the daemon's tunnel never carried anything"
        await asyncio.wait_for(conns[0].wait(), 10)  # the tunnel was closed
        assert run.active == 0 and run.closed
        n = len(received)
        grants.revoke(USER, CHAT, "site", "files.test")
        await asyncio.sleep(1.0)  # bounded: would the daemon write again, or reconnect?
        assert len(received) == n and len(conns) == 1
    finally:
        await gate.close()
        origin.close()


async def test_r18_revoke_mid_run_ends_an_open_tunnel() -> None:
    """A revoke bites on a tunnel already open, while its run goes on: the gate re-checks the
    grant behind an open connection (here every 0.2 s) and closes it once the grant is gone; the
    script sees its connection end long before its own time is up."""
    origin = await RecordingOrigin().start()
    grants = FakeGrants()
    grants.grant(USER, CHAT, "site", "files.test")
    cfg = GateConfig(resolve=[f"files.test:443=127.0.0.1:{origin.port}"], grant_recheck=0.2)
    gate = await Gate(cfg, backend=grants).start()
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    code = """
import base64, os, socket, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ['HTTPS_PROXY'])
auth = base64.b64encode(f'{proxy.username}:{proxy.password}'.encode()).decode()
s = socket.create_connection((proxy.hostname, proxy.port))
s.sendall(f'CONNECT files.test:443 HTTP/1.1\\r\\nProxy-Authorization: Basic {auth}\\r\\n\\r\\n'.encode())
s.recv(100)
s.sendall(b'\\x16')  # a TLS record starts so: a granted tunnel carries TLS (or one HTTP request)
start = time.monotonic()
try:
    while time.monotonic() - start < 20:
        s.sendall(b'still here\\n')
        time.sleep(0.05)
    print('tunnel outlived the revoke', flush=True)
except OSError:
    print(f'tunnel closed after {time.monotonic() - start:.1f}s', flush=True)
"""

    async def revoke_once_data_flows() -> None:
        await origin.some_data()
        grants.revoke(USER, CHAT, "site", "files.test")

    try:
        with gate.run(user=USER, chat=CHAT, turn_id=TURN) as run:
            revoker = asyncio.ensure_future(asyncio.wait_for(revoke_once_data_flows(), 15))
            res = await box.execute_code(code, "python", env=gate.sandbox_env(run))
            await revoker
            assert origin.conns and origin.conns[0].is_set(), "the origin's side of the tunnel is still open"
            assert not run.closed, "the run was still going when its tunnel was ended"
            assert res.stdout.startswith("tunnel closed after"), res.stdout + res.stderr
            assert float(res.stdout.split()[-1].rstrip("s")) < 10
    finally:
        await gate.close()
        origin.close()


async def test_r18_tunnel_allowed_by_the_operator_is_not_rechecked() -> None:
    """The re-check is for grants only: an operator's --gate-allow host keeps its open
    connection with no grant at all (the same script, the allow list instead of a grant)."""
    origin = await RecordingOrigin().start()
    cfg = GateConfig(resolve=[f"files.test:443=127.0.0.1:{origin.port}"], allow=["files.test"], grant_recheck=0.1)
    gate = await Gate(cfg, backend=FakeGrants()).start()
    try:
        with gate.run(user=USER, chat=CHAT, turn_id=TURN) as run:
            r, w = await asyncio.open_connection("127.0.0.1", gate.port)
            auth = base64.b64encode(f"{run.username}:x".encode()).decode()
            w.write(f"CONNECT files.test:443 HTTP/1.1\r\nProxy-Authorization: Basic {auth}\r\n\r\n".encode())
            assert (await asyncio.wait_for(r.readline(), 5)).startswith(b"HTTP/1.1 200")
            await asyncio.wait_for(r.readline(), 5)
            w.write(b"hello")
            await w.drain()
            await asyncio.wait_for(origin.some_data(), 5)
            await asyncio.sleep(0.5)  # five re-check periods: nothing may close it
            assert not origin.conns[0].is_set()
            w.close()
    finally:
        await gate.close()
        origin.close()


# ---- resource limits: each one stops the script and is named in the tool result ----

LIMIT_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "cpu": ({"cpu": 1}, "while True:\n    pass\n", "limit hit: CPU time (1 s)"),
    "memory": ({"memory": 256 << 20}, "b = bytearray(600 << 20)\n", "limit hit: address space (256 MiB)"),
    "nproc": (
        {"nproc": 12},
        "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(30)\n        os._exit(0)\n",
        "limit hit: processes (12)",
    ),
    "file_size": (
        {"file_size": 1 << 20},
        "open('big', 'wb').write(b'x' * (2 << 20))\n",
        "limit hit: file size (1 MiB)",
    ),
    "disk": (
        {"disk": 8 << 20},
        "for i in range(40):\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20))\n",
        "limit hit: bytes written in the run folder and /tmp (8 MiB)",
    ),
    "open_files": (
        {"open_files": 32},
        "fs = [open('/etc/hostname') for _ in range(100)]\n",
        "limit hit: open files (32)",
    ),
    "wall": ({"wall": 1.5}, "import time\ntime.sleep(30)\n", "limit hit: wall time (1.5 s)"),
}


@pytest.mark.parametrize("name", list(LIMIT_CASES))
async def test_r18_each_resource_limit_stops_the_script_and_is_named(name: str) -> None:
    overrides, code, expected = LIMIT_CASES[name]
    grants = FakeGrants()
    gate = await Gate(GateConfig(), backend=grants).start()
    try:
        tool = make_run_script(gate, limits=Limits(**{"wall": 30.0, **overrides}))
        text = await agent_turn(tool, ToolThenText(code), invocation_state(ctx(), grants))  # type: ignore[arg-type]
    finally:
        await gate.close()
    lines = text.splitlines()
    assert any(ln.startswith(expected) for ln in lines), text
    assert lines[1] != "exit code: 0"  # stopped, not finished


# ---- the gate under a flood of unauthenticated connections ----

FLOOD = """
import socket, sys, time, json
port, n = int(sys.argv[1]), int(sys.argv[2])
held, failed = [], 0
for i in range(n):
    try:
        held.append(socket.create_connection(('127.0.0.1', port), timeout=2))
    except OSError:
        failed += 1
time.sleep(0.5)
def still_open():
    alive = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK) != b'':
                alive += 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive
first = still_open()
time.sleep(float(sys.argv[3]))
print(json.dumps({'connected': len(held), 'failed': failed, 'open_after_flood': first, 'open_later': still_open()}))
"""


@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_gate_bounds_unauthenticated_connections_and_healthz_stays_fast(tmp_path: Path) -> None:
    """5,000 connections that never authenticate, against a real `serve --sandbox`: the gate keeps
    at most `max_unauth_per_source` of them, closes those within its head timeout, and /healthz
    stays under 100 ms at p99 meanwhile (a bounded, generous check; the numbers are in bench/)."""
    import time

    import aiohttp

    from tests.support.serve_process import free_port, stop, wait_healthy

    port, gate_port = free_port(), free_port()
    cmd = [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port), "--store", f"sqlite:///{tmp_path}/r.db",
           "--objects", str(tmp_path / "o"), "--sandbox", "--gate-port", str(gate_port)]  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        await wait_healthy(proc, port)
        flood = await asyncio.create_subprocess_exec(
            sys.executable, "-c", FLOOD, str(gate_port), "5000", "6",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        latencies: list[float] = []
        async with aiohttp.ClientSession() as s:
            while flood.returncode is None and len(latencies) < 400:
                t0 = time.perf_counter()
                async with s.get(f"http://127.0.0.1:{port}/healthz") as r:
                    assert r.status == 200
                    await r.read()
                latencies.append(time.perf_counter() - t0)
                await asyncio.sleep(0.01)
        out_b, err = await asyncio.wait_for(flood.communicate(), 120)
        result = json.loads(out_b.decode().strip())
        assert result["connected"] + result["failed"] == 5000, err
        assert result["open_after_flood"] <= 32  # the per-source bound (GateConfig.max_unauth_per_source)
        assert result["open_later"] == 0  # closed within the head timeout (5 s)
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99) - 1]
        assert len(latencies) >= 50 and p99 < 0.1, (p99, latencies[-5:])
    finally:
        await stop(proc)


# ---- --sandbox without confinement ----


def test_serve_sandbox_refuses_without_confinement_unless_unconfined(tmp_path: Path) -> None:
    """No bubblewrap on PATH: `serve --sandbox` refuses to start; with --sandbox-unconfined it
    starts and says exactly what is not confined."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    base = [sys.executable, "-m", "chat_approvals", "serve", "--store", f"sqlite:///{tmp_path}/r.db",
            "--objects", str(tmp_path / "o"), "--sandbox"]  # fmt: skip
    p = subprocess.run(base, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2
    assert "sandbox NOT confined (bubblewrap (`bwrap`) is not installed)" in p.stderr
    assert "--sandbox-unconfined" in p.stderr and not (tmp_path / "r.db").exists()
    from tests.support.serve_process import free_port

    port = free_port()
    proc = subprocess.Popen([*base, "--sandbox-unconfined", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "sandbox (run_script + egress gate)" in line:
                break
        text = "".join(lines)
        assert "on; sandbox NOT confined" in text
        assert "the store, the objects, other runs' folders" in text and "environment" in text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
