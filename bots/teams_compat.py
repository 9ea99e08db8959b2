"""Every botbuilder 4.17.1 workaround the Teams front end needs, in one small module.

botbuilder-python is archived (no fixes will come); its successor is the Microsoft 365 Agents
SDK. Keeping each workaround here means a move to it touches this file and no other:

1. CloudAdapter serializes an invoke body twice (`serializer_helper` on a dict) and answers 500
   to every invoke that has a body, Action.Execute included. `apply()` makes that serializer
   pass JSON values through.
2. A malformed `adaptiveCard/action` makes botbuilder build an error body holding an Exception,
   which cannot be serialized: 500 instead of 400. `invoke_response()` builds our own bodies, so
   the bot answers malformed clicks before botbuilder's own checks run.
3. `ConversationAccount.tenant_id` maps to JSON `tenantID`, but Teams sends `tenantId`, so the
   tenant is lost from the conversation and from a serialized reference. `tenant_of()` reads it
   from channelData; `TeamsCardLocation` keeps it beside the reference.
4. `CloudAdapter.process()` answers 500 to a body that is not JSON or has no Content-Type, and
   parses an Authorization header even with auth disabled (a junk header -> 500). `process()`
   answers those with a clear 4xx first.
5. The adapters' `process` signatures differ; only CloudAdapter is used, through `process()`.
6. With an app id, botbuilder validates a token by fetching the OpenID metadata and keys with a
   synchronous HTTP call without a timeout, on the event loop, and answers 500 to a malformed
   token. `_ValidatedAuthentication` hands token validation to `bots.teams_auth.TokenValidator`
   (async fetches with timeouts, cached keys, background refresh, a 401 for every bad token) and
   keeps botbuilder for what comes after (the connector factory for replies).
7. botbuilder builds a new connector client for every turn, and with it msrest's
   `ClientRetryPolicy`, whose constructor scans a 500-item list 999 times (`i not in safe_codes`):
   about 4 ms of CPU per client, two clients per click, on the event loop. `apply()` makes
   `safe_codes` a frozenset: the same codes, the same retry list, in microseconds.
8. Each of those clients (a ConnectorClient for the replies, a UserTokenClient that is never used
   here) holds its own HTTP sessions (msrest's requests sender, one per thread), so every activity
   built two clients (about 0.64 ms of CPU) and its replies opened new connections (against Teams,
   a new TLS handshake per reply turn). `_ClientPool` keeps one client per app id, scope, service
   URL and audience, reused by every turn: at most POOL_SIZE, the least recently used dropped (a
   caller choosing service URLs cannot grow it). `close_clients` closes the kept ones when the
   server stops.
9. botbuilder's credentials fetch the outbound (connector) token with MSAL synchronously, inside
   msrest's pipeline, on the event loop: a slow identity endpoint stalled every request. Each
   credential is attached to a `bots.teams_token.TokenSource` (its `get_access_token` reads a
   cache); msrest's async credentials policy first awaits `ready()`, which fills the cache off the
   loop, with a timeout, and refreshes it before expiry: only a request that is sent waits.
10. msrest "validates" every activity a connector client sends (each attribute of the Activity,
   recursively) against rules that no botbuilder model declares: it checks nothing, and cost a
   third of each reply's serialisation. The pooled clients are built with it off, as
   autorest's own generated clients since have it (`client_side_validation = False`); the
   bodies they send are the same.
11. msrest sends each request with `requests` in the loop's thread pool (a thread hop, and
   requests' own per-call preparation: netrc and the proxies read again each time). The pooled
   connector clients send with aiohttp on the loop instead (`bots.teams_transport`), keeping the
   token, the proxies, the timeout and the retries msrest's requests had: about 1.5 ms of CPU a
   Teams click less (issue 34).
12. msrest serialises a model by visiting all of its mapped attributes, raising and catching a
   ValueError for each one that is None (an Activity maps 60, a reply sets about ten). The pooled
   connector clients serialise with `bots.teams_serializer.PresentOnlySerializer`: msrest's own
   code on the attributes that are set, the same bodies, about a third less CPU a reply.
13. `CloudAdapter.process()` reads the body's JSON again (`request.json()`) after `process()`
   has read and checked it (4): `process()` runs the rest of its POST path itself, on the body
   already read (the same activity, turn and answer; 401 for a PermissionError, 201 without an
   invoke answer).
14. msrest reads a model (every incoming activity and each model in it) by first working out the
   keys its class maps, a regex split for each attribute (60 for an Activity), every time.
   `bots.teams_deserializer` works them out once per model: the same models, about 15% less
   CPU to read an invoke.
15. `Activity().deserialize(body)` builds a new msrest Deserializer for each activity (with a dict
   of every model class) and runs msrest's XML key extractor on every attribute of every model in
   it, which for a JSON body always answers None. `_process_read` reads the activity with
   `bots.teams_deserializer.read_activity`: one Deserializer kept, JSON's key extractor only; the
   same activity.
16. msrest's `Serializer.body()` first walks a model "just in case this is a dict", then its
   `_serialize` dispatches each attribute by a type lookup and serialises each string by raising
   and catching an AttributeError: about 90 us for a reply. The pooled clients' serialiser
   (`bots.teams_serializer`, with 12) copies a model whose values are plain strings, str enums,
   nested models and JSON values from a plan made once per class, and hands any other model to
   msrest's own path: the same bodies, key for key and in order.
17. msrest reads each attribute of a model from JSON by copying its description, running its key
   extractors and dispatching the value by a type lookup, raising and catching a NameError for
   every string. The kept activity reader (15) and the pooled clients' deserialiser
   (`bots.teams_deserializer.PlainDeserializer`) read the values msrest keeps as they are from a
   plan made once per class and hand every other value to msrest: the same models.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import botbuilder.integration.aiohttp.cloud_adapter as _cloud_adapter_module
from aiohttp import web
from botbuilder.core import Bot, InvokeResponse, TurnContext
from botbuilder.core import serializer_helper as _original_serializer_helper
from botbuilder.integration.aiohttp import CloudAdapter, ConfigurationBotFrameworkAuthentication
from botbuilder.schema import Activity, CallerIdConstants, ConversationReference
from botframework.connector.aio import ConnectorClient
from botframework.connector.auth import (
    AuthenticationConstants,
    CertificateServiceClientCredentialsFactory,
    ClaimsIdentity,
    ConnectorFactory,
    PasswordServiceClientCredentialFactory,
    ServiceClientCredentialsFactory,
)
from botframework.connector.auth.authenticate_request_result import AuthenticateRequestResult
from botframework.connector.auth.user_token_client import UserTokenClient
from msrest.pipeline.async_requests import AsyncRequestsCredentialsPolicy as _CredentialsPolicy
from msrest.universal_http.requests import ClientRetryPolicy as _ClientRetryPolicy
from pydantic import BaseModel, ConfigDict

from chat_approvals.bots import teams_deserializer
from chat_approvals.bots.teams_auth import TokenRejected, TokenValidator
from chat_approvals.bots.teams_serializer import PresentOnlySerializer, serialize_set_attributes_only
from chat_approvals.bots.teams_shapes import activity_problem
from chat_approvals.bots.teams_token import OffLoopCredentials, TokenSource
from chat_approvals.bots.teams_transport import aiohttp_pipeline
from chat_approvals.core.text import holds_surrogate_escape

log = logging.getLogger(__name__)

_JSON_NATIVE = (dict, list, str, int, float, bool)


def _tolerant_serializer_helper(obj: Any) -> Any:
    if obj is None or isinstance(obj, _JSON_NATIVE):
        return obj
    return _original_serializer_helper(obj)


def apply() -> None:
    """Workarounds 1, 7, 9 and 14 (8 is in `make_adapter`'s authentication). Idempotent; run when an
    adapter is built."""
    _cloud_adapter_module.serializer_helper = _tolerant_serializer_helper
    _ClientRetryPolicy.safe_codes = frozenset(_ClientRetryPolicy.safe_codes)  # type: ignore[assignment]  # only `in`
    teams_deserializer.apply()
    if _CredentialsPolicy.send is not _send_with_token_ready:
        global _original_credentials_send
        _original_credentials_send = _CredentialsPolicy.send
        _CredentialsPolicy.send = _send_with_token_ready  # type: ignore[method-assign]


_original_credentials_send: Callable[..., Awaitable[Any]] | None = None


async def _send_with_token_ready(self: _CredentialsPolicy, request: Any, **kwargs: Any) -> Any:
    """Workaround 9: the token this request will be signed with, fetched off the loop first."""
    await TokenSource.ready_for(self._creds)
    assert _original_credentials_send is not None
    return await _original_credentials_send(self, request, **kwargs)


def is_applied() -> bool:
    return _cloud_adapter_module.serializer_helper is _tolerant_serializer_helper


# --------------------------------------------------------------------------- auth and adapter


class TeamsAuth(BaseModel):
    """The bot's Microsoft identity. No app id = unauthenticated, for local clients only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    app_id: str = ""
    app_password: str = ""
    certificate_thumbprint: str = ""
    certificate_private_key: str = ""  # PEM text (read from a file by the config loader)
    tenant_id: str = ""
    app_type: Literal["MultiTenant", "SingleTenant"] = "MultiTenant"

    @property
    def enabled(self) -> bool:
        return bool(self.app_id)

    def check(self) -> None:
        """A half-set identity is a configuration error, never a silent fallback to no auth."""
        if not self.app_id:
            if self.app_password or self.certificate_thumbprint or self.certificate_private_key:
                raise ValueError("Teams: a password or certificate is set but no Microsoft App id")
            return
        has_password = bool(self.app_password)
        has_cert = bool(self.certificate_thumbprint and self.certificate_private_key)
        if has_password == has_cert:
            raise ValueError("Teams: set exactly one of the app password or the certificate (thumbprint + key)")
        if self.app_type == "SingleTenant" and not self.tenant_id:
            raise ValueError("Teams: a single-tenant app needs its tenant id")


class _Config:
    """The attribute bag ConfigurationBotFrameworkAuthentication reads."""

    def __init__(self, auth: TeamsAuth) -> None:
        self.APP_ID = auth.app_id
        self.APP_PASSWORD = auth.app_password
        self.APP_TYPE = auth.app_type
        self.APP_TENANTID = auth.tenant_id


def credentials_factory(auth: TeamsAuth) -> ServiceClientCredentialsFactory:
    tenant = auth.tenant_id if auth.app_type == "SingleTenant" else None
    if auth.certificate_thumbprint:
        return CertificateServiceClientCredentialsFactory(
            auth.certificate_thumbprint, auth.certificate_private_key, auth.app_id, tenant
        )
    return PasswordServiceClientCredentialFactory(auth.app_id, auth.app_password, tenant)


POOL_SIZE = 64  # clients kept (workaround 8): Teams uses a handful of service URLs
RETIRE_AFTER = 300.0  # seconds a dropped client stays open: longer than a turn that took it sends
C = TypeVar("C")


class _ClientPool:
    """Workaround 8: one client per key, reused. A dropped client (past `size`, or made twice by two
    turns at once) is closed `retire_after` seconds later: a turn that took it may still be
    sending, and its connections must not wait for the garbage collector (an aiohttp session left
    open there is logged as an error). `close()`, when the server stops, closes every client still
    kept or waiting, and with them their open connections."""

    def __init__(self, size: int = POOL_SIZE, retire_after: float = RETIRE_AFTER) -> None:
        self.size = size
        self.retire_after = retire_after
        self._clients: OrderedDict[Hashable, Any] = OrderedDict()
        self._retired: dict[int, tuple[Any, asyncio.TimerHandle]] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._clients)

    async def get(self, key: Hashable, make: Callable[[], Awaitable[C]]) -> C:
        if key in self._clients:
            self._clients.move_to_end(key)
            client: C = self._clients[key]
            return client
        client = await make()  # two turns making the same key at once: the later one is kept
        earlier = self._clients.get(key)
        self._clients[key] = client
        if earlier is not None:
            self._retire(earlier)
        while len(self._clients) > self.size:
            self._retire(self._clients.popitem(last=False)[1])
        return client

    def _retire(self, client: Any) -> None:
        if getattr(client, "__aexit__", None) is None:  # botbuilder's user-token client holds nothing
            return
        handle = asyncio.get_running_loop().call_later(self.retire_after, self._close_later, id(client))
        self._retired[id(client)] = (client, handle)

    def _close_later(self, key: int) -> None:
        retired = self._retired.pop(key, None)
        if retired is not None:
            task = asyncio.ensure_future(_close_client(retired[0]))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every kept or retired client (msrest's async clients: their HTTP sessions). The pool
        is empty afterwards; a later turn would build a new client, never use a closed one."""
        clients, self._clients = list(self._clients.values()), OrderedDict()
        for client, handle in self._retired.values():
            handle.cancel()
            clients.append(client)
        self._retired = {}
        for client in clients:
            await _close_client(client)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


async def _close_client(client: Any) -> None:
    close = getattr(client, "__aexit__", None)  # botbuilder's user-token client has none
    if close is None:
        return
    try:
        await close(None, None, None)
    except Exception as e:  # one client's failure must not keep the others' sockets open
        log.warning("teams: closing a connector client failed: %s", e)


class _PooledConnectorFactory(ConnectorFactory):
    """Workaround 8: botbuilder's connector factory, its clients taken from the pool."""

    def __init__(self, inner: ConnectorFactory, pool: _ClientPool) -> None:
        self._inner, self._pool = inner, pool
        # botbuilder's factory builds its clients for this app id and scope (both from the claims)
        self._identity = (getattr(inner, "_app_id", None), getattr(inner, "_to_channel_from_bot_oauth_scope", None))

    async def create(self, service_url: str, audience: str | None = None) -> ConnectorClient:
        key = ("connector", *self._identity, service_url, audience)

        async def make() -> ConnectorClient:
            client = await self._inner.create(service_url, audience)
            client._serialize.client_side_validation = False  # workaround 10
            serialize_set_attributes_only(client)  # workarounds 12 and 16
            teams_deserializer.read_plainly(client)  # workaround 17
            client.config.pipeline = aiohttp_pipeline(client.config)  # workaround 11
            return client

        pooled: ConnectorClient = await self._pool.get(key, make)
        return pooled


class _ValidatedAuthentication(ConfigurationBotFrameworkAuthentication):
    """Workaround 6: botbuilder's configuration, with inbound tokens checked by our validator.
    Workaround 8: its connector and user-token clients come from one pool."""

    def __init__(self, auth: TeamsAuth, validator: TokenValidator | None) -> None:
        self.tokens = TokenSource()  # workaround 9
        self._credentials = OffLoopCredentials(credentials_factory(auth), self.tokens)
        super().__init__(_Config(auth), credentials_factory=self._credentials)
        self._validator = validator
        self.clients = _ClientPool()

    async def authenticate_request(self, activity: Activity, auth_header: str) -> AuthenticateRequestResult:
        if self._validator is None:  # no app id: botbuilder's anonymous identity (process() refused any header)
            result: AuthenticateRequestResult = await super().authenticate_request(activity, auth_header)
            if result.connector_factory is not None:
                result.connector_factory = _PooledConnectorFactory(result.connector_factory, self.clients)
            return result
        claims = await self._validator.validate(
            auth_header, channel_id=activity.channel_id, service_url=activity.service_url
        )
        identity = ClaimsIdentity(claims, True, "Bearer")
        result = AuthenticateRequestResult()
        result.claims_identity = identity
        result.audience = AuthenticationConstants.TO_CHANNEL_FROM_BOT_OAUTH_SCOPE
        result.caller_id = str(CallerIdConstants.public_azure_channel.value)
        result.connector_factory = self.create_connector_factory(identity)
        return result

    def create_connector_factory(self, claims_identity: ClaimsIdentity) -> ConnectorFactory:
        return _PooledConnectorFactory(super().create_connector_factory(claims_identity), self.clients)

    async def create_user_token_client(self, claims_identity: ClaimsIdentity) -> UserTokenClient:
        make = super().create_user_token_client
        app_id = claims_identity.get_claim_value(AuthenticationConstants.AUDIENCE_CLAIM) or (
            claims_identity.get_claim_value(AuthenticationConstants.APP_ID_CLAIM)
        )  # the app id botbuilder builds the client for
        client: UserTokenClient = await self.clients.get(("user-token", app_id), lambda: make(claims_identity))
        return client

    async def authenticate_streaming_request(self, auth_header: str, channel_id: str) -> AuthenticateRequestResult:
        raise TokenRejected("streaming connections are not served")

    async def authenticate_channel_request(self, auth_header: str) -> ClaimsIdentity:
        raise TokenRejected("skill requests are not served")


def token_source(adapter: CloudAdapter) -> TokenSource | None:
    """Workaround 9's token source of an adapter `make_adapter` built (None for another one)."""
    auth = adapter.bot_framework_authentication
    return auth.tokens if isinstance(auth, _ValidatedAuthentication) else None


async def close_clients(adapter: CloudAdapter) -> None:
    """Workaround 8, at shutdown: close the adapter's pooled clients (after the last turn)."""
    auth = adapter.bot_framework_authentication
    if isinstance(auth, _ValidatedAuthentication):
        await auth.clients.close()
        await auth.tokens.close()


def make_adapter(auth: TeamsAuth, validator: TokenValidator | None = None) -> CloudAdapter:
    """With an app id, `validator` checks every inbound token (it must be started by the caller)."""
    auth.check()
    apply()
    if auth.enabled and validator is None:
        raise ValueError("Teams: an app id needs a token validator")
    return CloudAdapter(_ValidatedAuthentication(auth, validator if auth.enabled else None))


async def process(adapter: CloudAdapter, request: web.Request, bot: Bot, *, auth_enabled: bool) -> web.Response:
    """Workarounds 4 and 5: refuse what botbuilder would answer with a 500, then hand over."""
    if request.method != "POST":
        raise web.HTTPMethodNotAllowed(request.method, ["POST"])
    if "application/json" not in request.headers.get("Content-Type", ""):
        raise web.HTTPUnsupportedMediaType(text="expected application/json")
    if not auth_enabled and request.headers.get("Authorization"):
        # With no app id nothing can validate a token; accepting one silently would mislead.
        raise web.HTTPUnauthorized(text="this endpoint runs without authentication; send no Authorization")
    try:
        text = await request.text()  # strict UTF-8: surrogate bytes fail here; aiohttp caches the body
        body = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past the parser's depth
        raise web.HTTPBadRequest(text="body is not JSON") from exc
    # the shape botbuilder reads, and R20's valid text (teams_shapes.py): a lone surrogate can only
    # come from a \uD800-\uDFFF escape, so a body without one is not walked again
    problem = activity_problem(body, text_checked=not holds_surrogate_escape(text))
    if problem is not None:
        raise web.HTTPBadRequest(text=problem)
    return await _process_read(adapter, request, body, bot)


async def _process_read(adapter: CloudAdapter, request: web.Request, body: Any, bot: Bot) -> web.Response:
    """Workaround 13: what `CloudAdapter.process()` does with a POST, on the body read above (it
    would read the JSON again: `request.json()`): the activity, the turn, the invoke's answer."""
    activity = teams_deserializer.read_activity(body)  # workaround 15
    if not activity.type:
        raise web.HTTPBadRequest
    try:
        invoke = await adapter.process_activity(request.headers.get("Authorization", ""), activity, bot.on_turn)
    except PermissionError as exc:
        raise web.HTTPUnauthorized from exc
    if invoke:
        return web.json_response(data=_cloud_adapter_module.serializer_helper(invoke.body), status=invoke.status)
    return web.Response(status=201)


class SentBody(dict[str, Any]):
    """A card or invoke body built for one send and never changed after it. botbuilder deep-copies
    every activity it sends (TurnContext.send_activities), the invoke answer too: a whole card,
    0.2 ms a click; such a body is shared instead (nothing writes to it)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> SentBody:
        return self


def invoke_response(status: int, body: dict[str, Any]) -> InvokeResponse:
    """Workaround 2: an invoke answer whose body is plain JSON (serializable by both adapters)."""
    return InvokeResponse(status=status, body=SentBody(body))


# --------------------------------------------------------------------------- activities


def tenant_of(activity: Activity) -> str | None:
    """Workaround 3: the tenant is in channelData (and in conversation's extra keys). Read from
    the plain dict, as `TeamsChannelData().deserialize(...).tenant.id` reads it (a click reads it
    four times: that msrest pass cost about 60 us each)."""
    data = activity.channel_data
    if isinstance(data, dict):
        tenant = data.get("tenant")
        tid = tenant.get("id") if isinstance(tenant, dict) else None
        if tid:
            return str(tid)
    conv = activity.conversation
    if conv is not None:
        extra = getattr(conv, "additional_properties", None) or {}
        tid = conv.tenant_id or extra.get("tenantId")
        if tid:
            return str(tid)
    return None


@functools.cache
def _references_out() -> PresentOnlySerializer:
    """Workaround 16 for a stored conversation reference: `Model.serialize` builds a new msrest
    Serializer (a dict of every botbuilder class) each time; this one is kept, and writes the same."""
    return PresentOnlySerializer(ConversationReference._infer_class_models())


@functools.cache
def _references_in() -> teams_deserializer.PlainDeserializer:
    """Workaround 17 for a stored conversation reference read back (`Model.deserialize` builds a new
    msrest Deserializer each time): kept, and the same reference."""
    return teams_deserializer.PlainDeserializer(ConversationReference._infer_class_models())


@dataclass(frozen=True)
class TeamsCardLocation:
    """Where a card lives in Teams: the serialised conversation reference (to post or update from
    any process), the card's activity id, and the tenant real Teams wants on proactive sends.
    Stored as the pointer's `card_location` strings (`stored()`), read back with `parse()`."""

    reference: str
    activity_id: str = ""
    tenant: str = ""
    routed: TeamsCardLocation | None = None  # the copy in the approvers' conversation (policy routing)
    escalated: TeamsCardLocation | None = None  # the copy posted to the escalation approvers (issue 33)

    @classmethod
    def of(cls, activity: Activity, card_activity_id: str = "") -> TeamsCardLocation:
        ref = TurnContext.get_conversation_reference(activity)
        stored = _references_out()._serialize(ref, keep_readonly=False)  # as ref.serialize() (16)
        return cls(json.dumps(stored, sort_keys=True), card_activity_id, tenant_of(activity) or "")

    @classmethod
    def parse(cls, stored: Mapping[str, str] | None) -> TeamsCardLocation | None:
        """None when there is no Teams reference in it (none stored, or another platform's)."""
        if not stored or not stored.get("reference"):
            return None
        tenant = stored.get("tenant", "")
        routed = None
        if stored.get("routed_reference"):
            routed = cls(stored["routed_reference"], stored.get("routed_activity_id", ""), tenant)
        escalated = None
        if stored.get("escalated_reference"):
            escalated = cls(stored["escalated_reference"], stored.get("escalated_activity_id", ""), tenant)
        return cls(stored["reference"], stored.get("activity_id", ""), tenant, routed, escalated)

    def stored(self) -> dict[str, str]:
        out = {
            "platform": "teams",
            "reference": self.reference,
            "activity_id": self.activity_id,
            "tenant": self.tenant,
        }
        if self.routed is not None:
            out.update(routed_reference=self.routed.reference, routed_activity_id=self.routed.activity_id)
        if self.escalated is not None:
            out.update(escalated_reference=self.escalated.reference, escalated_activity_id=self.escalated.activity_id)
        return out

    @property
    def here(self) -> TeamsCardLocation:
        """This copy alone (the requester's), without the approvers' one."""
        return replace(self, routed=None, escalated=None)

    @property
    def conversation_id(self) -> str | None:
        conv = json.loads(self.reference).get("conversation") or {}
        return str(conv["id"]) if conv.get("id") else None

    def in_conversation(self, conversation: str) -> TeamsCardLocation:
        """The same service URL, bot and tenant, pointed at another conversation (routing: the
        approvers' one); no card posted there yet."""
        ref = json.loads(self.reference)
        channel = conversation.endswith(("@thread.tacv2", "@thread.skype"))
        ref["conversation"] = {
            "id": conversation,
            "conversationType": "channel" if channel else "groupChat",
            "tenantId": self.tenant or None,
        }
        ref.pop("activityId", None)
        ref.pop("user", None)
        return TeamsCardLocation(json.dumps(ref, sort_keys=True), "", self.tenant)

    @property
    def deep_link(self) -> str | None:
        """A Teams link to this card's message."""
        conv = self.conversation_id
        if not conv or not self.activity_id:
            return None
        return f"https://teams.microsoft.com/l/message/{quote(conv, safe='')}/{quote(self.activity_id, safe='')}"

    def posted_as(self, activity_id: str) -> TeamsCardLocation:
        return replace(self, activity_id=activity_id)

    def conversation_reference(self) -> ConversationReference:
        ref: ConversationReference = _references_in()("ConversationReference", json.loads(self.reference))  # (17)
        if self.tenant and ref.conversation is not None:
            ref.conversation.tenant_id = self.tenant  # real Teams wants it for proactive sends
        return ref

    @property
    def is_personal(self) -> bool:
        """A one-to-one chat with the bot, read from the stored reference's JSON (as
        `conversation_reference().conversation.conversation_type`, without msrest's pass)."""
        conv = json.loads(self.reference).get("conversation")
        return isinstance(conv, dict) and conv.get("conversationType") == "personal"


async def continue_conversation(
    adapter: CloudAdapter,
    location: TeamsCardLocation,
    callback: Callable[[TurnContext], Awaitable[None]],
    *,
    app_id: str,
) -> None:
    """Run `callback` in the card's conversation, from any process that can read the location."""
    await adapter.continue_conversation(location.conversation_reference(), callback, bot_app_id=app_id or None)
