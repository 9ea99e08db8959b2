"""How the pooled Bot Connector clients send (bots/teams_compat.py, workaround 11): aiohttp on
the event loop instead of msrest's default, `requests` in the loop's thread pool.

msrest's default pipeline runs every reply through `requests` in a worker thread: a thread hop,
and requests' own preparation (cookies, netrc, proxies from the environment) per call. (msrest's
own aiohttp sender sends neither headers nor body.) What the requests pipeline did is kept: the
same policies (User-Agent, logging, the body parsed as JSON), the bot's token on every call
(after workaround 9 made it ready off the loop), the proxy the environment names (read once per
host), msrest's timeout, and the retries msrest's `ClientRetryPolicy` gets from urllib3 2 (whose
Retry no longer reads its `method_whitelist`): up to 3, with urllib3's backoff; a connection
that could not be made is retried for any method; a dropped connection, a timeout or a status
msrest does not list as safe only for urllib3's idempotent methods (a card's update, not a new
post); Retry-After honoured where urllib3 honours it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import requests
from aiohttp.helpers import get_env_proxy_for_url
from msrest.configuration import Configuration
from msrest.exceptions import ClientRequestError
from msrest.pipeline import AsyncHTTPPolicy, AsyncHTTPSender, AsyncPipeline, Request, Response, SansIOHTTPPolicy
from msrest.pipeline.universal import RawDeserializer
from msrest.universal_http.aiohttp import AioHttpClientResponse
from msrest.universal_http.requests import ClientRetryPolicy
from urllib3.util.retry import Retry
from yarl import URL

from chat_approvals.bots.teams_token import TokenSource

log = logging.getLogger(__name__)

RETRIES = 3  # ClientRetryPolicy's total (connect, read and status alike)
BACKOFF = 0.8  # its backoff_factor; urllib3 2: no wait before the first retry, then 0.8 * 2^(n-1) s
BACKOFF_MAX = 90.0
RETRY_AFTER = frozenset({413, 429, 503})  # the statuses whose Retry-After urllib3 honours


IDEMPOTENT = Retry.DEFAULT_ALLOWED_METHODS  # urllib3's: read and status retries only for these


def _env_proxy(url: URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    try:
        return get_env_proxy_for_url(url)
    except LookupError:  # none set, or NO_PROXY names the host
        return None, None


def _retried(status: int) -> bool:
    return status not in ClientRetryPolicy.safe_codes


def _backoff(errors: int) -> float:
    return 0.0 if errors <= 1 else min(BACKOFF_MAX, BACKOFF * (2 ** (errors - 1)))


def _retry_after(response: aiohttp.ClientResponse) -> float | None:
    value = response.headers.get("Retry-After")
    if response.status not in RETRY_AFTER or value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: the backoff instead


class _Loaded(AioHttpClientResponse):
    """A response whose body was read whole; a stream of it (botbuilder's get_attachment) is given
    from that body, in chunks, each passed to the callback as msrest's requests response does."""

    def stream_download(self, chunk_size: int | None = None, callback: Any = None) -> AsyncIterator[bytes]:
        body, size = self.body(), chunk_size or self.CHUNK

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(body), size):
                chunk = body[i : i + size]
                if callback is not None:
                    callback(chunk, self.internal_response)
                yield chunk

        return chunks()

    CHUNK = 10 * 1024


class CredentialsHeader(AsyncHTTPPolicy):
    """The bot's token on the request, as msrest's requests credentials policy puts it on its
    session: botbuilder's `signed_session` decides (none for an anonymous bot)."""

    def __init__(self, credentials: Any) -> None:
        super().__init__()
        self._creds = credentials
        self._signed = requests.Session()  # only its headers are used: what signed_session writes

    async def send(self, request: Request, **kwargs: Any) -> Response:
        await TokenSource.ready_for(self._creds)  # workaround 9: the token fetched off the loop
        self._creds.signed_session(self._signed)
        token = self._signed.headers.get("Authorization")
        if token:
            request.http_request.headers["Authorization"] = token
        else:
            request.http_request.headers.pop("Authorization", None)
        assert self.next is not None  # the pipeline links every policy to the next
        response: Response = await self.next.send(request, **kwargs)
        return response


class AiohttpSender(AsyncHTTPSender):
    """msrest's sender interface over one aiohttp session (made on first use, on the loop)."""

    def __init__(self, config: Configuration) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str | None], tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    async def __aenter__(self) -> AiohttpSender:
        return self

    async def __aexit__(self, *exc_details: Any) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def build_context(self) -> None:
        return None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # Not trust_env: with it aiohttp reads ~/.netrc in a thread on every request, twice
            # (for an auth the bot's token replaces, and for the proxy's); the proxy is read once
            # per host instead (`_proxy`).
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.config.connection.timeout))
        return self._session

    async def _proxy(self, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The environment's proxy for `url`'s host (HTTP_PROXY, NO_PROXY, its netrc credentials), as
        aiohttp's trust_env finds it; read off the loop once per scheme and host."""
        if not self.config.proxies.use_env_settings:
            return None, None
        target = URL(url)
        key = (target.scheme, target.host)
        if key not in self._proxies:
            self._proxies[key] = await asyncio.to_thread(_env_proxy, target)
        return self._proxies[key]

    async def send(self, request: Request, **kwargs: Any) -> Response:
        http = request.http_request
        # aiohttp counts the bytes itself (msrest's Content-Length counts a str's characters)
        headers = {k: v for k, v in {**self.config.headers, **http.headers}.items() if k.lower() != "content-length"}
        data = http.data.encode() if isinstance(http.data, str) else http.data
        ssl = self.config.connection.verify is not False  # msrest's verify: False turns the check off
        proxy, proxy_auth = await self._proxy(http.url)
        errors = 0
        while True:
            try:
                raw = await self._http().request(
                    http.method, http.url, headers=headers, data=data, ssl=ssl, proxy=proxy, proxy_auth=proxy_auth
                )
            except (aiohttp.ClientConnectionError, TimeoutError) as e:
                errors += 1
                never_sent = isinstance(e, aiohttp.ClientConnectorError)
                if errors > RETRIES or not (never_sent or http.method in IDEMPOTENT):
                    raise ClientRequestError(f"Error occurred in request. {type(e).__name__}: {e}", e) from e
                log.debug("teams connector: %s; retry %d of %d", e, errors, RETRIES)
                await asyncio.sleep(_backoff(errors))
                continue
            if _retried(raw.status) and http.method in IDEMPOTENT and errors < RETRIES:
                errors += 1
                wait = _retry_after(raw)
                raw.release()
                await asyncio.sleep(_backoff(errors) if wait is None else wait)
                continue
            response = _Loaded(http, raw)
            await response.load_body()  # read now, streamed or not: an error's body is read after this returns
            return Response(request, response)


def aiohttp_pipeline(config: Configuration) -> AsyncPipeline:
    """The pipeline msrest's ServiceClientAsync builds, its requests sender swapped for aiohttp's."""
    policies: list[AsyncHTTPPolicy | SansIOHTTPPolicy] = [
        config.user_agent_policy,
        RawDeserializer(),
        config.http_logger_policy,
    ]
    if config.credentials:
        policies.insert(1, CredentialsHeader(config.credentials))
    return AsyncPipeline(policies, AiohttpSender(config))
