"""The egress gate's connections (the proxy side; what is allowed is `decide.py`): accepting
and counting unauthenticated peers, the strict request head, CONNECT tunnels and plain-HTTP
forwarding, one request per connection, the Host check, the upstream's address check, and the
re-check that ends an open connection once its grant is gone."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import socket
import struct
from collections.abc import Awaitable, Iterator
from urllib.parse import SplitResult, urlsplit

from chat_approvals.core.models import SubjectKind
from chat_approvals.core.protocol.subjects import canonical_host
from chat_approvals.core.sandbox.egress.config import GateConfig
from chat_approvals.core.sandbox.egress.decide import still_granted
from chat_approvals.core.sandbox.egress.index import PackageIndex
from chat_approvals.core.sandbox.egress.policy import Resolve, Rules, is_public
from chat_approvals.core.sandbox.egress.runs import Run
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


class Proxy:
    """The connection handling the gate (`gate.Gate`) is built on. It asks the gate two things:
    which run a token names (`run_by_token`) and whether a request is allowed (`decide`)."""

    cfg: GateConfig
    rules: Rules
    resolve: Resolve
    index: PackageIndex | None
    port: int
    _conns: set[asyncio.Task[None]]
    _pending: dict[object, int]  # unauthenticated connections per source (event loop only)
    _pending_total: int
    _conn_budget: int
    _flooding: bool

    def run_by_token(self, token: str) -> Run | None:
        raise NotImplementedError

    async def decide(self, run: Run, kind: SubjectKind, name: str, port: int | None, url: str | None) -> str | None:
        raise NotImplementedError

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
                if not await still_granted(run, kind, name):
                    log.info("grant for %s %s is gone: closing an open connection of run %s", kind, name, run.turn_id)
                    return
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

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

    def __init__(self, gate: Proxy, source: object) -> None:
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
