"""The Teams connector token, never fetched on the event loop (issue 27.2, R21).

botbuilder's credentials fetch their token with MSAL synchronously inside msrest's request
pipeline, so with a slow identity endpoint the whole process waited (a /healthz for 30 s). Here
every credential botbuilder builds is attached to one `TokenSource`: its `get_access_token`
(still called synchronously by msrest) only reads the cache, and the cache is filled before a
request is signed (`ready`, awaited by msrest's credentials policy: bots/teams_compat.py,
workaround 9), in a worker thread, with a timeout, one fetch at a
time per identity, and refreshed in the background before the token expires. A slow or failing
identity endpoint delays or fails only the replies that need the token, and says so in the log.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botframework.connector.auth import ServiceClientCredentialsFactory
from botframework.connector.auth.app_credentials import AppCredentials
from prometheus_client import CollectorRegistry, Counter, Histogram

log = logging.getLogger("chat_approvals.teams.token")

FETCH_TIMEOUT = 10.0  # seconds a reply waits for the identity endpoint
REFRESH_BEFORE = 300.0  # refresh this long before expiry (AAD tokens live about an hour)
FALLBACK_LIFETIME = 1800.0  # a token whose expiry cannot be read is kept this long
Key = tuple[str, str]


class TokenMetrics:
    """What the identity endpoint is doing, on the server's registry (/metrics)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        p = "chat_approvals_teams_token_"
        self.fetches = Counter(p + "fetches", "Connector token fetches by result", ["result"], registry=registry)
        self.seconds = Histogram(
            p + "fetch_seconds", "Connector token fetch time (off the event loop)", registry=registry,
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )  # fmt: skip
        self.timeouts = Counter(p + "timeouts", "Replies that waited past the fetch timeout", registry=registry)
        for result in ("ok", "failed"):  # a rate() has a zero to start from
            self.fetches.labels(result)

    @classmethod
    def on(cls, registry: CollectorRegistry) -> TokenMetrics:
        """One set per registry (a second Teams mount on the same server shares it)."""
        made = _MADE.get(registry)
        if made is None:
            made = _MADE[registry] = cls(registry)
        return made


_MADE: weakref.WeakKeyDictionary[CollectorRegistry, TokenMetrics] = weakref.WeakKeyDictionary()


class TokenUnavailable(PermissionError):
    """No connector token yet (the identity endpoint was slow or failed): the reply is not sent."""


@dataclass
class _Entry:
    fetch: Callable[[], str]
    token: str = ""
    expires: float = 0.0
    task: asyncio.Task[None] | None = None
    failure: str = ""


def _expiry(token: str, now: float) -> float:
    """The JWT's `exp` (read, not verified: it only schedules the refresh), else a fallback."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        exp = float(claims["exp"])
        return now + max(0.0, exp - time.time())
    except (IndexError, KeyError, TypeError, ValueError):
        return now + FALLBACK_LIFETIME


class TokenSource:
    def __init__(self, *, timeout: float = FETCH_TIMEOUT, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout, self.clock = timeout, clock
        self._entries: dict[Key, _Entry] = {}
        self.metrics: TokenMetrics | None = None  # set by the server (bots/teams_bot.py)

    def attach(self, creds: Any) -> Any:
        """Route a botbuilder credential's token through this source (anonymous ones need none)."""
        if not isinstance(creds, AppCredentials) or not creds.microsoft_app_id:
            return creds
        key: Key = (creds.microsoft_app_id, str(creds.oauth_scope))
        if key not in self._entries:
            self._entries[key] = _Entry(fetch=creds.get_access_token)  # MSAL, synchronous: a thread's job
        creds.get_access_token = lambda force_refresh=False: self.cached(key)
        creds._chat_approvals_token_key = key
        creds._chat_approvals_tokens = self
        return creds

    @staticmethod
    async def ready_for(creds: Any) -> None:
        """`ready` on the source a credential is attached to (none: nothing to do)."""
        source = getattr(creds, "_chat_approvals_tokens", None)
        if isinstance(source, TokenSource):
            await source.ready(creds)

    def cached(self, key: Key) -> str:
        """What msrest's synchronous signing reads: never a network call."""
        entry = self._entries.get(key)
        if entry is None or not entry.token or entry.expires <= self.clock():
            why = entry.failure if entry is not None and entry.failure else "not fetched yet"
            raise TokenUnavailable(f"no Teams connector token ({why})")
        return entry.token

    async def ready(self, creds: Any) -> None:
        """Before a client is used: a valid token cached (waiting at most `timeout` for a fetch),
        and a refresh started in the background when it is close to expiry."""
        key: Key | None = getattr(creds, "_chat_approvals_token_key", None)
        entry = self._entries.get(key) if key is not None else None
        if key is None or entry is None:
            return
        now = self.clock()
        if entry.token and entry.expires > now:
            if entry.expires - now < REFRESH_BEFORE:
                self._start(key, entry)  # the current token still works meanwhile
            return
        task = self._start(key, entry)
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=self.timeout)
        except TimeoutError:
            if self.metrics is not None:
                self.metrics.timeouts.inc()
            self._trouble(entry, f"the identity endpoint did not answer within {self.timeout:g} s; replies wait for it")

    def _start(self, key: Key, entry: _Entry) -> asyncio.Task[None]:
        if entry.task is None or entry.task.done():
            entry.task = asyncio.ensure_future(self._fetch(key, entry))
        return entry.task

    async def _fetch(self, key: Key, entry: _Entry) -> None:
        started = time.perf_counter()
        try:
            token = await asyncio.to_thread(entry.fetch)
        except Exception as e:  # MSAL's PermissionError, a network error: the replies fail, the loop does not
            self._observe("failed", time.perf_counter() - started)
            self._trouble(entry, f"fetching the connector token for {key[0]} failed: {type(e).__name__}: {e}")
            return
        took = time.perf_counter() - started
        self._observe("ok", took)
        if entry.failure:
            log.info("teams: the connector token is fetched again after %.1f s; replies go out", took)
        elif took > 1.0:
            log.warning("teams: the connector token took %.1f s to fetch (off the event loop)", took)
        entry.token, entry.expires, entry.failure = token, _expiry(token, self.clock()), ""

    def _observe(self, result: str, took: float) -> None:
        if self.metrics is not None:
            self.metrics.fetches.labels(result).inc()
            self.metrics.seconds.observe(took)

    @staticmethod
    def _trouble(entry: _Entry, why: str) -> None:
        """One warning line when the trouble starts; the metrics count every failed fetch."""
        if not entry.failure:
            log.warning("teams: %s", why)
        entry.failure = why

    async def close(self) -> None:
        for entry in self._entries.values():
            if entry.task is not None and not entry.task.done():
                entry.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await entry.task


class OffLoopCredentials(ServiceClientCredentialsFactory):
    """botbuilder's credentials factory, each credential it makes attached to `tokens`."""

    def __init__(self, inner: ServiceClientCredentialsFactory, tokens: TokenSource) -> None:
        self._inner, self.tokens = inner, tokens

    async def is_valid_app_id(self, app_id: str) -> bool:
        valid: bool = await self._inner.is_valid_app_id(app_id)
        return valid

    async def is_authentication_disabled(self) -> bool:
        disabled: bool = await self._inner.is_authentication_disabled()
        return disabled

    async def create_credentials(
        self, app_id: str, oauth_scope: str, login_endpoint: str, validate_authority: bool
    ) -> Any:
        creds = await self._inner.create_credentials(app_id, oauth_scope, login_endpoint, validate_authority)
        return self.tokens.attach(creds)
