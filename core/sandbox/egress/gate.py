"""The egress gate: an asyncio HTTP forward proxy (plain HTTP and CONNECT, no TLS interception).

Every sandbox run gets its own proxy credentials, `run-<token>:x`, and the gate maps the token
to (user, chat, turn_id). Each request is decided from its host and port, in this order:
launch-time deny list (wins), launch-time allow list, then the user's grants for that chat,
asked through the injected backend at request time (a revoke takes effect on the next
connection). Each proxy connection carries one request (its body framed, nothing after it sent
on; a strict parser refuses what could read as two), answered with `Connection: close`, so a
redirect is always a new request (and an HTTPS redirect to another host is a new CONNECT) and is
decided afresh. A granted tunnel carries TLS or one plain-HTTP request for the granted Host.
The gate also serves the package-index view (`core.egress.index`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import resource
import secrets
import socket
import struct
import tempfile
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, ConfigDict, Field

from chat_approvals.core.clock import Clock, SystemClock
from chat_approvals.core.models import Refusal, SubjectKind
from chat_approvals.core.protocol.subjects import canonical_host, never_allowable_reason
from chat_approvals.core.sandbox.egress.backend import GrantsBackend
from chat_approvals.core.sandbox.egress.index import PackageIndex
from chat_approvals.core.sandbox.egress.policy import Resolve, Rules, is_public
from chat_approvals.core.sandbox.egress.runs import Blocked, Run
from chat_approvals.core.sandbox.egress.wire import (
    Framing,
    Head,
    WireError,
    close,
    copy_body,
    encode_head,
    pipe,
    read_head,
    request_framing,
    respond,
)

log = logging.getLogger(__name__)


class GateConfig(BaseModel):
    """Launch-time settings (the server fills these from --gate-* flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen_host: str = "127.0.0.1"
    port: int = 0
    unix_socket: str | None = None  # created in a private temp dir when None and unix=True
    unix: bool = True  # the network-namespace sandbox reaches the gate through this socket
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    resolve: list[str] = Field(default_factory=list)
    package_index: str | None = None  # upstream PEP 503 simple index, e.g. https://pypi.org/simple/
    grant_ports: tuple[int, ...] = (80, 443)  # a site grant covers these; other ports need --gate-allow
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    head_timeout: float = 5.0  # a connection that has not authenticated by then is closed
    grant_recheck: float = 5.0  # an open connection a grant allowed is re-checked this often: a revoke ends it
    max_conns_per_run: int = 64
    max_unauth_per_source: int = 32  # not yet authenticated, per peer: an IP, or a uid on the unix socket
    max_unauth_total: int = 256  # not yet authenticated, from everyone together
    head_limit: int = 16 * 1024  # bytes of a request head: what an unauthenticated peer can make us hold
    fd_reserve: int = 256  # descriptors the gate leaves for the server's own work (store, sockets, logs)
    package_file_hosts: list[str] = Field(default_factory=list)  # more hosts the index's file links may point at


_BY_SOCKET: dict[str, weakref.ref[Gate]] = {}  # so a sandbox can bind a run to its uid without more wiring


def gate_at(unix_path: str | None) -> Gate | None:
    """The started gate listening on this unix socket in this process, if any."""
    ref = _BY_SOCKET.get(unix_path or "")
    return ref() if ref is not None else None


class Gate:
    def __init__(self, cfg: GateConfig, *, backend: GrantsBackend | None = None, clock: Clock | None = None) -> None:
        self.cfg = cfg
        self.rules = Rules.parse(cfg.allow, cfg.deny)
        self.resolve = Resolve.parse(cfg.resolve)
        self.backend = backend
        self.clock: Clock = clock or SystemClock()
        self._runs: dict[str, Run] = {}
        self._runs_lock = threading.Lock()  # tools may open runs from another thread's loop
        self._servers: list[asyncio.AbstractServer] = []
        self._tmpdir: str | None = None
        self.port = 0
        self.unix_path: str | None = None
        self._conns: set[asyncio.Task[None]] = set()
        self._pending: dict[object, int] = {}  # unauthenticated connections per source (event loop only)
        self._pending_total = 0
        self._conn_budget = 1 << 20  # set from RLIMIT_NOFILE at start
        self._flooding = False  # a refusal of connections was logged; logged again only after it ends
        self.index = PackageIndex(self, cfg.package_index, cfg.package_file_hosts) if cfg.package_index else None
        self.on_decision: Callable[[bool], None] | None = None  # metrics: allowed (True) or refused

    # ---- lifecycle ----

    async def start(self) -> Gate:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        # each connection holds up to two descriptors (the script's and the upstream's)
        self._conn_budget = max(8, (soft - self.cfg.fd_reserve) // 2) if soft != resource.RLIM_INFINITY else 1 << 20
        limit = self.cfg.head_limit
        srv = await asyncio.start_server(self._accept, self.cfg.listen_host, self.cfg.port, limit=limit)
        self._servers.append(srv)
        self.port = srv.sockets[0].getsockname()[1]
        if self.cfg.unix:
            path = self.cfg.unix_socket
            if path is None:
                self._tmpdir = tempfile.mkdtemp(prefix="egress-gate-")
                path = os.path.join(self._tmpdir, "gate.sock")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            self._servers.append(await asyncio.start_unix_server(self._accept, path, limit=limit))
            os.chmod(path, 0o666)  # the sandboxed child may run as another user
            self.unix_path = path
            _BY_SOCKET[path] = weakref.ref(self)
        log.info("egress gate on %s:%s (unix %s)", self.cfg.listen_host, self.port, self.unix_path)
        return self

    def listening(self) -> bool:
        """Started and still accepting connections (for /readyz)."""
        return bool(self._servers) and all(s.is_serving() for s in self._servers)

    async def close(self) -> None:
        for s in self._servers:
            s.close()
        for t in list(self._conns):
            t.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)
        for s in self._servers:
            with contextlib.suppress(Exception):
                await s.wait_closed()
        self._servers.clear()
        if self.index is not None:
            await self.index.close()
        if self.unix_path:
            _BY_SOCKET.pop(self.unix_path, None)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.unix_path)
        if self._tmpdir:
            with contextlib.suppress(OSError):
                os.rmdir(self._tmpdir)

    async def __aenter__(self) -> Gate:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- runs ----

    def open_run(self, *, user: str, chat: str, turn_id: str, backend: GrantsBackend | None = None) -> Run:
        b = backend or self.backend
        if b is None:
            raise ValueError("the gate has no grants backend for this run")
        run = Run(secrets.token_urlsafe(18).replace("-", "a").replace("_", "b"), user, chat, turn_id, b)
        with self._runs_lock:
            self._runs[run.token] = run
        return run

    def bind_uid(self, token: str, uid: int) -> bool:
        """From now on the run's token works only on a unix-socket connection from `uid` (the
        run's own uid, which its forwarder inside the sandbox runs as)."""
        run = self.run_by_token(token)
        if run is None:
            return False
        run.uid = uid
        return True

    def close_run(self, run: Run) -> None:
        """The run's credentials stop working, and its connections still open (a tunnel a
        left-over process holds) are ended too."""
        with self._runs_lock:
            self._runs.pop(run.token, None)
        with run._lock:
            run.closed = True
            tasks = list(run.tasks)
        for t in tasks:
            loop = t.get_loop()
            if loop.is_closed():
                continue
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(t.cancel)

    @contextlib.contextmanager
    def run(self, *, user: str, chat: str, turn_id: str, backend: GrantsBackend | None = None) -> Iterator[Run]:
        r = self.open_run(user=user, chat=chat, turn_id=turn_id, backend=backend)
        try:
            yield r
        finally:
            self.close_run(r)

    def proxy_url(self, run: Run, host: str = "127.0.0.1", port: int | None = None) -> str:
        return f"http://{run.username}:x@{host}:{port or self.port}"

    def index_url(self, run: Run, host: str = "127.0.0.1", port: int | None = None) -> str | None:
        if self.index is None:
            return None
        return f"http://{host}:{port or self.port}/run/{run.token}/simple/"

    def sandbox_env(self, run: Run, host: str = "127.0.0.1", port: int | None = None) -> dict[str, str]:
        """The environment a sandboxed child needs to go out through the gate."""
        proxy = self.proxy_url(run, host, port)
        env = {k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY")}
        env["NO_PROXY"] = env["no_proxy"] = f"{host}"  # the index view is the gate itself: go direct
        idx = self.index_url(run, host, port)
        if idx:
            env["PIP_INDEX_URL"] = idx
            env["UV_INDEX_URL"] = idx
        return env

    def _run_for(self, head: Head, header: str = "Proxy-Authorization") -> Run | None:
        value = head.get(header)
        if not value or value[:6].lower() != "basic ":
            return None
        try:
            user, _, _ = base64.b64decode(value[6:].strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            return None
        if not user.startswith("run-"):
            return None
        return self.run_by_token(user[4:])

    def run_by_token(self, token: str) -> Run | None:
        with self._runs_lock:
            run = self._runs.get(token)
        if run is None:
            return None
        # constant-time compare of what we found, so a lookup hit leaks nothing by timing
        return run if secrets.compare_digest(run.token, token) else None

    # ---- decisions ----

    async def decide(self, run: Run, kind: SubjectKind, name: str, port: int | None, url: str | None) -> str | None:
        """None when allowed; otherwise the sentence the client is refused with."""
        refusal = await self._decide(run, kind, name, port, url)
        if self.on_decision is not None:
            self.on_decision(refusal is None)
        return refusal

    async def _decide(self, run: Run, kind: SubjectKind, name: str, port: int | None, url: str | None) -> str | None:
        label = name if kind == "site" else f"package {name}"
        if self.rules.denied(kind, name, port):
            run._note_denied(name if kind == "site" else f"package:{name}")
            return f"{label} is denied by the operator's policy; no approval can allow it."
        if self.rules.allowed(kind, name, port):
            return None
        never = never_allowable_reason(name) if kind == "site" else None
        if never:  # refused as such: no approval can allow it, so it is never recorded for a card
            run._note_denied(name)
            return never + "."
        if kind == "site" and port not in self.cfg.grant_ports:
            run._note_denied(f"{name}:{port}")
            return f"port {port} of {name} is not open to approvals (only {self.cfg.grant_ports})."
        try:
            if await run.backend.is_allowed(user=run.user, chat=run.chat, kind=kind, name=name, turn_id=run.turn_id):
                return None
        except Exception:  # fail closed: a store error is a refusal, and is not recorded as one
            log.exception("grant check failed for %s %s", kind, name)
            return f"the gate could not check the grants for {label}; try again."
        b = Blocked(kind, name, port, url)
        if run._note_refused(b):
            refusal = Refusal(
                chat=run.chat,
                turn_id=run.turn_id,
                kind=kind,
                name=name,
                port=port,
                url=url,
                at=self.clock.now(),
            )
            try:
                await run.backend.record_refusal(refusal)
            except Exception:
                log.exception("could not record refusal of %s %s", kind, name)
        return (
            f"{label} is not approved for this chat. The egress gate refused it; the agent can ask for it "
            "with request_approval."
        )

    # ---- connections ----

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Pending(self, _source(writer))
        why = conn.take()
        if why:  # too many unauthenticated connections, or descriptors running out: drop at once
            writer.transport.abort()
            if not self._flooding:  # once per flood, not per connection
                self._flooding = True
                log.warning("egress gate: dropping new connections (%s, from %s)", why, conn.source)
            return
        task = asyncio.current_task()
        if task is not None:  # tracked so close() can end held tunnels
            self._conns.add(task)
            task.add_done_callback(self._conns.discard)
        try:
            await self._serve(reader, writer, conn)
        finally:
            conn.release()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: Pending) -> None:
        try:
            head = await asyncio.wait_for(read_head(reader), self.cfg.head_timeout)
            if head is None:
                return
            method, target, _ = head.first
            if method == "CONNECT":
                await self._tunnel(head, reader, writer, conn)
            elif target.startswith("http://"):
                u = urlsplit(target)
                try:
                    port = u.port or 80
                except ValueError:  # a malformed port is the client's error, never a traceback
                    raise WireError(400, "bad port in the request target") from None
                if self._is_self(u.hostname, port):
                    await self._local(head, u.path + (f"?{u.query}" if u.query else ""), writer, conn)
                else:
                    await self._forward(head, reader, writer, conn)
            elif target.startswith("/"):
                await self._local(head, target, writer, conn)
            else:
                raise WireError(400, "the gate speaks plain HTTP and CONNECT only (no TLS to the proxy)")
        except WireError as e:
            await respond(writer, e.status, _REASONS.get(e.status, "Error"), e.message + "\n", extra=_gate_hdr())
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:
            log.exception("egress gate connection failed")
            with contextlib.suppress(Exception):
                await respond(writer, 502, "Bad Gateway", "egress gate error\n")
        finally:
            await close(writer)

    def _is_self(self, host: str | None, port: int) -> bool:
        return port == self.port and (host or "") in {"127.0.0.1", "localhost", self.cfg.listen_host}

    async def _tunnel(
        self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: Pending
    ) -> None:
        target = head.first[1]
        host_s, sep, port_s = target.rpartition(":")
        if not sep or not port_s.isdigit():
            raise WireError(400, "CONNECT wants host:port")
        host, port = self._host(host_s), int(port_s)
        run = await self._admit(head, writer, conn)
        if run is None:
            return
        with self.slot(run):
            refusal = await self.decide(
                run, "site", host, port, f"https://{host}:{port}" if port != 443 else f"https://{host}/"
            )
            if refusal:
                await respond(writer, 403, "Forbidden", refusal + "\n", extra=_gate_hdr("site", host))
                return
            up_r, up_w = await self._open_upstream(host, port)
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            try:
                idle = self.cfg.idle_timeout
                if self.rules.allowed("site", host, port):  # the operator opened it: any protocol
                    await pipe_both(reader, writer, up_r, up_w, idle)
                    return
                # a grant names a site: TLS (whose first byte is 0x16), or one plain-HTTP request
                # whose Host is that site, never another site on the granted address
                first = await asyncio.wait_for(reader.read(1), idle)
                if not first:
                    return
                if first == b"\x16":
                    up_w.write(first)
                    await self._while_granted(run, host, port, pipe_both(reader, writer, up_r, up_w, idle))
                    return
                inner = await asyncio.wait_for(read_head(reader, prefix=first), self.cfg.head_timeout)
                path = inner.first[1] if inner is not None else ""
                if not path.startswith("/") or path.startswith("//") or inner is None or inner.first[0] == "CONNECT":
                    raise WireError(400, "a tunnel carries TLS or one origin-form HTTP request")
                self._check_host_header(inner, host, port)
                framing = request_framing(inner)
                u = urlsplit(f"http://{host}{inner.first[1]}")
                await self._while_granted(
                    run, host, port, self._exchange(inner, u, host, port, framing, reader, writer, up_r, up_w)
                )
            finally:
                await close(up_w)

    async def _forward(
        self, head: Head, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: Pending
    ) -> None:
        target = head.first[1]
        u = urlsplit(target)
        if not u.hostname:
            raise WireError(400, "absolute URL without a host")
        try:
            host, port = self._host(u.hostname), u.port or 80
        except ValueError as e:
            raise WireError(400, f"bad port in {target!r}") from e
        self._check_host_header(head, host, port)
        request_framing(head)  # an ambiguous request is refused before anything is decided
        run = await self._admit(head, writer, conn)
        if run is None:
            return
        with self.slot(run):
            await self._forward_as(run, head, u, host, port, reader, writer)

    async def _forward_as(
        self,
        run: Run,
        head: Head,
        u: SplitResult,
        host: str,
        port: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        refusal = await self.decide(run, "site", host, port, _shown_url(u))
        if refusal:
            await respond(writer, 403, "Forbidden", refusal + "\n", extra=_gate_hdr("site", host))
            return
        up_r, up_w = await self._open_upstream(host, port)
        try:
            framing = request_framing(head)
            await self._while_granted(
                run, host, port, self._exchange(head, u, host, port, framing, reader, writer, up_r, up_w)
            )
        finally:
            await close(up_w)

    async def _exchange(
        self,
        head: Head,
        u: SplitResult,
        host: str,
        port: int,
        framing: Framing,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
    ) -> None:
        """One plain-HTTP request to the origin and its answer back to the script: exactly one
        body is sent on, and nothing the script sends after it (a pipelined request) ever is."""
        method = head.first[0]
        # the origin gets exactly the Host the gate decided on (a different one was refused)
        headers = [(k, v) for k, v in head.without_hop_by_hop() if k.lower() != "host"]
        shown = f"[{host}]" if ":" in host else host
        headers.insert(0, ("Host", shown if port == 80 else f"{shown}:{port}"))
        headers.append(("Connection", "close"))  # one request per connection: each is decided
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        up_w.write(encode_head(f"{method} {path} HTTP/1.1", headers))
        await up_w.drain()
        body = asyncio.ensure_future(copy_body(reader, up_w, framing, self.cfg.idle_timeout))
        try:
            while True:
                resp = await asyncio.wait_for(read_head(up_r, strict=False), self.cfg.idle_timeout)
                if resp is None:
                    raise WireError(502, f"{host} closed the connection without answering")
                version, status, reason = resp.first
                out = resp.without_hop_by_hop()
                if not status.startswith("1"):
                    out.append(("Connection", "close"))
                writer.write(encode_head(f"{version} {status} {reason}", out))
                await writer.drain()
                if not status.startswith("1") or status == "101":
                    break
            await pipe(up_r, writer, self.cfg.idle_timeout)
        finally:
            body.cancel()
            with contextlib.suppress(BaseException):
                await body

    async def _while_granted(self, run: Run, host: str, port: int, work: Awaitable[object]) -> None:
        await self.while_granted(run, "site", host, port, work)

    async def while_granted(
        self, run: Run, kind: SubjectKind, name: str, port: int | None, work: Awaitable[object]
    ) -> None:
        """Runs an open connection's copying (a tunnel, a plain-HTTP exchange, a package file's
        download). When a grant (not the operator's allow list) let it through, the grant is
        re-checked every `grant_recheck` seconds and the connection ends once it is gone: a revoke
        or an expiry, on whichever replica it happened, bites on what is already open, not only on
        the next connection."""
        task = asyncio.ensure_future(work)
        try:
            if self.rules.allowed(kind, name, port):
                await task
                return
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.cfg.grant_recheck)
                if done:
                    task.result()
                    return
                if not await self._still_granted(run, kind, name):
                    log.info("grant for %s %s is gone: closing an open connection of run %s", kind, name, run.turn_id)
                    return
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _still_granted(self, run: Run, kind: SubjectKind, name: str) -> bool:
        try:
            return await run.backend.is_allowed(user=run.user, chat=run.chat, kind=kind, name=name, turn_id=run.turn_id)
        except Exception:  # a store hiccup does not cut a live download; the next check decides
            log.warning("grant re-check for %s failed; keeping the connection until the next check", name,
                        exc_info=True)  # fmt: skip
            return True

    def _check_host_header(self, head: Head, host: str, port: int) -> None:
        """The origin sees the Host the gate decided on, or the request is refused: a different
        Host would let a script reach a name it was never granted on an address that was."""
        values = [v for k, v in head.headers if k.lower() == "host"]
        if not values:
            return
        if len(values) > 1:
            raise WireError(400, "more than one Host header")
        try:
            u = urlsplit("//" + values[0].strip())
            same = canonical_host(u.hostname or "") == host and (u.port or 80) == port
        except ValueError:
            same = False
        if not same:
            raise WireError(400, f"the Host header {values[0]!r} does not match the request target {host}:{port}")

    async def _admit(self, head: Head, writer: asyncio.StreamWriter, conn: Pending) -> Run | None:
        run = self._run_for(head)
        if run is not None and not conn.admit(run):
            run = None
        if run is None:
            await respond(
                writer,
                407,
                "Proxy Authentication Required",
                "this sandbox run has no valid gate credentials\n",
                extra=[("Proxy-Authenticate", 'Basic realm="egress-gate"')],
            )
        return run

    @contextlib.contextmanager
    def slot(self, run: Run) -> Iterator[None]:
        """At most `max_conns_per_run` open at once: one script cannot exhaust the server's sockets."""
        task = asyncio.current_task()
        with run._lock:
            if run.closed:
                raise WireError(407, "this sandbox run has ended")
            if run.active >= self.cfg.max_conns_per_run:
                raise WireError(429, f"more than {self.cfg.max_conns_per_run} connections at once for this run")
            run.active += 1
            if task is not None:
                run.tasks.add(task)
        try:
            yield
        finally:
            with run._lock:
                run.active -= 1
                if task is not None:
                    run.tasks.discard(task)

    def _host(self, raw: str) -> str:
        try:
            return canonical_host(raw)
        except ValueError as e:
            raise WireError(400, str(e)) from e

    async def _open_upstream(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        mapped = self.resolve.lookup(host, port)
        if mapped is not None:
            addr = mapped
        else:
            loop = asyncio.get_running_loop()
            try:
                infos = await asyncio.wait_for(
                    loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), self.cfg.connect_timeout
                )
            except (OSError, TimeoutError) as e:
                raise WireError(502, f"cannot resolve {host}: {e}") from e
            ips = [str(i[4][0]) for i in infos]
            if not ips or not all(is_public(ip) for ip in ips):
                raise WireError(403, f"{host} resolves to a non-public address; the gate does not go there")
            addr = (ips[0], port)
        try:
            return await asyncio.wait_for(asyncio.open_connection(*addr), self.cfg.connect_timeout)
        except (OSError, TimeoutError) as e:
            raise WireError(502, f"cannot connect to {host}:{port}: {e}") from e

    async def _local(self, head: Head, path: str, writer: asyncio.StreamWriter, conn: Pending) -> None:
        """Requests addressed to the gate itself: the package-index view."""
        if self.index is not None and path.startswith("/run/"):
            await self.index.handle(head, path, writer, conn.admit)
            return
        await respond(writer, 404, "Not Found", "egress gate: nothing here\n")


class Pending:
    """One connection counted against its source until it authenticates (or ends)."""

    def __init__(self, gate: Gate, source: object) -> None:
        self.gate, self.source, self.held = gate, source, False

    def take(self) -> str | None:
        """None when counted; otherwise why the connection is dropped."""
        g = self.gate
        counts = g._pending
        if counts.get(self.source, 0) >= g.cfg.max_unauth_per_source:
            return "too many unauthenticated connections from one peer"
        if g._pending_total >= g.cfg.max_unauth_total:
            return "too many unauthenticated connections in total"
        if len(g._conns) >= g._conn_budget:
            return "the descriptors left are kept for the server's own work"
        counts[self.source] = counts.get(self.source, 0) + 1
        g._pending_total += 1
        self.held = True
        return None

    def admit(self, run: Run) -> bool:
        """The run's token is used from this connection: allowed when the token is not bound to
        another uid; then the connection no longer counts as unauthenticated."""
        if not run.usable_by(self.source):
            return False
        self.release()
        return True

    def release(self) -> None:
        if self.held:
            self.held = False
            counts = self.gate._pending
            counts[self.source] -= 1
            if counts[self.source] <= 0:
                del counts[self.source]
            self.gate._pending_total -= 1
            if self.gate._pending_total == 0:
                self.gate._flooding = False


def _source(writer: asyncio.StreamWriter) -> object:
    """Who is connecting: the peer IP on TCP; on the unix socket the peer's uid (SO_PEERCRED),
    which as root is the run's own (a fork chain of new pids is still one run)."""
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        with contextlib.suppress(OSError):
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            return ("unix", uid)
        return ("unix", None)
    peer = writer.get_extra_info("peername")
    return ("tcp", peer[0] if isinstance(peer, tuple) else str(peer))


def _shown_url(u: SplitResult) -> str:
    """The URL as a card may show it: without userinfo, which a script can fill with anything
    (`http://security-team-approved:ok@host/`)."""
    netloc = u.netloc.rpartition("@")[2]
    return u._replace(netloc=netloc).geturl()


async def pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_r: asyncio.StreamReader,
    up_w: asyncio.StreamWriter,
    idle: float,
) -> None:
    await asyncio.gather(pipe(reader, up_w, idle), pipe(up_r, writer, idle))


def _gate_hdr(kind: str | None = None, name: str | None = None) -> list[tuple[str, str]]:
    h = [("X-Egress-Gate", "refused" if kind else "error")]
    if kind and name:
        h.append(("X-Egress-Gate-Refused", f"{kind}={name}"))
    return h


_REASONS = {
    407: "Proxy Authentication Required",
    429: "Too Many Requests",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
