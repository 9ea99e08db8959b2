"""Operating it (docs/operating.md): /metrics across a full cycle and every refusal, /readyz,
JSON logs with nothing secret in them, the audit export. Real aiohttp servers over real HTTP;
the exposition is read with prometheus-client's own parser."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from chat_approvals.bots.cli import main, parse_time
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.logs import REDACTED, RedactingFormatter, RedactingJsonFormatter, Redactor
from chat_approvals.bots.server import build_app
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import Root, bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import AuditEvent, ClaimRead
from chat_approvals.core.observe.metrics import Metrics
from chat_approvals.core.observe.observed import Observed, observe
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.base import StoreError
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import TOKEN, Api
from tests.support.agents import Counter, scripted_factory

URL_TEXT = "please fetch https://data.example.org/table.csv"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def root(tmp_path: Path, clock: ManualClock, counter: Counter) -> Root[StoreIO]:
    metrics = Metrics(clock.now)
    store = StoreIO(
        observe(SqliteRows(tmp_path / "rows.db"), metrics),
        observe(FileObjects(tmp_path / "objects", clock=clock), metrics),
    )
    return bootstrap(store, settings=Settings(), clock=clock, agent_factory=scripted_factory(counter), metrics=metrics)


@pytest.fixture
def observed(root: Root[StoreIO]) -> Approvals:
    return root.approvals


@pytest.fixture
async def oapi(observed: Approvals, root: Root[StoreIO]) -> AsyncIterator[Api]:
    server = TestServer(build_app(observed, ServerConfig(api_token=TOKEN), sweep=False), host="127.0.0.1")
    await server.start_server()
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()
    root.close()


async def scrape(api: Api) -> str:
    async with api.session.get(f"{api.base}/metrics") as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
        return await r.text()


async def test_metrics_follow_a_full_cycle_and_every_refusal(
    oapi: Api, observed: Approvals, clock: ManualClock, root: Root[StoreIO]
) -> None:
    api = oapi
    code, body = await api.turn("chat-1", "alice", URL_TEXT)
    card = body["card"]
    m = await scrape(api)
    assert value(m, "chat_approvals_turns_total", platform="http", status="awaiting_approval") == 1
    assert value(m, "chat_approvals_cards_total", platform="http", kind="new") == 1
    assert value(m, "chat_approvals_open_cards") == 1
    # the pointer write ends the turn (issue 12): one end_turn, no put_pointer
    assert value(m, "chat_approvals_store_seconds_count", backend="sqlite", op="end_turn") == 1
    assert value(m, "chat_approvals_store_seconds_count", backend="files", op="put") == 1

    # each refusal kind, as the front end and the resume service decide it (R9, R15)
    assert (await api.resume_raw(card["card_id"], {"user": "alice"}))[0] == 422
    assert (await api.resume(card["card_id"], "alice", "wrong-secret"))[0] == 404
    assert (await api.resume("not-a-card-id", "alice", card["secret"]))[0] == 404
    assert (await api.resume(card["card_id"], "bob", card["secret"]))[0] == 403
    async with api.session.post(f"{api.base}/v1/interrupts/{card['card_id']}/resume", json={}) as r:
        assert r.status == 401
    m = await scrape(api)
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="invalid") == 1
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="unknown") == 2
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="forbidden") == 1
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="unauthorized") == 1
    assert value(m, "chat_approvals_claims_total", result="won") == 0
    assert value(m, "chat_approvals_open_cards") == 1  # refusals change nothing

    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed"
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert body["outcome"] == "replayed"
    m = await scrape(api)
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="resumed") == 1
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="replayed") == 1
    assert value(m, "chat_approvals_claims_total", result="won") == 1
    assert value(m, "chat_approvals_open_cards") == 0
    assert value(m, "chat_approvals_resume_seconds_count") == 4  # every click that reached the resume service
    assert value(m, "chat_approvals_ack_seconds_count", platform="http") == 7  # every resume request

    # in progress: another worker holds a live claim (R10); expired: past the card's expiry
    _, body = await api.turn("chat-2", "alice", URL_TEXT)
    busy = body["card"]
    p = root.store.rows.get_pointer("chat-2")
    assert p is not None
    now = clock.now()
    read = ClaimRead("chat-2", p.card_id, p.secret_hash, 0)
    rows = root.store.rows
    assert rows.claim(read, worker="other", now=now, lease_until=now + 30, resume_deadline=now + 900)
    assert rows.claim(read, worker="third", now=now, lease_until=now + 30, resume_deadline=now + 900) is None
    assert (await api.resume(busy["card_id"], "alice", busy["secret"]))[1]["outcome"] == "in_progress"
    _, body = await api.turn("chat-3", "alice", URL_TEXT)
    late = body["card"]
    clock.advance(Settings().card_expiry + 1)
    assert (await api.resume(late["card_id"], "alice", late["secret"]))[1]["outcome"] == "expired"
    m = await scrape(api)
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="in_progress") == 1
    assert value(m, "chat_approvals_resumes_total", platform="http", outcome="expired") == 1
    assert value(m, "chat_approvals_claims_total", result="won") == 2
    assert value(m, "chat_approvals_claims_total", result="lost") == 1
    assert value(m, "chat_approvals_open_cards") == 0  # chat-3 expired; chat-2's card is past its expiry too
    # labels are bounded: no user, chat, card id or secret anywhere in the exposition
    for private in ("alice", "bob", "chat-1", "chat-2", card["card_id"], card["secret"], TOKEN):
        assert private not in m


async def test_store_faults_are_counted_by_backend_and_op(oapi: Api, root: Root[StoreIO]) -> None:
    rows = root.store.rows
    assert isinstance(rows, Observed)

    def broken(card_id: str) -> None:
        raise StoreError("disk on fire")

    rows.inner.get_pointer_by_card = broken  # type: ignore[method-assign]
    _, body = await oapi.turn("chat-1", "alice", URL_TEXT)
    code, _ = await oapi.resume(body["card"]["card_id"], "alice", body["card"]["secret"])
    assert code == 503
    m = await scrape(oapi)
    assert value(m, "chat_approvals_store_faults_total", backend="sqlite", op="get_pointer_by_card") == 1


async def test_gate_decisions_are_counted(observed: Approvals) -> None:
    gate = Gate(GateConfig(allow=["ok.example.org"], unix=False))
    build_app(observed, ServerConfig(api_token=TOKEN), sweep=False, gate=gate)  # wires the counter
    run = gate.open_run(user="alice", chat="chat-1", turn_id="t1", backend=observed.gate_backend)
    assert await gate.decide(run, "site", "ok.example.org", 443, None) is None
    assert await gate.decide(run, "site", "other.example.org", 443, None) is not None
    assert await gate.decide(run, "site", "third.example.org", 443, None) is not None
    m = observed.metrics.exposition()[0].decode()
    assert value(m, "chat_approvals_gate_connections_total", decision="allowed") == 1
    assert value(m, "chat_approvals_gate_connections_total", decision="refused") == 2


async def test_no_metrics_turns_the_endpoint_off(observed: Approvals, root: Root[StoreIO]) -> None:
    server = TestServer(build_app(observed, ServerConfig(metrics=False), sweep=False), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as s, s.get(str(server.make_url("/metrics"))) as r:
            assert r.status == 404
    finally:
        await server.close()
        root.close()


def test_two_servers_in_one_process_keep_their_own_metrics(tmp_path: Path, clock: ManualClock) -> None:
    a, b = Metrics(clock.now), Metrics(clock.now)
    a.turns.labels("http", "answered").inc()
    assert value(a.exposition()[0].decode(), "chat_approvals_turns_total", platform="http", status="answered") == 1
    assert value(b.exposition()[0].decode(), "chat_approvals_turns_total", platform="http", status="answered") == 0


# --- /readyz -------------------------------------------------------------------------------


async def test_readyz_is_503_with_the_reason_when_the_store_fails_and_200_when_it_answers(
    oapi: Api, root: Root[StoreIO]
) -> None:
    async with oapi.session.get(f"{oapi.base}/readyz") as r:
        assert r.status == 200 and (await r.json()) == {"ready": True}
    rows = root.store.rows
    assert isinstance(rows, Observed)
    real = rows.inner.get_pointer

    def broken(chat: str) -> None:
        raise StoreError("no route to the store")

    rows.inner.get_pointer = broken  # type: ignore[method-assign]
    async with oapi.session.get(f"{oapi.base}/readyz") as r:
        body = await r.json()
        assert r.status == 503 and body["ready"] is False and "no route to the store" in body["reason"]
    async with oapi.session.get(f"{oapi.base}/healthz") as r:
        assert r.status == 200  # liveness does not look at the store
    rows.inner.get_pointer = real  # type: ignore[method-assign]
    async with oapi.session.get(f"{oapi.base}/readyz") as r:
        assert r.status == 200


async def test_readyz_is_503_when_the_gate_stops_listening(observed: Approvals, root: Root[StoreIO]) -> None:
    gate = Gate(GateConfig(unix=False))
    server = TestServer(build_app(observed, ServerConfig(), sweep=False, gate=gate), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(str(server.make_url("/readyz"))) as r:
                assert r.status == 200
            await gate.close()
            async with s.get(str(server.make_url("/readyz"))) as r:
                body = await r.json()
                assert r.status == 503 and "gate" in body["reason"]
    finally:
        await server.close()
        root.close()


# --- logs -----------------------------------------------------------------------------------


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    rec = logging.LogRecord("chat_approvals.x", logging.WARNING, __file__, 1, msg, args, None)
    rec.__dict__.update(extra)
    return rec


def test_redaction_removes_bearer_tokens_slack_tokens_card_secrets_and_configured_secrets() -> None:
    secret = "Zq3xN0p8Jr2bL5mW7yT1vK4cH9dF6gS0aE2uI8oP3nM"  # shaped like a card secret (43)
    redact = Redactor(["my-api-token-123", "whsec-abcdefgh"])
    line = f"Authorization: Bearer abc.def.ghi token my-api-token-123 xoxb-1-2-abc sig whsec-abcdefgh secret={secret}"
    out = redact(line)
    for s in ("abc.def.ghi", "my-api-token-123", "xoxb-1-2-abc", "whsec-abcdefgh", secret):
        assert s not in out
    assert out.count(REDACTED) == 5 and "Bearer " + REDACTED in out
    # what must stay: card ids (24 characters) and hashes (64 hex) are not secrets
    assert redact("card c_abcdefghijklmnopqrstuv hash " + "a" * 64) == "card c_abcdefghijklmnopqrstuv hash " + "a" * 64


def test_json_log_lines_parse_and_carry_the_known_fields_and_no_secret() -> None:
    fmt = RedactingJsonFormatter(Redactor(["tok-secret-1"]))
    line = fmt.format(
        _record("resume %s for Bearer tok-secret-1", "resumed", chat="http:c", card_id="c_1", outcome="resumed")
    )
    doc = json.loads(line)
    assert {"time", "level", "logger", "message"} <= doc.keys()
    assert doc["level"] == "WARNING" and doc["logger"] == "chat_approvals.x"
    assert (doc["chat"], doc["card_id"], doc["outcome"]) == ("http:c", "c_1", "resumed")
    assert "tok-secret-1" not in line and "platform" not in doc  # unknown fields are left out, not null
    plain = RedactingFormatter(Redactor(["tok-secret-1"])).format(_record("token tok-secret-1"))
    assert "tok-secret-1" not in plain and REDACTED in plain


def test_log_format_must_be_text_or_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "x", "--store", f"sqlite:///{tmp_path}/r.db", "--log-format", "json"]) == 0
    with pytest.raises(SystemExit):
        main(["audit", "x", "--log-format", "xml"])


# --- audit export ---------------------------------------------------------------------------


def test_audit_all_since_exports_every_chat_as_jsonl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "rows.db"
    rows = SqliteRows(db)
    events = [
        AuditEvent(chat="http:a", at=1_000.0, kind="turn", actor="U1"),
        AuditEvent(chat="http:b", at=2_000.0, kind="card_created", actor="U2", card_id="c_1", detail={"sites": ["x"]}),
        AuditEvent(chat="http:a", at=3_000.0, kind="answered", actor="U1", card_id="c_1", detail={"approved": True}),
    ]
    for e in events:
        rows.append_audit(e, 10_000.0)
    rows.close()
    store = ["--store", f"sqlite:///{db}", "--objects", str(tmp_path / "objects")]
    assert main(["audit", "--all", "--since", "1970-01-01T00:30:00Z", "--format", "jsonl", *store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [AuditEvent.model_validate_json(line) for line in lines] == events[1:]
    assert main(["audit", "--all", "--format", "jsonl", *store]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert main(["audit", "--all", "--since", "yesterday", *store]) == 2  # a clear error, nothing printed
    assert main(["audit", *store]) == 2  # neither a chat nor --all
    assert parse_time("1800000000") == 1_800_000_000.0 and parse_time("2027-01-15") == parse_time("2027-01-15T00:00Z")


# --- the Grafana dashboard ---------------------------------------------------------------------


def test_grafana_dashboard_imports_and_names_only_metrics_the_server_exposes() -> None:
    import re

    doc = json.loads((Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json").read_text())
    assert doc["__inputs"][0]["pluginId"] == "prometheus" and doc["panels"]
    m = Metrics()
    m.resume_seconds.observe(1)  # histograms and labelled series show once observed
    m.ack_seconds.labels("http").observe(1)
    m.store_seconds.labels("sqlite", "claim").observe(1)
    m.store_faults.labels("sqlite", "claim").inc()
    m.turns.labels("http", "answered").inc()
    m.cards.labels("http", "new").inc()
    m.resumes.labels("http", "resumed").inc()
    exposed = {name for name, _ in samples(m.exposition()[0].decode())}
    used = {n for p in doc["panels"] for t in p["targets"] for n in re.findall(r"chat_approvals_\w+", t["expr"])}
    assert used and used <= exposed, used - exposed


# --- the audit webhook, in process ---------------------------------------------------------------


def test_signature_is_hmac_sha256_of_the_exact_body_and_backoff_is_bounded() -> None:
    import hashlib
    import hmac

    from chat_approvals.bots.webhooks import Backoff, sign, verify

    body = b'{"id":"1","kind":"turn"}'
    assert sign("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()
    assert verify("k", body, sign("k", body))
    assert not verify("k", body + b" ", sign("k", body)) and not verify("other", body, sign("k", body))
    b = Backoff(first=0.5, cap=4.0)
    assert all(0.1 <= b.delay(n) <= 4.0 for n in range(1, 50))
    assert max(b.delay(1) for _ in range(200)) <= 0.5


async def test_a_hanging_webhook_receiver_never_holds_up_a_click(
    tmp_path: Path, clock: ManualClock, counter: Counter
) -> None:
    from aiohttp import web

    from chat_approvals.bots.server import open_root, serve_app

    release = asyncio.Event()
    arrived = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        arrived.set()
        await release.wait()  # the receiver answers only once the test says so
        return web.Response(status=204)

    receiver = web.Application()
    receiver.router.add_post("/hook", hang)
    rserver = TestServer(receiver, host="127.0.0.1")
    await rserver.start_server()
    cfg = ServerConfig(
        api_token=TOKEN,
        store=f"sqlite:///{tmp_path}/rows.db",
        objects=str(tmp_path / "objects"),
        audit_webhook=[str(rserver.make_url("/hook"))] * 2,  # named twice: one sink
        audit_webhook_secret="whsec-0123456789",
        audit_webhook_poll=0.05,
    )
    opened = open_root(cfg, clock=clock, factory=scripted_factory(counter))
    server = TestServer(serve_app(opened, cfg, sweep=False), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, str(server.make_url("")).rstrip("/"))

            async def cycle() -> str:
                _, body = await api.turn("chat-1", "alice", URL_TEXT)
                await asyncio.wait_for(arrived.wait(), 30)  # a delivery is now stuck in the receiver
                card = body["card"]
                return str((await api.resume(card["card_id"], "alice", card["secret"]))[1]["outcome"])

            assert await asyncio.wait_for(cycle(), 30) == "resumed"  # bounded: a blocked click fails here
            assert not release.is_set()
    finally:
        release.set()
        await server.close()
        await rserver.close()
        opened.close()


# --- click to acknowledgement on Slack ---------------------------------------------------------


async def test_slack_click_is_timed_to_its_acknowledgement() -> None:
    import json as _json

    from tests.support.slack_rig import SlackRig, buttons

    rig = await SlackRig().start()
    try:
        status, _ = await rig.dm("download <https://example.org/data.csv>")
        assert status == 200
        await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
        await rig.settle()
        card = rig.card_calls()[-1]
        assert _json.loads(buttons(card.args["blocks"])[0]["value"])["card"]
        assert (await rig.click(rig.click_payload(card)))[0] == 200
        await rig.settle()
        m = rig.approvals.metrics.exposition()[0].decode()
        assert value(m, "chat_approvals_ack_seconds_count", platform="slack") == 1  # the click, not the DM
        assert value(m, "chat_approvals_turns_total", platform="slack", status="awaiting_approval") == 1
        assert value(m, "chat_approvals_resumes_total", platform="slack", outcome="resumed") == 1
    finally:
        await rig.stop()
