"""Bot Framework channel tokens, validated with bounded time and never on the event loop's back.

botbuilder 4.17.1 fetches the OpenID metadata and the signing keys with a synchronous HTTP call
without a timeout, on the event loop, on the request that needs them: one forged token against a
slow key endpoint froze the whole server. Here the metadata and keys are fetched with aiohttp and
timeouts, cached, and refreshed in the background; a request never waits longer than
`fetch_timeout` for keys (only an unknown key id asks for a refresh, at most once per
`min_refresh_gap`), and the signature check itself runs in a worker thread.

What is checked, as Bot Framework specifies for channel -> bot requests: `Authorization: Bearer`,
RSA signatures only (RS256/384/512), a known key id whose endorsements name the activity's channel, the issuer, the
audience (this bot's app id), expiry and not-before (5 minutes' leeway), and the `serviceurl`
claim equal to the activity's serviceUrl. Any failure is `TokenRejected` (the adapter answers 401).

A channel sends the same token with many requests, so a token whose signature and claims were
verified is remembered (`_verified`, at most MAX_VERIFIED): a later request with that exact string
skips the signature check and its thread hop (about 0.16 ms of CPU a request), while its times are
checked again as PyJWT checks them, against the clock now; and only while the key that verified it
is the one the cached keys hold for its key id (a refresh that drops or replaces the key means a
full check). The key id, the channel's endorsement and the serviceurl are checked on every request
as before. A rejected token is never remembered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt

log = logging.getLogger(__name__)

BOT_FRAMEWORK_OPENID = "https://login.botframework.com/v1/.well-known/openidconfiguration"
BOT_FRAMEWORK_ISSUER = "https://api.botframework.com"
ALGORITHMS = ("RS256", "RS384", "RS512")  # as botbuilder allows; never "none", never HMAC
MAX_TOKEN = 16_384
MAX_DOCUMENT = 1_000_000
MAX_VERIFIED = 256  # tokens remembered as verified: a channel uses a few at a time


class TokenRejected(PermissionError):
    """The request's token is missing or not valid; botbuilder's adapter turns this into a 401."""


@dataclass(frozen=True)
class _Key:
    key: Any  # a cryptography public key
    endorsements: frozenset[str] | None


@dataclass(frozen=True)
class _Verified:
    """A token whose signature and claims passed, and what must still hold to take it again."""

    kid: str
    key: _Key  # the key object that verified it: a refreshed key set has new ones
    claims: dict[str, Any]

    def still_valid(self, leeway: float) -> bool:
        """PyJWT's time checks (exp, and nbf and iat when present) against the clock now."""
        now = time.time()
        claims = self.claims
        if int(claims["exp"]) <= now - leeway:
            return False
        return all(int(claims[name]) <= now + leeway for name in ("nbf", "iat") if name in claims)


