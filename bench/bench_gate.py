"""Egress-gate overhead on loopback against a direct connection. By hand:

    .venv/bin/python -m bench.bench_gate [--conns 500] [--mb 64] [--held 1000]

Three processes on 127.0.0.1: an origin (raw asyncio HTTP/1.1: `GET /size/N` answers N bytes,
and an echo port for held tunnels), the gate (its own process, as in the server), and this
client (raw sockets, so client-library cost is the same on both sides). Measured:
  per connection  a new TCP connection + `GET /size/100` to the end, one at a time:
                  direct, via the gate's plain-HTTP forward, via CONNECT (plain HTTP inside);
                  for the gate with an in-memory grant check and with the real facade on SQLite
  per MB          one `GET /size/<mb MB>`: MB/s and ms per MB, direct vs forward vs CONNECT
  held            N CONNECT tunnels to the echo port opened at once and held, then a round
                  trip through every one; the gate's RSS before and after
Not a test: the machine is shared (2 cores); numbers are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from chat_approvals.core.bootstrap import bootstrap

CHUNK = b"x" * (1 << 20)


def raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# ---- roles (child processes) ----


async def origin_role() -> None:
    async def http(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            head = await r.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            n = int(path.rsplit("/", 1)[1]) if path.startswith("/size/") else 0
            w.write(f"HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n".encode())
            while n > 0:
                w.write(CHUNK[: min(n, len(CHUNK))])
                n -= len(CHUNK)
                await w.drain()
            await w.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            w.close()

    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()

    a = await asyncio.start_server(http, "127.0.0.1", 0, backlog=4096)
    b = await asyncio.start_server(echo, "127.0.0.1", 0, backlog=4096)
    print(json.dumps({"http": a.sockets[0].getsockname()[1], "echo": b.sockets[0].getsockname()[1]}), flush=True)
    await asyncio.Event().wait()


class AllowAll:
    async def is_allowed(self, *, user: str, chat: str, kind: str, name: str, turn_id: str | None = None) -> bool:
        return True

    async def record_refusal(self, refusal: Any) -> bool:
        return True


async def gate_role(http_port: int, echo_port: int, backend_kind: str) -> None:
    from chat_approvals.core.clock import SystemClock
    from chat_approvals.core.sandbox.egress import Gate, GateConfig

    backend: Any = AllowAll()
    if backend_kind == "sqlite":
        from chat_approvals.core.models import Grant
        from chat_approvals.store.aio import StoreIO
        from chat_approvals.store.file_objects import FileObjects
        from chat_approvals.store.sqlite_rows import SqliteRows

        d = tempfile.mkdtemp(prefix="bench-gate-")
        clock = SystemClock()
        io = StoreIO(SqliteRows(os.path.join(d, "a.db")), FileObjects(os.path.join(d, "o"), clock=clock))
        now = clock.now()
        for host in ("files.test", "echo.test"):
            io.rows.put_grant(Grant(user="U", chat="C", kind="site", name=host, card_id="c_bench",
                                    created_at=now, expires_at=now + 3600), now + 7200)  # fmt: skip
        backend = bootstrap(io, clock=clock).approvals.gate_backend
    resolve = [f"files.test=127.0.0.1:{http_port}", f"echo.test=127.0.0.1:{echo_port}"]
    gate = await Gate(GateConfig(resolve=resolve, unix=False, max_conns_per_run=100_000), backend=backend).start()
    run = gate.open_run(user="U", chat="C", turn_id="T")
    print(json.dumps({"port": gate.port, "user": run.username}), flush=True)
    await asyncio.Event().wait()


# ---- client ----


async def fetch(port: int, request: bytes, connect: bytes | None = None) -> int:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    try:
        if connect is not None:
            w.write(connect)
            await w.drain()
            status = await r.readuntil(b"\r\n\r\n")
            if not status.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(status.decode())
        w.write(request)
        await w.drain()
        total = 0
        while data := await r.read(1 << 20):
            total += len(data)
        return total
    finally:
        w.close()


def spawn(*args: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    p = subprocess.Popen([sys.executable, "-m", "bench.bench_gate", *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    return p, json.loads(p.stdout.readline())


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def client(args: argparse.Namespace) -> None:
    raise_nofile()
    origin, ports = spawn("--role", "origin")
    procs = [origin]
    try:
        gates = {}
        for kind in ("memory", "sqlite"):
            g, info = spawn("--role", "gate", "--http", str(ports["http"]), "--echo", str(ports["echo"]),
                            "--backend", kind)  # fmt: skip
            procs.append(g)
            gates[kind] = (g, info)
        auth = lambda info: "Basic " + base64.b64encode(f"{info['user']}:x".encode()).decode()  # noqa: E731

        def req(path: str, absolute: bool, info: dict[str, Any] | None = None) -> bytes:
            target = f"http://files.test{path}" if absolute else path
            extra = f"Proxy-Authorization: {auth(info)}\r\n" if info and absolute else ""
            return f"GET {target} HTTP/1.1\r\nHost: files.test\r\n{extra}Connection: close\r\n\r\n".encode()

        def connect(info: dict[str, Any], host: str = "files.test") -> bytes:
            return (
                f"CONNECT {host}:80 HTTP/1.1\r\nHost: {host}:80\r\nProxy-Authorization: {auth(info)}\r\n\r\n".encode()
            )

        async def timed(n: int, port: int, request: bytes, conn: bytes | None = None) -> list[float]:
            out = []
            for _ in range(n):
                t = time.perf_counter()
                await fetch(port, request, conn)
                out.append((time.perf_counter() - t) * 1000)
            return out

        rows: list[tuple[str, list[float]]] = []
        for _ in range(2):  # warm up every path
            await fetch(ports["http"], req("/size/100", False))
        rows.append(("direct", await timed(args.conns, ports["http"], req("/size/100", False))))
        for kind, (_, info) in gates.items():
            await fetch(info["port"], req("/size/100", True, info))
            rows.append(
                (f"gate forward, grants {kind}", await timed(args.conns, info["port"], req("/size/100", True, info)))
            )
            rows.append((f"gate CONNECT, grants {kind}",
                         await timed(args.conns, info["port"], req("/size/100", False), connect(info))))  # fmt: skip
        base = statistics.mean(rows[0][1])
        print(f"\nPer connection (new TCP connection + GET /size/100, {args.conns} sequential)")
        print(f"{'path':34} {'mean ms':>8} {'p50 ms':>8} {'p95 ms':>8} {'overhead ms':>12}")
        for name, vals in rows:
            q = statistics.quantiles(vals, n=20)
            print(f"{name:34} {statistics.mean(vals):8.3f} {statistics.median(vals):8.3f} {q[18]:8.3f} "
                  f"{statistics.mean(vals) - base:12.3f}")  # fmt: skip

        n = args.mb << 20
        info = gates["memory"][1]
        print(f"\nPer MB (one GET of {args.mb} MB, best of 3)")
        print(f"{'path':34} {'MB/s':>8} {'ms/MB':>8} {'overhead ms/MB':>15}")
        tput = []
        for name, port, request, conn in [
            ("direct", ports["http"], req(f"/size/{n}", False), None),
            ("gate forward", info["port"], req(f"/size/{n}", True, info), None),
            ("gate CONNECT", info["port"], req(f"/size/{n}", False), connect(info)),
        ]:
            best = min([await _time_fetch(port, request, conn, n) for _ in range(3)])
            tput.append((name, best))
        for name, secs in tput:
            ms_mb = secs * 1000 / args.mb
            print(f"{name:34} {args.mb / secs:8.0f} {ms_mb:8.2f} {ms_mb - tput[0][1] * 1000 / args.mb:15.2f}")

        gproc = gates["memory"][0]
        before = rss_kb(gproc.pid)
        t = time.perf_counter()
        held = []
        for i in range(0, args.held, 200):  # open in waves so the listen backlog is never the limit
            held += await asyncio.gather(
                *[_open_tunnel(info, connect(info, "echo.test")) for _ in range(min(200, args.held - i))]
            )
        opened = time.perf_counter() - t
        during = rss_kb(gproc.pid)
        t = time.perf_counter()
        ok = sum(await asyncio.gather(*[_echo(r, w) for r, w in held]))
        trip = time.perf_counter() - t
        for _, w in held:
            w.close()
        print("\nConcurrent connections held (CONNECT tunnels to an echo server, gate grants in memory)")
        print(
            f"{'tunnels':>8} {'open s':>8} {'all echoed':>11} {'echo s':>8} {'gate RSS before':>16} "
            f"{'while held':>11} {'KB/tunnel':>10}"
        )
        print(f"{args.held:8d} {opened:8.2f} {ok:11d} {trip:8.2f} {before:13d} KB {during:8d} KB "
              f"{(during - before) / max(1, args.held):10.1f}")  # fmt: skip
    finally:
        for p in procs:
            p.kill()
            p.wait()


async def _time_fetch(port: int, request: bytes, conn: bytes | None, n: int) -> float:
    t = time.perf_counter()
    got = await fetch(port, request, conn)
    assert got >= n, got
    return time.perf_counter() - t


async def _open_tunnel(info: dict[str, Any], conn: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    r, w = await asyncio.open_connection("127.0.0.1", info["port"])
    w.write(conn)
    await w.drain()
    status = await r.readuntil(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200"), status
    return r, w


async def _echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> int:
    w.write(b"ping\n")
    await w.drain()
    return int(await asyncio.wait_for(r.readline(), 30) == b"ping\n")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--role", default="client", choices=["client", "origin", "gate"])
    p.add_argument("--http", type=int)
    p.add_argument("--echo", type=int)
    p.add_argument("--backend", default="memory")
    p.add_argument("--conns", type=int, default=500)
    p.add_argument("--mb", type=int, default=64)
    p.add_argument("--held", type=int, default=1000)
    a = p.parse_args()
    if a.role == "origin":
        raise_nofile()
        asyncio.run(origin_role())
    elif a.role == "gate":
        raise_nofile()
        asyncio.run(gate_role(a.http, a.echo, a.backend))
    else:
        asyncio.run(client(a))


if __name__ == "__main__":
    main()
