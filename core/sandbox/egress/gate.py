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

This module holds the gate's lifecycle and its runs (the credentials); what is allowed is
`decide.py`, the connections (the strict parser's side) `proxy.py`, the settings `config.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import secrets
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator

from chat_approvals.core.clock import Clock, SystemClock
from chat_approvals.core.models import SubjectKind
from chat_approvals.core.sandbox.egress.backend import GrantsBackend
from chat_approvals.core.sandbox.egress.config import GateConfig
from chat_approvals.core.sandbox.egress.decide import decide_request
from chat_approvals.core.sandbox.egress.index import PackageIndex
from chat_approvals.core.sandbox.egress.policy import Resolve, Rules
from chat_approvals.core.sandbox.egress.proxy import Proxy
from chat_approvals.core.sandbox.egress.runs import Blocked, Run

__all__ = ["Blocked", "Gate", "GateConfig", "Run", "gate_at"]

log = logging.getLogger(__name__)


_BY_SOCKET: dict[str, weakref.ref[Gate]] = {}  # so a sandbox can bind a run to its uid without more wiring


def gate_at(unix_path: str | None) -> Gate | None:
    """The started gate listening on this unix socket in this process, if any."""
    ref = _BY_SOCKET.get(unix_path or "")
    return ref() if ref is not None else None


class Gate(Proxy):
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
        log.debug("egress gate on %s:%s (unix %s)", self.cfg.listen_host, self.port, self.unix_path)
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
        refusal = await decide_request(
            run, kind, name, port, url, rules=self.rules, grant_ports=self.cfg.grant_ports, clock=self.clock
        )
        if self.on_decision is not None:
            self.on_decision(refusal is None)
        return refusal
