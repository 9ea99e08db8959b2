"""bots/teams_compat.py: each botbuilder 4.17.1 workaround is shown needed (the bug, without it)
and shown working (with it); the auth configuration refuses half-set identities."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import botbuilder.integration.aiohttp.cloud_adapter as cloud_adapter_module
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from botbuilder.core import MessageFactory, TurnContext
from botbuilder.core import serializer_helper as original_serializer_helper
from botbuilder.core.teams import TeamsActivityHandler
from botbuilder.schema import Activity, AdaptiveCardInvokeResponse, AdaptiveCardInvokeValue, Attachment
from botframework.connector.auth import (
    CertificateServiceClientCredentialsFactory,
    ClaimsIdentity,
    PasswordServiceClientCredentialFactory,
)

from chat_approvals.bots import teams_compat
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_activity import card_activity, text_activity
from chat_approvals.bots.teams_bot import TEAMS, TeamsConfig, _is_loopback, chat_key, parse_command, user_of
from chat_approvals.bots.teams_compat import TeamsAuth
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.teams.harness import FIXTURES, OWNER_AAD, TENANT, Bot, MockConnector, fixture
from tests.teams.token_issuer import LocalIssuer, NoOutsideNames

APP_ID = "11111111-2222-3333-4444-555555555555"


class EchoCardBot(TeamsActivityHandler):
    """botbuilder's own Execute path, untouched by this project: returns a card body."""

    async def on_adaptive_card_invoke(
        self, turn_context: TurnContext, invoke_value: AdaptiveCardInvokeValue
    ) -> AdaptiveCardInvokeResponse:
        card = {"type": "AdaptiveCard", "version": "1.5", "body": []}
        return AdaptiveCardInvokeResponse(status_code=200, type="application/vnd.microsoft.card.adaptive", value=card)


async def post_raw(bot: TeamsActivityHandler, activity: dict[str, Any]) -> int:
    adapter = teams_compat.make_adapter(TeamsAuth())

    async def handler(req: web.Request) -> web.Response:
        resp = await adapter.process(req, bot)
        return resp if resp is not None else web.Response(status=201)

    app = web.Application()
    app.router.add_post("/api/messages", handler)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        resp = await client.post("/api/messages", json=activity)
        return resp.status


@pytest.fixture
def unpatched() -> Any:
    cloud_adapter_module.serializer_helper = original_serializer_helper
    assert not teams_compat.is_applied()
    yield
    teams_compat.apply()


async def test_workaround_1_cloud_adapter_double_serializes_invoke_bodies(unpatched: None) -> None:
    act = fixture("playground-invoke-adaptiveCard-action.json")
    cloud_adapter_module.serializer_helper = original_serializer_helper
    adapter = teams_compat.CloudAdapter(
        teams_compat.ConfigurationBotFrameworkAuthentication(teams_compat._Config(TeamsAuth()))
    )

    async def handler(req: web.Request) -> web.Response:
        resp = await adapter.process(req, EchoCardBot())
        return resp if resp is not None else web.Response(status=201)

    app = web.Application()
    app.router.add_post("/api/messages", handler)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        assert (await client.post("/api/messages", json=act)).status == 500  # the bug
        teams_compat.apply()
        assert teams_compat.is_applied()
        resp = await client.post("/api/messages", json=act)
        assert resp.status == 200  # the workaround
        body = await resp.json()
        assert body["statusCode"] == 200 and body["value"]["type"] == "AdaptiveCard"


async def test_workaround_2_botbuilder_answers_malformed_execute_with_500() -> None:
    act = fixture("playground-invoke-adaptiveCard-action.json")
    act["value"]["action"]["type"] = "Action.Submit"
    assert await post_raw(EchoCardBot(), act) == 500  # hence the project parses clicks itself (400)
    body = teams_compat.invoke_response(400, {"statusCode": 400}).body
    assert json.loads(json.dumps(body)) == {"statusCode": 400}


class _MessageBot(TeamsActivityHandler):
    """Answers nothing: a message turn, botbuilder's 201."""


