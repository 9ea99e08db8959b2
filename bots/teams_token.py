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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botframework.connector.auth import ServiceClientCredentialsFactory
from botframework.connector.auth.app_credentials import AppCredentials

log = logging.getLogger("chat_approvals.teams.token")

FETCH_TIMEOUT = 10.0  # seconds a reply waits for the identity endpoint
REFRESH_BEFORE = 300.0  # refresh this long before expiry (AAD tokens live about an hour)
FALLBACK_LIFETIME = 1800.0  # a token whose expiry cannot be read is kept this long
Key = tuple[str, str]


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
            entry.failure = f"the identity endpoint did not answer within {self.timeout:g} s"
            log.warning("teams: %s; replies wait for it", entry.failure)

    def _start(self, key: Key, entry: _Entry) -> asyncio.Task[None]:
        if entry.task is None or entry.task.done():
            entry.task = asyncio.ensure_future(self._fetch(key, entry))
        return entry.task

    async def _fetch(self, key: Key, entry: _Entry) -> None:
        started = time.perf_counter()
        try:
            token = await asyncio.to_thread(entry.fetch)
        except Exception as e:  # MSAL's PermissionError, a network error: the replies fail, the loop does not
            entry.failure = f"{type(e).__name__}: {e}"
            log.warning("teams: fetching the connector token for %s failed: %s", key[0], entry.failure)
            return
        entry.token, entry.expires, entry.failure = token, _expiry(token, self.clock()), ""
        took = time.perf_counter() - started
        if took > 1.0:
            log.warning("teams: the connector token took %.1f s to fetch (off the event loop)", took)

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
