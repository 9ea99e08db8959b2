"""The audit stream out: every audit event POSTed to each `--audit-webhook`, at least once.

The events wait in the store's outbox (written with the event itself, see core/protocol/audit.py),
so a receiver that is down, or a server restart, loses none. One deliverer per webhook per
replica; the store's per-sink lease lets one replica deliver at a time (another takes over
when its lease lapses). Items go out oldest first, one at a time, and a failure stops the
batch and backs off: so per chat (indeed overall) the receiver sees append order, with
repeats possible only after a failure (dedupe by `id`).

Delivery runs on its own task and reads and acknowledges items through the core's `Outbox`
port (core/ports.py), asynchronously: it never blocks a click, and never touches the row store.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from chat_approvals.core.clock import Clock
from chat_approvals.core.models import OutboxItem
from chat_approvals.core.observe import Metrics
from chat_approvals.core.ports import Outbox

log = logging.getLogger("chat_approvals.webhooks")

SIGNATURE_HEADER = "X-Chat-Approvals-Signature"
ID_HEADER = "X-Chat-Approvals-Event-Id"


def sink_id(url: str) -> str:
    """The outbox key of a webhook: stable across restarts, and no URL (or its credentials) in keys."""
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]


def sign(secret: str, body: bytes) -> str:
    """`sha256=HEX`: HMAC-SHA256 of the exact body bytes with the shared secret."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str) -> bool:
    """What a receiver does (docs/operating.md): recompute, compare in constant time."""
    return hmac.compare_digest(sign(secret, body), header)


@dataclass(frozen=True)
class Backoff:
    first: float = 0.5
    cap: float = 60.0

    def delay(self, failures: int) -> float:
        """Full jitter: uniform in [0, min(cap, first * 2^(n-1))]; never below 0.1 s."""
        return max(0.1, random.uniform(0, min(self.cap, self.first * 2 ** max(0, failures - 1))))


class Deliverer:
    """Delivers one webhook's outbox."""

    def __init__(
        self,
        url: str,
        secret: str,
        outbox: Outbox,
        clock: Clock,
        metrics: Metrics,
        *,
        poll: float = 2.0,
        lease: float = 30.0,
        batch: int = 50,
        timeout: float = 10.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.url = url
        self.sink = sink_id(url)
        self.secret = secret
        self.outbox = outbox
        self.clock = clock
        self.metrics = metrics
        self.poll = poll
        self.lease = lease
        self.batch = batch
        self.timeout = timeout
        self.backoff = backoff or Backoff()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.wake = asyncio.Event()
        self._failures = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def nudge(self) -> None:
        """A new event is in the outbox (called from a store thread)."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake.set)

    async def once(self, session: aiohttp.ClientSession) -> bool:
        """One pass: claim a batch and deliver it in order. True when it delivered every item
        it claimed (so more may be waiting), False after a failure or when there was nothing."""
        now = self.clock.now()
        items = await self.outbox.claim(
            sink=self.sink, holder=self.holder, now=now, lease_until=now + self.lease, limit=self.batch
        )
        if not items:
            self.metrics.webhook_lag.set(0)
            return False
        self.metrics.webhook_lag.set(max(0.0, time.time() - int(items[0].id.split("-")[0]) / 1e9))
        for item in items:
            if not await self._post(session, item):
                return False
            await self.outbox.delete(sink=self.sink, item_id=item.id)
        return len(items) == self.batch

    async def _post(self, session: aiohttp.ClientSession, item: OutboxItem) -> bool:
        body = item.body.encode("utf-8")
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body), ID_HEADER: item.id}
        try:
            async with session.post(self.url, data=body, headers=headers) as r:
                await r.read()
                ok = 200 <= r.status < 300
                why = f"HTTP {r.status}"
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            ok, why = False, type(e).__name__
        self.metrics.webhook_deliveries.labels("delivered" if ok else "failed").inc()
        if not ok:
            self._failures += 1
            log.warning("audit webhook %s: delivery of %s failed (%s); retrying", self.sink, item.id, why)
        else:
            self._failures = 0
        return ok

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    more = await self.once(session)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # a store fault: try again later, the items are durable
                    log.warning("audit webhook %s: outbox unavailable: %s", self.sink, e)
                    self._failures += 1
                    more = False
                if more:
                    continue
                wait = self.backoff.delay(self._failures) if self._failures else self.poll
                self.wake.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    # a failing receiver is retried on the backoff; a fresh event only wakes a healthy one
                    if self._failures:
                        await asyncio.sleep(wait)
                    else:
                        await asyncio.wait_for(self.wake.wait(), timeout=wait)

    async def release(self) -> None:
        """Give the sink's lease up (renewed into the past), so another process, or this one
        restarted, delivers at once instead of after the lease lapses."""
        now = self.clock.now()
        try:
            await self.outbox.claim(sink=self.sink, holder=self.holder, now=now, lease_until=now - 1, limit=1)
        except Exception as e:  # the lease lapses by itself
            log.warning("audit webhook %s: lease release failed: %s", self.sink, e)


def mount_webhooks(app: web.Application, deliverers: list[Deliverer]) -> None:
    """Start the deliverers with the app; stop them with it (undelivered items stay in the outbox)."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(d.run(), name=f"audit-webhook-{d.sink}") for d in deliverers]
        yield
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        for d in deliverers:
            await d.release()

    app.cleanup_ctx.append(ctx)