@dataclass
class TokenValidator:
    """Validates channel tokens for one Microsoft App id.

    `metadata_url` and `issuer` exist so tests can point the validator at a local OpenID
    configuration; nothing in the server's configuration or environment sets them.
    """

    app_id: str
    metadata_url: str = BOT_FRAMEWORK_OPENID
    issuer: str = BOT_FRAMEWORK_ISSUER
    fetch_timeout: float = 5.0
    refresh_every: float = 6 * 3600.0
    min_refresh_gap: float = 60.0
    leeway: float = 300.0
    _keys: dict[str, _Key] = field(default_factory=dict, init=False)
    _refreshing: asyncio.Task[None] | None = field(default=None, init=False)
    _last_refresh: float = field(default=float("-inf"), init=False)
    _background: asyncio.Task[None] | None = field(default=None, init=False)
    _session: aiohttp.ClientSession | None = field(default=None, init=False)
    _verified: OrderedDict[str, _Verified] = field(default_factory=OrderedDict, init=False)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Fetch the keys once (bounded) and keep them fresh in the background."""
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.fetch_timeout))
        await self._refresh_bounded()
        self._background = asyncio.create_task(self._keep_fresh())

    async def close(self) -> None:
        for task in (self._background, self._refreshing):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _keep_fresh(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_every)
            await self._refresh_bounded()

    # ------------------------------------------------------------------ keys
    async def _refresh_bounded(self) -> None:
        """One refresh at a time, shared by every waiter, each waiting at most `fetch_timeout`."""
        if self._refreshing is None or self._refreshing.done():
            self._last_refresh = time.monotonic()
            self._refreshing = asyncio.create_task(self._refresh())
        with contextlib.suppress(TimeoutError):  # the refresh goes on, bounded by its own timeout
            await asyncio.wait_for(asyncio.shield(self._refreshing), timeout=self.fetch_timeout)

    async def _refresh(self) -> None:
        try:
            async with asyncio.timeout(self.fetch_timeout):
                metadata = await self._get_json(self.metadata_url)
                jwks_uri = metadata.get("jwks_uri") if isinstance(metadata, dict) else None
                if not isinstance(jwks_uri, str):
                    raise ValueError("the OpenID configuration has no jwks_uri")
                jwks = await self._get_json(jwks_uri)
            keys = _parse_jwks(jwks)
            if keys:
                self._keys = keys
            log.info("teams: %d signing keys loaded from %s", len(keys), self.metadata_url)
        except Exception as e:  # whatever the endpoint did, the cached keys stay and no request fails with it
            log.warning("teams: signing keys not refreshed (%s); keeping %d cached", e, len(self._keys))

    async def _get_json(self, url: str) -> Any:
        if self._session is None:
            raise ValueError("the token validator is not started")
        async with self._session.get(url) as r:
            if r.status != 200:
                raise ValueError(f"{url} answered {r.status}")
            body = await r.content.read(MAX_DOCUMENT + 1)
            if len(body) > MAX_DOCUMENT:
                raise ValueError(f"{url} sent more than {MAX_DOCUMENT} bytes")
            return json.loads(body)

    async def _key(self, kid: str) -> _Key | None:
        key = self._keys.get(kid)
        if key is None and time.monotonic() - self._last_refresh >= self.min_refresh_gap:
            await self._refresh_bounded()  # Microsoft may have rolled its keys
            key = self._keys.get(kid)
        return key

    # ------------------------------------------------------------------ validation
    async def validate(self, auth_header: str, *, channel_id: str | None, service_url: str | None) -> dict[str, Any]:
        """The token's claims, or TokenRejected. Bounded by `fetch_timeout` plus one signature check."""
        token = _bearer(auth_header)
        known = self._verified.get(token)
        kid = known.kid if known is not None else _key_id(token)
        key = await self._key(kid)
        if key is None:
            raise TokenRejected("the token's signing key is unknown")
        if key.endorsements is not None and (not channel_id or channel_id not in key.endorsements):
            raise TokenRejected("the signing key is not endorsed for this channel")
        if known is not None and known.key is key and known.still_valid(self.leeway):
            self._verified.move_to_end(token)
            claims = dict(known.claims)
        else:
            self._verified.pop(token, None)  # expired, or its key replaced: checked in full again
            loop = asyncio.get_running_loop()
            claims = await loop.run_in_executor(None, self._decode, token, key.key)
            self._remember(token, _Verified(kid, key, dict(claims)))
        claimed_url = claims.get("serviceurl") or claims.get("serviceUrl")
        if not service_url or claimed_url != service_url:
            raise TokenRejected("the token's serviceurl does not match the activity's")
        return claims

    def _remember(self, token: str, verified: _Verified) -> None:
        self._verified[token] = verified
        self._verified.move_to_end(token)
        while len(self._verified) > MAX_VERIFIED:
            self._verified.popitem(last=False)

    def _decode(self, token: str, key: Any) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(ALGORITHMS),
                audience=self.app_id,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as e:
            raise TokenRejected(f"the token is not valid: {type(e).__name__}") from e
        return claims


def _key_id(token: str) -> str:
    """The key id of an RSA-signed JWT (its header, unverified), or TokenRejected."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as e:
        raise TokenRejected("the token is not a JWT") from e
    kid = header.get("kid")
    if header.get("alg") not in ALGORITHMS or not isinstance(kid, str):
        raise TokenRejected("the token is not RSA-signed with a key id")
    return kid


def _bearer(auth_header: str) -> str:
    scheme, _, token = (auth_header or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise TokenRejected("no bearer token")
    if len(token) > MAX_TOKEN or not token.isascii():
        raise TokenRejected("the bearer token is malformed")
    return token


def _parse_jwks(doc: object) -> dict[str, _Key]:
    keys: dict[str, _Key] = {}
    raw = doc.get("keys") if isinstance(doc, Mapping) else None
    if not isinstance(raw, list):
        raise ValueError("the JWKS has no keys")
    for entry in raw:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        try:
            public = jwt.PyJWK(entry, algorithm="RS256").key
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue  # a key we cannot use is skipped, not fatal
        endorsements = entry.get("endorsements")
        allowed = frozenset(e for e in endorsements if isinstance(e, str)) if isinstance(endorsements, list) else None
        keys[entry["kid"]] = _Key(public, allowed)
    return keys