async def test_workaround_13_process_reads_the_body_once_and_answers_as_botbuilder_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`process()` checked the JSON it read; botbuilder's `CloudAdapter.process()` would read it
    again with `request.json()`. Through `process()` nothing calls that (a tripwire there refuses
    botbuilder's path), and the answers are botbuilder's own: an invoke's body and status, a 201."""
    adapter = teams_compat.make_adapter(TeamsAuth())
    invoke, message = fixture("playground-invoke-adaptiveCard-action.json"), fixture("playground-message-text.json")

    async def ours(req: web.Request) -> web.Response:
        bot = EchoCardBot() if req.query.get("bot") == "card" else _MessageBot()
        return await teams_compat.process(adapter, req, bot, auth_enabled=False)

    async def botbuilders(req: web.Request) -> web.Response:
        bot = EchoCardBot() if req.query.get("bot") == "card" else _MessageBot()
        resp = await adapter.process(req, bot)
        return resp if resp is not None else web.Response(status=201)

    async def answers(path: str) -> list[tuple[int, str]]:
        got = []
        for query, act in (("card", invoke), ("text", message)):
            resp = await client.post(f"{path}?bot={query}", json=act)
            got.append((resp.status, await resp.text()))
        return got

    app = web.Application()
    app.router.add_post("/ours", ours)
    app.router.add_post("/botbuilders", botbuilders)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        expected = await answers("/botbuilders")
        assert [s for s, _ in expected] == [200, 201]

        async def read_again(self: web.Request) -> Any:
            raise AssertionError("the body's JSON was read a second time")

        monkeypatch.setattr(web.Request, "json", read_again)
        assert await answers("/ours") == expected
        assert [s for s, _ in await answers("/botbuilders")] == [500, 500]  # the tripwire works


def test_workaround_3_tenant_is_read_from_channel_data() -> None:
    act = Activity().deserialize(fixture("playground-message-text.json"))
    assert act.conversation.tenant_id is None  # botbuilder maps the key "tenantID", Teams sends "tenantId"
    assert teams_compat.tenant_of(act) == TENANT
    no_channel_data = Activity().deserialize({**fixture("playground-message-text.json"), "channelData": None})
    assert teams_compat.tenant_of(no_channel_data) == TENANT  # from the conversation's extra keys
    assert chat_key(act) == f"teams:{TENANT}:f62ca891-03b2-45a6-b15b-0e20fc6f66b1"
    assert user_of(act) == f"teams:{TENANT}:{OWNER_AAD}"


def test_channel_reply_chain_is_its_own_chat_and_without_aad_object_id_there_is_no_identity() -> None:
    raw = fixture("playground-message-text.json")
    raw["conversation"] = {"conversationType": "channel", "id": "19:abc@thread.tacv2;messageid=1700000000000"}
    raw["from"] = {"id": "29:1xyz", "name": "No AAD"}
    act = Activity().deserialize(raw)
    assert chat_key(act) == f"teams:{TENANT}:19:abc@thread.tacv2;messageid=1700000000000"
    assert user_of(act) is None  # R17: never the channel's from.id


def test_location_round_trip_keeps_the_tenant() -> None:
    act = Activity().deserialize(fixture("playground-message-text.json"))
    loc = teams_compat.TeamsCardLocation.of(act, "1796220926142").stored()
    assert all(isinstance(v, str) for v in loc.values())
    assert loc["activity_id"] == "1796220926142" and loc["tenant"] == TENANT
    back = teams_compat.TeamsCardLocation.parse(json.loads(json.dumps(loc)))
    assert back is not None and back.is_personal  # the Playground talks to the bot one to one
    ref = back.conversation_reference()
    assert ref.conversation.id == "f62ca891-03b2-45a6-b15b-0e20fc6f66b1"
    assert ref.conversation.tenant_id == TENANT
    assert ref.service_url == "http://localhost:56150/_connector"
    assert ref.user.id == "user-id-0"


def test_a_location_stores_and_reads_back_the_reference_as_msrest_s_own_model_methods() -> None:
    """Workarounds 16 and 17 for the stored conversation reference: written as `ref.serialize()`
    writes it (string for string), read back as `ConversationReference().deserialize` reads it
    (attribute for attribute), for every Teams activity in the fixtures and an approvers' copy. No
    rule covers msrest's model methods: this checks that where a card is posted reads back the same."""
    from botbuilder.schema import ConversationReference

    bodies, _ = fixture_bodies()
    for body in bodies:
        act = Activity().deserialize(body)
        loc = teams_compat.TeamsCardLocation.of(act, "1796220926142")
        reference = TurnContext.get_conversation_reference(act)
        assert loc.reference == json.dumps(reference.serialize(), sort_keys=True)
        for where in (loc, loc.in_conversation("19:approvers@thread.tacv2")):
            own = ConversationReference().deserialize(json.loads(where.reference))
            if where.tenant and own.conversation is not None:
                own.conversation.tenant_id = where.tenant
            assert model_state(where.conversation_reference()) == model_state(own)


@pytest.mark.parametrize(
    "auth",
    [
        TeamsAuth(app_password="pw"),
        TeamsAuth(app_id=APP_ID),
        TeamsAuth(app_id=APP_ID, app_password="pw", certificate_thumbprint="AB", certificate_private_key="K"),
        TeamsAuth(app_id=APP_ID, certificate_thumbprint="AB"),
        TeamsAuth(app_id=APP_ID, app_password="pw", app_type="SingleTenant"),
    ],
)
def test_half_set_identity_is_refused(auth: TeamsAuth) -> None:
    with pytest.raises(ValueError, match="Teams"):
        auth.check()


def test_credentials_factories() -> None:
    pw = teams_compat.credentials_factory(TeamsAuth(app_id=APP_ID, app_password="pw"))
    assert isinstance(pw, PasswordServiceClientCredentialFactory) and pw.tenant_id is None
    single = TeamsAuth(app_id=APP_ID, app_password="pw", app_type="SingleTenant", tenant_id=TENANT)
    single.check()
    assert teams_compat.credentials_factory(single).tenant_id == TENANT  # type: ignore[attr-defined]
    cert = TeamsAuth(app_id=APP_ID, certificate_thumbprint="AB", certificate_private_key="KEY")
    cert.check()
    assert isinstance(teams_compat.credentials_factory(cert), CertificateServiceClientCredentialsFactory)


def test_config_from_env(tmp_path: Path) -> None:
    assert TeamsConfig.from_env({}).auth == TeamsAuth()
    key = tmp_path / "key.pem"
    key.write_text("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
    cfg = TeamsConfig.from_env(
        {
            "CHAT_APPROVALS_TEAMS_APP_ID": APP_ID,
            "CHAT_APPROVALS_TEAMS_CERT_THUMBPRINT": "AB12",
            "CHAT_APPROVALS_TEAMS_CERT_KEY_FILE": str(key),
            "CHAT_APPROVALS_TEAMS_APP_TYPE": "SingleTenant",
            "CHAT_APPROVALS_TEAMS_TENANT_ID": TENANT,
            "CHAT_APPROVALS_TEAMS_INVOKE_BUDGET": "1.5",
        }
    )
    assert cfg.auth.certificate_private_key.startswith("-----BEGIN") and cfg.invoke_budget == 1.5
    with pytest.raises(ValueError):
        TeamsConfig.from_env({"CHAT_APPROVALS_TEAMS_APP_PASSWORD": "pw"})
    with pytest.raises(ValueError):
        TeamsConfig.from_env({"CHAT_APPROVALS_TEAMS_APP_ID": APP_ID, "CHAT_APPROVALS_TEAMS_APP_TYPE": "Both"})


@pytest.fixture
async def approvals(tmp_path: Path) -> AsyncIterator[Approvals]:
    clock = ManualClock()
    root = bootstrap(StoreIO(SqliteRows(tmp_path / "r.db"), FileObjects(tmp_path / "o", clock=clock)), clock=clock)
    yield root.approvals
    root.close()


async def test_unauthenticated_endpoint_is_off_on_a_public_address(approvals: Approvals) -> None:
    notes: list[str] = []
    app = web.Application()
    front = teams_compat_mount(app, approvals, TeamsConfig(), "0.0.0.0", notes)
    assert front is None and "OFF" in notes[0]
    assert not any(r.resource and r.resource.canonical == "/api/messages" for r in app.router.routes())


async def test_startup_says_unauthenticated_or_authenticated(approvals: Approvals) -> None:
    notes: list[str] = []
    teams_compat_mount(web.Application(), approvals, TeamsConfig(), "127.0.0.1", notes)
    assert "UNAUTHENTICATED" in notes[0] and "127.0.0.1" in notes[0]
    auth = TeamsAuth(app_id=APP_ID, app_password="pw")
    teams_compat_mount(web.Application(), approvals, TeamsConfig(auth=auth), "0.0.0.0", notes)
    assert f"authenticated as Microsoft App {APP_ID}" in notes[1]


async def test_authenticated_endpoint_refuses_a_request_without_token(approvals: Approvals) -> None:
    cfg = ServerConfig(host="0.0.0.0")
    issuer = await LocalIssuer().start()  # the validator's keys come from loopback, never from Microsoft
    try:
        with NoOutsideNames() as guard:
            app = build_app(
                approvals,
                cfg,
                sweep=False,
                teams=TeamsConfig(auth=TeamsAuth(app_id=APP_ID, app_password="pw")),
                teams_validator=issuer.validator(APP_ID),
            )
            async with TestClient(TestServer(app, host="127.0.0.1")) as client:
                resp = await client.post("/api/messages", json=fixture("playground-message-text.json"))
                assert resp.status == 401
        assert guard.asked == []
    finally:
        await issuer.stop()


def test_loopback() -> None:
    assert _is_loopback("127.0.0.1") and _is_loopback("::1") and _is_loopback("localhost")
    assert not _is_loopback("0.0.0.0") and not _is_loopback("10.0.0.1") and not _is_loopback(None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("approvals", ("approvals", "")),
        ("Approvals", ("approvals", "")),
        ("help", ("help", "")),
        ("", ("help", "")),
        ("revoke all", ("revoke", "all")),
        ("revoke example.com", ("revoke", "example.com")),
        ("revoke", ("revoke", "")),
        ("please fetch https://x.example", None),
        ("approvals for everyone", None),
    ],
)
def test_parse_command(text: str, expected: tuple[str, str] | None) -> None:
    got = parse_command(text)
    assert (tuple(got) if got else None) == expected


def teams_compat_mount(
    app: web.Application, approvals: Approvals, cfg: TeamsConfig, host: str, notes: list[str]
) -> object:
    from chat_approvals.bots.teams_bot import mount_teams

    return mount_teams(app, approvals, cfg, host=host, say=notes.append)


def test_workaround_7_the_retry_policy_is_unchanged_with_safe_codes_as_a_set() -> None:
    """msrest builds a ClientRetryPolicy per connector client (per turn); its codes as a frozenset make
    that cheap, and the policy it builds retries exactly the same statuses as msrest's own list."""
    from msrest.universal_http.requests import ClientRetryPolicy

    teams_compat.apply()
    msrest_list = [i for i in range(500) if i != 408] + [501, 505]  # msrest 0.7.1's class attribute
    assert isinstance(ClientRetryPolicy.safe_codes, frozenset) and ClientRetryPolicy.safe_codes == set(msrest_list)
    assert ClientRetryPolicy().policy.status_forcelist == [i for i in range(999) if i not in msrest_list]


def _read_with(own: bool, body: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
    """An activity as msrest reads it (msrest's own known keys, or workaround 14's): its body again,
    and the additional properties of it and of each model in it."""
    from msrest.serialization import Deserializer

    from chat_approvals.bots import teams_deserializer

    saved = Deserializer._build_additional_properties
    Deserializer._build_additional_properties = (  # type: ignore[method-assign]
        teams_deserializer.MSREST_OWN if own else teams_deserializer.build_additional_properties
    )
    try:
        act = Activity().deserialize(body)
    finally:
        Deserializer._build_additional_properties = saved  # type: ignore[method-assign]
    parts = [act, act.from_property, act.recipient, act.conversation, *(act.entities or [])]
    return act.serialize(keep_readonly=True), [getattr(p, "additional_properties", None) for p in parts]


def fixture_bodies() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every Teams activity in the fixtures, and (also returned alone) one more with keys no model
    maps, at the top and in nested models."""
    bodies = [fixture(p.name) for p in sorted(FIXTURES.glob("playground-*.json"))]
    extra = fixture("playground-invoke-adaptiveCard-action.json")
    extra.update(futureField={"a": 1}, locale="en-GB")
    extra["from"]["userRole"] = "user"
    extra["conversation"]["conversationKind"] = "personal"
    bodies.append(extra)
    return bodies, extra


def test_workaround_14_msrest_reads_the_same_models_with_their_keys_worked_out_once() -> None:
    """Every Teams activity in the fixtures, and one with keys no model maps (at the top and in
    nested models), read with msrest's own known keys and with workaround 14's: the same activity
    and the same additional properties. No rule covers msrest's reading; this checks that what the
    bot reads from Teams does not change."""
    from chat_approvals.bots.teams_deserializer import mapped_keys

    teams_compat.apply()
    bodies, extra = fixture_bodies()
    assert len(bodies) >= 5
    for body in bodies:
        assert _read_with(False, body) == _read_with(True, body)
    _, props = _read_with(False, extra)
    assert props[0] == {"futureField": {"a": 1}} and props[1] == {"userRole": "user"}  # they are read
    # worked out per map, whatever its size: two maps of one size never share their keys
    one = {"a": {"key": "a", "type": "str"}, "b": {"key": "properties.b", "type": "str"}}
    other = {"c": {"key": "c", "type": "str"}, "d": {"key": "d\\.e", "type": "str"}}
    assert mapped_keys(one) == {"a", "properties"} and mapped_keys(other) == {"c", "d.e"}
    assert mapped_keys(one) == {"a", "properties"}


def test_workaround_15_one_kept_reader_reads_every_activity_as_msrest_does() -> None:
    """The kept Deserializer, without the XML key extractor, reads every Teams activity in the
    fixtures (and one with keys no model maps) as `Activity().deserialize` does: the same activity
    and the same additional properties; the XML extractor it leaves out answers None for a dict
    (msrest 0.7.1), and a second read of the same body is the same (the reader keeps no state)."""
    from msrest.serialization import Deserializer, xml_key_extractor

    from chat_approvals.bots.teams_deserializer import activity_reader, read_activity

    teams_compat.apply()
    assert Deserializer().key_extractors[-1] is xml_key_extractor  # what the kept reader leaves out
    assert xml_key_extractor("locale", {"key": "locale", "type": "str"}, {"locale": "en-US"}) is None
    bodies, extra = fixture_bodies()

    def read(act: Activity) -> tuple[dict[str, Any], list[dict[str, Any] | None]]:
        parts = [act, act.from_property, act.recipient, act.conversation, *(act.entities or [])]
        return act.serialize(keep_readonly=True), [getattr(p, "additional_properties", None) for p in parts]

    for body in bodies:
        assert read(read_activity(body)) == read(Activity().deserialize(body))
        assert read(read_activity(body)) == read(Activity().deserialize(body))
    assert read(read_activity(extra))[1][:2] == [{"futureField": {"a": 1}}, {"userRole": "user"}]
    assert activity_reader() is activity_reader()


def model_state(value: Any) -> Any:
    """A read model as data: every attribute (additional properties included), with each value's type."""
    from msrest.serialization import Model

    if isinstance(value, Model):
        return type(value).__name__, {k: model_state(v) for k, v in sorted(vars(value).items())}
    if isinstance(value, dict):
        return "dict", [(k, model_state(v)) for k, v in value.items()]
    if isinstance(value, list):
        return "list", [model_state(v) for v in value]
    return type(value).__name__, repr(value), repr(getattr(value, "tzinfo", None))


def reader_cases() -> list[tuple[str, dict[str, Any]]]:
    """What Teams sends, and the values msrest must read its own way."""
    bodies, _ = fixture_bodies()
    cases: list[tuple[str, dict[str, Any]]] = [("Activity", b) for b in bodies]
    base = fixture("playground-invoke-adaptiveCard-action.json")
    odd = [
        {"id": 5, "text": 1.5, "locale": True},  # numbers and a bool where strings are mapped
        {"timestamp": "2026-12-02T14:15:26.4301234567+02:00", "localTimezone": None},
        {"timestamp": "not a date"},
        {"conversation": {"id": "c", "isGroup": "true", "tenantId": "t", "extra": [1, {"a": None}]}},
        {"conversation": {"id": "c", "isGroup": 1}},
        {"from": "a string where a model is mapped"},
        {"entities": [None, {"type": "mention", "mentioned": {"id": "u"}}, "text"]},
        {"entities": {"type": "mention"}},
        {"membersAdded": [{"id": "a"}, None], "attachments": [{"contentType": "x", "content": "plain"}]},
        {"channelData": [1, 2.5, None, {"b": [True]}], "value": "a string value"},
        {"attachmentLayout": "carousel", "importance": "high", "deliveryMode": "notification"},
        {"expiration": "2026-12-02T14:15:26Z", "textHighlights": [{"text": "x", "occurrence": 1}]},
    ]
    cases += [("Activity", {**base, **o}) for o in odd]
    cases += [
        ("ResourceResponse", {"id": "1796220926142"}),
        ("ResourceResponse", {"id": "1", "extra": "kept"}),
        ("ChannelAccount", {"id": "u", "name": "Alex", "aadObjectId": "a", "userPrincipalName": "x"}),
        ("ConversationReference", json.loads(json.dumps(fixture("playground-message-text.json")))),
    ]
    return cases


@pytest.mark.parametrize("case", range(len(reader_cases())))
def test_workaround_17_the_reader_s_plan_reads_msrest_s_models(case: int) -> None:
    """A plan per model class reads what msrest keeps as it is (strings, bools, numbers, JSON,
    nested objects); any other value goes to msrest's own reading. Every model is msrest's own,
    attribute for attribute and type for type, additional properties included, and a value msrest
    refuses is refused with msrest's error. No rule covers msrest's reading: this checks that what
    the bot reads from Teams and from the Bot Connector does not change."""
    from msrest.serialization import Deserializer

    from chat_approvals.bots.teams_deserializer import PlainDeserializer

    teams_compat.apply()
    name, body = reader_cases()[case]
    models = Activity._infer_class_models()

    def read(reader: Deserializer) -> Any:
        try:
            return model_state(reader(name, copy.deepcopy(body)))
        except Exception as e:  # msrest refuses some values: the same refusal
            return type(e).__name__, str(e)

    assert read(PlainDeserializer(models)) == read(Deserializer(models))


def test_workaround_17_the_kept_reader_and_the_pooled_clients_read_with_plans() -> None:
    """The activity reader and a pooled connector client's deserialiser (and its operation groups')
    are workaround 17's, with msrest's settings kept; an activity's plain values never reach
    msrest's per-value reading. No rule covers msrest's reading."""
    from chat_approvals.bots.teams_deserializer import PlainDeserializer, activity_reader, read_activity

    teams_compat.apply()
    assert isinstance(activity_reader(), PlainDeserializer)
    own, pooled = asyncio.run(own_and_pooled_clients())
    assert isinstance(pooled._deserialize, PlainDeserializer)
    assert pooled.conversations._deserialize is pooled._deserialize
    assert pooled._deserialize.key_extractors == own._deserialize.key_extractors
    read: list[str] = []
    real = activity_reader().deserialize_data

    def counting(data: Any, data_type: str) -> Any:
        read.append(data_type)
        return real(data, data_type)

    body = fixture("playground-invoke-adaptiveCard-action.json")
    body.pop("timestamp"), body.pop("localTimestamp")
    activity_reader().deserialize_data = counting  # type: ignore[method-assign]
    try:
        read_activity(body)
    finally:
        del activity_reader().deserialize_data
    assert read == []


SERVICE = "http://127.0.0.1:9/_connector"


async def test_workaround_8_every_turn_reuses_one_connector_and_one_user_token_client() -> None:
    """Issue 12: botbuilder builds both clients anew for each activity (the bug, shown first); here
    every inbound turn and every proactive one get the same pooled client per service URL."""
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    activity = Activity(type="message", channel_id="msteams", service_url=SERVICE)
    first, second = [await auth.authenticate_request(activity, "") for _ in range(2)]

    botbuilder_own = teams_compat.ConfigurationBotFrameworkAuthentication.create_connector_factory
    unpooled = [await botbuilder_own(auth, first.claims_identity).create(SERVICE, first.audience) for _ in range(2)]
    assert unpooled[0] is not unpooled[1]

    a = await first.connector_factory.create(SERVICE, first.audience)
    b = await second.connector_factory.create(SERVICE, second.audience)
    proactive = await auth.create_connector_factory(first.claims_identity).create(SERVICE, first.audience)
    elsewhere = await first.connector_factory.create("http://127.0.0.1:9/other", first.audience)
    assert a is b is proactive and elsewhere is not a
    tokens = [await auth.create_user_token_client(r.claims_identity) for r in (first, second)]
    assert tokens[0] is tokens[1]


async def test_workaround_8_the_pool_is_bounded_whatever_service_urls_arrive() -> None:
    """A caller that picks service URLs (a local client of the unauthenticated endpoint) cannot grow
    the pool: past POOL_SIZE the least recently used client is dropped."""
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    factory = auth.create_connector_factory(ClaimsIdentity({}, True))
    kept = await factory.create(f"{SERVICE}/0", None)
    dropped = await factory.create(f"{SERVICE}/1", None)
    for i in range(2, teams_compat.POOL_SIZE + 5):
        assert await factory.create(f"{SERVICE}/0", None) is kept  # used again: the most recent
        await factory.create(f"{SERVICE}/{i}", None)
    assert len(auth.clients) == teams_compat.POOL_SIZE
    assert await factory.create(f"{SERVICE}/0", None) is kept
    assert await factory.create(f"{SERVICE}/1", None) is not dropped


async def own_and_pooled_clients() -> tuple[Any, Any]:
    """For one turn: the connector client botbuilder's own factory makes, and the pooled one."""
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    activity = Activity(type="message", channel_id="msteams", service_url=SERVICE)
    turn = await auth.authenticate_request(activity, "")
    botbuilder_own = teams_compat.ConfigurationBotFrameworkAuthentication.create_connector_factory
    own = await botbuilder_own(auth, turn.claims_identity).create(SERVICE, turn.audience)
    pooled = await turn.connector_factory.create(SERVICE, turn.audience)
    return own, pooled


async def test_workaround_10_pooled_clients_send_the_same_bodies_without_msrest_checking_nothing() -> None:
    """msrest walks every attribute of an activity to check rules no botbuilder model declares; the
    pooled connector client skips that walk and serialises a reply exactly as botbuilder's own."""
    own, pooled = await own_and_pooled_clients()
    assert own._serialize.client_side_validation is True  # msrest's default: the walk
    assert pooled._serialize.client_side_validation is False
    incoming = fixture("playground-message-text.json")
    reply = TurnContext.apply_conversation_reference(
        Activity(type="message", text="Approved: café ☕", attachments=[{"contentType": "x", "content": {"a": [1]}}]),
        TurnContext.get_conversation_reference(Activity().deserialize(incoming)),
    )
    assert pooled._serialize.body(reply, "Activity") == own._serialize.body(reply, "Activity")


async def test_workaround_12_pooled_clients_serialise_only_set_attributes_into_the_same_bodies() -> None:
    """msrest visits every mapped attribute of a model (an Activity maps 60), raising and catching an
    error for each unset one; the pooled client's serialiser visits only the set ones (and nested
    models' set ones), and every body it makes is botbuilder's own, key for key and in order. No
    rule covers msrest's serialiser: this checks that what Teams receives does not change."""
    from chat_approvals.bots.teams_serializer import remembered_rest_keys

    own, pooled = await own_and_pooled_clients()
    assert pooled.conversations._serialize is pooled._serialize is pooled.attachments._serialize
    assert pooled._serialize.client_side_validation is False  # workaround 10 kept
    assert pooled._serialize.key_transformer is remembered_rest_keys  # and msrest's keys kept per key (below)
    incoming = Activity().deserialize(fixture("playground-invoke-adaptiveCard-action.json"))
    reference = TurnContext.get_conversation_reference(incoming)
    card = {"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "TextBlock", "text": "é ☕", "wrap": True}]}
    replies = [
        Activity(type="message", text="Approved: café ☕", input_hint="acceptingInput"),
        Activity(
            type="message",
            attachments=[{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
            summary="a card",
            entities=[{"type": "mention", "text": "<at>Alex</at>"}],
            channel_data={"notification": {"alert": True}},
        ),
        Activity(type="message", id="1796220926142", text="", value={"a": None}, attachments=[]),
        incoming,  # every kind of field Teams sends, additional properties included
    ]
    for reply in replies:
        sent = TurnContext.apply_conversation_reference(reply, reference) if reply is not incoming else reply
        body = pooled._serialize.body(sent, "Activity")
        assert body == own._serialize.body(sent, "Activity")
        assert list(body) == list(own._serialize.body(sent, "Activity"))  # the same order on the wire

    visited: list[str] = []
    msrest_transformer = pooled._serialize.key_transformer

    def counting(key: str, desc: dict[str, Any], value: Any) -> Any:
        visited.append(key)
        return msrest_transformer(key, desc, value)

    pooled._serialize.key_transformer = counting
    pooled._serialize.body(Activity(type="message", text="hi"), "Activity")
    assert sorted(visited) == ["text", "type"]


def test_workaround_12_the_serialiser_keeps_msrest_s_keys_per_attribute_key() -> None:
    """The pooled serialiser's key transformer gives msrest's `full_restapi_key_transformer` answer
    for every attribute of every botbuilder model (and for flattened and escaped keys), a new list
    each time; the pooled clients use it (the bodies above are botbuilder's own)."""
    import botbuilder.schema
    import botbuilder.schema.teams
    from msrest.serialization import Model, full_restapi_key_transformer

    from chat_approvals.bots.teams_serializer import PresentOnlySerializer, remembered_rest_keys

    assert PresentOnlySerializer().key_transformer is remembered_rest_keys
    descs = [{"key": "properties.b"}, {"key": "d\\.e"}, {"key": "a.b\\.c.d"}, {"key": ""}]
    for module in (botbuilder.schema, botbuilder.schema.teams):
        for model in vars(module).values():
            if isinstance(model, type) and issubclass(model, Model):
                descs += list(model._attribute_map.values())
    assert len(descs) > 500
    for desc in descs * 2:
        ours = remembered_rest_keys("x", dict(desc), 7)
        assert ours == full_restapi_key_transformer("x", dict(desc), 7)
        assert ours[0] is not remembered_rest_keys("x", dict(desc), 7)[0]


def serialiser_cases() -> list[Activity]:
    """Activities as botbuilder sends them, and the values msrest must serialise its own way."""
    import datetime

    from botbuilder.schema import ChannelAccount, ConversationAccount, Entity, InputHints
    from botbuilder.schema.teams import TeamsChannelAccount

    from chat_approvals.bots.teams_compat import SentBody
    from chat_approvals.cards import adaptive

    incoming = Activity().deserialize(fixture("playground-invoke-adaptiveCard-action.json"))
    reference = TurnContext.get_conversation_reference(incoming)
    card = adaptive.message_card("Answer recorded", "Resuming the agent's turn… café ☕")
    nested = {"a": [1, 2.5, True, None, {"b": "é", "c": []}], "d": None, "e": {"f": -3}}
    built = [
        text_activity("Approved: fetched."),
        card_activity(card, summary="Approval needed: data.example.org"),
        card_activity(card, activity_id="1796220926142"),
        Activity(type="message", text="x", entities=[Entity(type="mention"), Entity(type="clientInfo")]),
        Activity(type="message", attachments=[Attachment(content_type="x", content=nested)], value=nested),
        Activity(type="message", members_added=[ChannelAccount(id="a", properties={"k": 1}), None]),
        Activity(type="message", from_property=TeamsChannelAccount(id="u", email="a@b.c", user_principal_name="a")),
        Activity(type="message", conversation=ConversationAccount(id="c", is_group=True, tenant_id="t")),
    ]

    # what the plan hands to msrest: a date, a dict where a model is mapped, a dict subclass (msrest
    # writes it as its str), a key that is not a str, a str subclass, an int where a bool is mapped
    class Name(str):
        pass

    odd = [
        Activity(type="message", text="x", timestamp=datetime.datetime(2026, 12, 5, tzinfo=datetime.UTC)),
        Activity(type="message", entities=[{"type": "mention", "locale": "en-US"}]),
        Activity(type="message", attachments=[{"contentType": "x", "content": {"a": [1]}}]),
        Activity(type="message", channel_data=SentBody({"a": 1})),
        Activity(type="message", value={1: "one"}),
        Activity(type="message", text=Name("a name")),
        Activity(type="message", conversation=ConversationAccount(id="c", is_group=1)),
        Activity(type="message", input_hint=InputHints.expecting_input, attachments=[]),
    ]
    sent = [TurnContext.apply_conversation_reference(copy.copy(a), reference) for a in built + odd]
    return [*sent, *built, *odd, incoming]


@pytest.mark.parametrize("case", range(len(serialiser_cases())))
def test_workaround_16_the_serialiser_s_plan_makes_msrest_s_bodies(case: int) -> None:
    """A plan per model class copies what msrest copies (strings, botbuilder's str enums, nested
    models, JSON values); any other value goes to msrest's own path. Every body is msrest's own,
    key for key and in order, from `body()` (which first runs msrest's "just in case this is a
    dict" pass) and from `_serialize`. No rule covers msrest's serialiser: this checks that what
    Teams receives does not change."""
    from msrest.serialization import Serializer

    from chat_approvals.bots.teams_serializer import PresentOnlySerializer

    models = Activity._infer_class_models()
    ours = PresentOnlySerializer(models)
    ours.client_side_validation = False  # as the pooled clients' (workaround 10)
    msrest = Serializer(models)

    def made(serialise: Any) -> str:
        try:
            return json.dumps(serialise())
        except Exception as e:  # msrest refuses some values: the same refusal
            return type(e).__name__

    mine, theirs = serialiser_cases()[case], serialiser_cases()[case]
    assert made(lambda: ours.body(mine, "Activity")) == made(lambda: msrest.body(theirs, "Activity"))
    mine, theirs = serialiser_cases()[case], serialiser_cases()[case]
    assert made(lambda: ours._serialize(mine)) == made(lambda: msrest._serialize(theirs))


def test_workaround_16_a_reply_and_a_card_are_serialised_without_msrest_s_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain activities this front end sends (a reply, a card, its update, after botbuilder
    applied the conversation reference) never reach msrest's per-attribute walk; a date does. No
    rule covers msrest's serialiser."""
    from msrest.serialization import Serializer

    from chat_approvals.bots.teams_serializer import PresentOnlySerializer

    ours = PresentOnlySerializer(Activity._infer_class_models())
    ours.client_side_validation = False
    walked: list[str] = []
    real = Serializer.serialize_data

    def counting(self: Serializer, data: Any, data_type: str, **kwargs: Any) -> Any:
        walked.append(data_type)
        return real(self, data, data_type, **kwargs)

    monkeypatch.setattr(Serializer, "serialize_data", counting)
    plain, odd = serialiser_cases()[:3], serialiser_cases()[8]
    for activity in plain:
        ours.body(activity, "Activity")
    assert walked == []
    ours.body(odd, "Activity")
    assert "iso-8601" in walked


async def test_activities_built_here_are_copied_shallow_by_botbuilder_and_sent_as_message_factory_s() -> None:
    """botbuilder deep-copies each activity it sends; the ones this front end builds for one send
    (a text reply, a new card) are copied shallow (the card is not copied), and their bodies are
    exactly those of botbuilder's `MessageFactory.text` / `MessageFactory.attachment`. No rule
    covers botbuilder's copies: this checks that what Teams receives does not change."""
    auth = teams_compat.make_adapter(TeamsAuth()).bot_framework_authentication
    turn = await auth.authenticate_request(Activity(type="message", channel_id="msteams", service_url=SERVICE), "")
    pooled = await turn.connector_factory.create(SERVICE, turn.audience)
    reference = TurnContext.get_conversation_reference(
        Activity().deserialize(fixture("playground-invoke-adaptiveCard-action.json"))
    )
    card = {"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "TextBlock", "text": "x"}]}
    pairs = [
        (text_activity("Fetched: café ☕"), MessageFactory.text("Fetched: café ☕")),
        (
            card_activity(card),
            MessageFactory.attachment(Attachment(content_type="application/vnd.microsoft.card.adaptive", content=card)),
        ),
    ]
    for ours, botbuilders in pairs:
        sent = copy.deepcopy(ours)  # what TurnContext.send_activities does first
        assert sent is not ours and sent.attachments is ours.attachments  # shallow: the card is shared
        bodies = [
            pooled._serialize.body(TurnContext.apply_conversation_reference(a, reference), "Activity")
            for a in (sent, copy.deepcopy(botbuilders))
        ]
        assert bodies[0] == bodies[1] and list(bodies[0]) == list(bodies[1])
        assert ours.conversation is None  # the caller's activity is left as it was built


async def test_workaround_8_the_server_closes_its_pooled_clients_when_it_stops(tmp_path: Path) -> None:
    """The pooled connector client keeps its connection to the connector open between turns (that is
    the point of the pool); when the server stops it closes the client, so no connection outlives
    the app, and the pool is empty (a later turn would build a new client, not use a closed one)."""
    mock = MockConnector()
    connector = TestServer(mock.app(), host="127.0.0.1")
    await connector.start_server()
    try:
        async with Bot(tmp_path, ManualClock(), str(connector.make_url("/_connector"))) as bot:
            status, _ = await bot.say("help")
            assert status == 201 and mock.posts()  # the help card went through the pooled client
            pool = bot.app[TEAMS].adapter.bot_framework_authentication.clients
            assert len(pool) == 2  # the connector client and botbuilder's (unused) user-token client
            runner = connector.runner
            assert runner is not None and runner.server is not None
            assert runner.server.connections  # kept alive by the pooled client's session
        assert len(pool) == 0
        async with asyncio.timeout(5):  # the connector notices the close; bounded
            while runner.server.connections:
                await asyncio.sleep(0.01)
    finally:
        await connector.close()


@pytest.mark.parametrize(
    "channel_data",
    [
        {"tenant": {"id": "t-1"}},
        {"tenant": {"id": ""}},
        {"tenant": {}},
        {"tenant": None},
        {"source": {"name": "message"}},
        {},
        None,
    ],
    ids=["tenant", "empty-id", "no-id", "null-tenant", "no-tenant", "empty", "none"],
)
def test_tenant_and_personal_read_as_botbuilder_reads_them(channel_data: dict[str, Any] | None) -> None:
    """tenant_of and is_personal read the plain JSON (no msrest pass): what botbuilder's own
    deserialization reads from the same activity and the same stored reference."""
    from botbuilder.schema.teams import TeamsChannelData

    for conversation_type in ("personal", "groupChat", None):
        raw = fixture("playground-message-text.json")
        raw["channelData"] = channel_data
        raw["conversation"] = {**raw["conversation"], "conversationType": conversation_type}
        act = Activity().deserialize(raw)
        parsed = TeamsChannelData().deserialize(channel_data) if isinstance(channel_data, dict) else None
        from_msrest = str(parsed.tenant.id) if parsed and parsed.tenant is not None and parsed.tenant.id else None
        extra = act.conversation.additional_properties.get("tenantId")
        assert teams_compat.tenant_of(act) == (from_msrest or extra)
        loc = teams_compat.TeamsCardLocation.of(act, "1")
        conv = loc.conversation_reference().conversation
        assert loc.is_personal == (conv is not None and conv.conversation_type == "personal")
        assert loc.is_personal == (conversation_type == "personal")
