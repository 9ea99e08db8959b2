"""A local stand-in for Bot Framework's token issuer: an OpenID configuration and a JWKS served on
loopback, with RSA keys generated here, and tokens signed with them (or forged on purpose)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from chat_approvals.bots.teams_auth import TokenValidator

ISSUER = "https://api.botframework.com"
APP_ID = "11111111-2222-3333-4444-555555555555"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalIssuer:
    def __init__(self) -> None:
        self.keys: dict[str, rsa.RSAPrivateKey] = {"key-1": new_key()}
        self.endorsements = ["msteams"]
        self.delay = 0.0  # seconds the JWKS endpoint waits before answering (a slow key endpoint)
        self.jwks_hits = 0
        self.runner: web.AppRunner | None = None
        self.base = ""
        self._released = asyncio.Event()  # ends a slow answer early when the issuer stops

    async def start(self) -> LocalIssuer:
        app = web.Application()
        app.router.add_get("/.well-known/openidconfiguration", self._metadata)
        app.router.add_get("/keys", self._jwks)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.base = f"http://127.0.0.1:{self.runner.addresses[0][1]}"
        return self

    async def stop(self) -> None:
        self._released.set()
        if self.runner is not None:
            await self.runner.cleanup()

    async def _metadata(self, _: web.Request) -> web.Response:
        return web.json_response({"issuer": ISSUER, "jwks_uri": f"{self.base}/keys"})

    async def _jwks(self, _: web.Request) -> web.Response:
        self.jwks_hits += 1
        if self.delay:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._released.wait(), self.delay)
        keys = []
        for kid, key in self.keys.items():
            jwk: dict[str, Any] = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "endorsements": self.endorsements})
        return web.json_response({"keys": keys})

    @property
    def metadata_url(self) -> str:
        return f"{self.base}/.well-known/openidconfiguration"

    def validator(self, app_id: str = APP_ID, **kw: Any) -> TokenValidator:
        kw.setdefault("fetch_timeout", 2.0)
        kw.setdefault("min_refresh_gap", 0.0)
        return TokenValidator(app_id, metadata_url=self.metadata_url, issuer=ISSUER, **kw)

    def token(
        self,
        service_url: str,
        *,
        kid: str = "key-1",
        key: rsa.RSAPrivateKey | None = None,
        now: float | None = None,
        **claims: Any,
    ) -> str:
        t = time.time() if now is None else now
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": APP_ID,
            "serviceurl": service_url,
            "nbf": int(t) - 10,
            "exp": int(t) + 3600,
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key or self.keys[kid], algorithm="RS256", headers={"kid": kid})


class NoOutsideNames:
    """Fails any name lookup that is not loopback, and remembers it: tests must never reach out."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self._real = socket.getaddrinfo

    def __enter__(self) -> NoOutsideNames:
        real = self._real

        def guarded(host: Any, *args: Any, **kwargs: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else str(host)
            if name not in ("127.0.0.1", "localhost", "::1"):
                self.asked.append(name)
                raise OSError(f"test: no lookups outside loopback ({name})")
            return real(host, *args, **kwargs)

        socket.getaddrinfo = guarded
        return self

    def __exit__(self, *exc: object) -> None:
        socket.getaddrinfo = self._real
