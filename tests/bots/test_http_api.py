"""The HTTP front end, over real HTTP to the running aiohttp server, rule by rule where visible."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp

from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.conftest import Api, serve
from tests.support.agents import Counter

URL_TEXT = "please fetch https://data.example.org/table.csv"


async def _card(api: Api, chat: str = "chat-1", user: str = "alice", text: str = URL_TEXT) -> dict:
    code, body = await api.turn(chat, user, text)
    assert code == 200 and body["status"] == "awaiting_approval", body
    return body["card"]


async def test_r1_resume_continues_the_paused_run_without_resending_to_the_model(
    api: Api, counter: Counter, approvals: Approvals
) -> None:
    approvals.resumes.paused.size = 0  # resumed from the stored snapshot, as another process would
    card = await _card(api)
    assert counter.calls() == 1
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed"
    assert body["result"] == {
        "status": "answered",
        "text": "Approved: I may now fetch https://data.example.org/table.csv.",
    }
    # One call before the pause, one after: the same as a turn with no approval. A re-run would be 3.
    assert counter.calls() == 2
    second = counter.models[-1]
    assert second.calls == 1


async def test_r8_card_carries_server_minted_ids_never_the_sdk_interrupt_id(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    pointer = store.rows.get_pointer("chat-1")
    assert pointer is not None
    assert card["card_id"] == pointer.card_id and card["card_id"].startswith("c_")
    assert pointer.sdk_interrupt_id.startswith("v1:tool_call:")
    assert pointer.sdk_interrupt_id not in json.dumps(card)
    assert len(card["secret"]) >= 43  # 256 bits, url-safe base64
    assert pointer.secret_hash != card["secret"] and card["secret"] not in pointer.model_dump_json()
    assert pointer.owner == "alice" and pointer.state == "pending" and pointer.claim_count == 0
    assert pointer.expires_at == card["expires_at"] and pointer.ttl > pointer.expires_at
    assert pointer.snapshot.size > 0 and len(pointer.snapshot.sha256) == 64


async def test_r9_unknown_id_and_wrong_secret_look_the_same_and_change_nothing(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    before = store.rows.get_pointer("chat-1")
    code1, body1 = await api.resume("c_doesnotexist", "alice", card["secret"])
    code2, body2 = await api.resume(card["card_id"], "alice", "wrong-secret")
    assert (code1, body1) == (code2, body2) == (404, {"outcome": "unknown", "message": body1["message"]})
    assert store.rows.get_pointer("chat-1") == before


async def test_r9_only_the_owner_may_answer(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    before = store.rows.get_pointer("chat-1")
    code, body = await api.resume(card["card_id"], "mallory", card["secret"])
    assert code == 403 and body["outcome"] == "forbidden" and body["owner"] == "alice"
    assert store.rows.get_pointer("chat-1") == before
    assert store.rows.list_grants("alice", "chat-1", 0) == []


async def test_r9_past_expiry_is_marked_expired_and_refused(api: Api, store: StoreIO, clock: ManualClock) -> None:
    card = await _card(api)
    clock.advance(30 * 60 + 1)
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 410 and body["outcome"] == "expired"
    pointer = store.rows.get_pointer("chat-1")
    assert pointer is not None and pointer.state == "expired"
    assert store.rows.list_grants("alice", "chat-1", clock.now()) == []
    # The chat is free again: a new turn gets a new card.
    code, fresh = await api.turn("chat-1", "alice", URL_TEXT)
    assert fresh["status"] == "awaiting_approval" and fresh["card"]["card_id"] != card["card_id"]


async def test_r12_done_replays_the_stored_result_byte_for_byte(api: Api, counter: Counter) -> None:
    card = await _card(api)
    body = {
        "user": "alice",
        "secret": card["secret"],
        "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}],
    }
    code1, first = await api.resume_raw(card["card_id"], body)
    calls = counter.calls()
    code2, second = await api.resume_raw(card["card_id"], body)
    assert (code1, code2) == (200, 200)
    assert json.loads(first)["outcome"] == "resumed" and json.loads(second)["outcome"] == "replayed"
    result1 = first[first.index('"result":') :]
    result2 = second[second.index('"result":') :]
    assert result1 == result2
    assert counter.calls() == calls  # the replay ran nothing


async def test_r13_chained_card_replaces_the_open_request_in_place(api: Api, store: StoreIO) -> None:
    card = await _card(api, text="download https://a.example/x then https://b.example/y")
    assert card["sites"] == ["a.example"]
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["result"]["status"] == "awaiting_approval"
    chained = body["result"]["card"]
    assert chained["sites"] == ["b.example"] and chained["card_id"] != card["card_id"]
    assert chained["secret"] != card["secret"]
    pointer = store.rows.get_pointer("chat-1")
    assert pointer is not None and pointer.card_id == chained["card_id"]
    assert pointer.state == "pending" and pointer.claim_count == 0
    # The old card replays its own answer, which re-offers the still-open chained card with a new
    # secret (R19: its secret was never stored); the new one resumes the same turn to the end.
    code, old = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and old["outcome"] == "replayed"
    again = old["result"]["card"]
    assert again["card_id"] == chained["card_id"] and again["secret"] != chained["secret"]
    code, stale = await api.resume(chained["card_id"], "alice", chained["secret"], approved=False)
    assert (code, stale["outcome"]) == (404, "unknown")  # the rotated-out secret stops working
    code, done = await api.resume(chained["card_id"], "alice", again["secret"], approved=False)
    assert done["outcome"] == "resumed"
    text = done["result"]["text"]
    assert "I may now fetch https://a.example/x" in text and "Not downloaded: you denied https://b.example/y." in text


async def test_r14_approve_writes_grants_for_this_chat_only_and_they_can_be_revoked(
    api: Api, store: StoreIO, clock: ManualClock
) -> None:
    card = await _card(api)
    await api.resume(card["card_id"], "alice", card["secret"])
    code, body = await api.get("/v1/chats/chat-1/grants?user=alice")
    assert code == 200
    assert [(g["kind"], g["name"], g["card_id"]) for g in body["grants"]] == [
        ("site", "data.example.org", card["card_id"])
    ]
    assert (await api.get("/v1/chats/chat-2/grants?user=alice"))[1] == {"grants": []}
    assert (await api.get("/v1/chats/chat-1/grants?user=bob"))[1] == {"grants": []}
    # A later turn in the same chat does not ask again for the approved host.
    code, again = await api.turn("chat-1", "alice", URL_TEXT)
    assert again["status"] == "answered" and "Already approved" not in again["text"]
    code, revoked = await api.delete("/v1/chats/chat-1/grants/data.example.org?user=alice")
    assert code == 200 and [g["name"] for g in revoked["revoked"]] == ["data.example.org"]
    assert (await api.get("/v1/chats/chat-1/grants?user=alice"))[1] == {"grants": []}
    code, missing = await api.delete("/v1/chats/chat-1/grants/data.example.org?user=alice")
    assert code == 404 and missing == {"revoked": []}


async def test_r14_grants_expire_after_their_ttl(api: Api, clock: ManualClock) -> None:
    card = await _card(api)
    await api.resume(card["card_id"], "alice", card["secret"])
    clock.advance(8 * 3600 + 1)
    assert (await api.get("/v1/chats/chat-1/grants?user=alice"))[1] == {"grants": []}


async def test_r14_deny_removes_stored_rows_for_what_it_names(api: Api, store: StoreIO, clock: ManualClock) -> None:
    from chat_approvals.core.models import Grant

    card = await _card(api)
    # A row for the card's host written meanwhile (e.g. by another replica's earlier approval).
    row = Grant(
        user="alice",
        chat="chat-1",
        kind="site",
        name="data.example.org",
        card_id="c_earlier",
        created_at=clock.now(),
        expires_at=clock.now() + 600,
    )
    store.rows.put_grant(row, clock.now() + 1200)
    _code, body = await api.resume(card["card_id"], "alice", card["secret"], approved=False)
    assert body["outcome"] == "resumed" and body["answer"] == {"approved": False}
    assert store.rows.list_grants("alice", "chat-1", clock.now()) == []


async def test_r15_a_cancelled_answer_is_a_deny(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    entry = {"interruptId": card["card_id"], "status": "cancelled"}
    # A cancelled answer carries no payload: one that does is not well-formed, and changes nothing.
    code, text = await api.resume_raw(
        card["card_id"], {"user": "alice", "secret": card["secret"], "responses": [{**entry, "payload": {}}]}
    )
    assert code == 422 and json.loads(text)["outcome"] == "invalid"
    code, text = await api.resume_raw(
        card["card_id"], {"user": "alice", "secret": card["secret"], "responses": [entry]}
    )
    body = json.loads(text)
    assert code == 200 and body["answer"] == {"approved": False}
    assert body["result"]["text"] == "Not downloaded: you denied https://data.example.org/table.csv."
    assert store.rows.list_grants("alice", "chat-1", 0) == []


async def test_r15_anything_but_exactly_one_entry_is_invalid_and_changes_nothing(api: Api, store: StoreIO) -> None:
    card = await _card(api)
    before = store.rows.get_pointer("chat-1")
    entry = {"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}
    bodies = [
        {"user": "alice", "secret": card["secret"], "responses": []},
        {"user": "alice", "secret": card["secret"], "responses": [entry, entry]},
        {"user": "alice", "secret": card["secret"], "responses": [{**entry, "interruptId": "c_other"}]},
        {"user": "alice", "secret": card["secret"], "responses": [{**entry, "extra": 1}]},
        {"user": "alice", "responses": [entry]},
        {"user": "alice", "secret": card["secret"], "responses": "yes"},
        "approve",
    ]
    for body in bodies:
        code, text = await api.resume_raw(card["card_id"], body)
        assert code == 422 and json.loads(text)["outcome"] == "invalid", (body, text)
    async with api.session.post(
        f"{api.base}/v1/interrupts/{card['card_id']}/resume", data=b"{not json", headers=api.headers
    ) as r:
        assert r.status == 422
    code, body = await api.resume(card["card_id"], "alice", card["secret"], packages=["not-on-card"])
    assert code == 422 and body["outcome"] == "invalid"
    assert store.rows.get_pointer("chat-1") == before


async def test_r6_unattended_turn_gets_a_deterministic_deny_and_no_card(api: Api, store: StoreIO) -> None:
    code, first = await api.turn("chat-u", "alice", URL_TEXT, unattended=True)
    _code, second = await api.turn("chat-u", "alice", URL_TEXT, unattended=True)
    assert first["status"] == second["status"] == "answered"
    assert first["text"] == second["text"]
    assert "nobody can answer" in first["text"] and "Continue without that data and say so" in first["text"]
    assert "data.example.org" in first["text"]
    assert store.rows.get_pointer("chat-u") is None


async def test_one_turn_per_chat_an_open_request_answers_waiting_to_anyone_but_its_owner(
    api: Api, counter: Counter
) -> None:
    await _card(api)
    calls = counter.calls()
    code, body = await api.turn("chat-1", "bob", "and another thing")
    assert code == 200 and body["status"] == "waiting" and "Waiting for your approval" in body["text"]
    assert "card" not in body
    assert counter.calls() == calls  # no second run started


async def test_turn_input_is_validated(api: Api) -> None:
    for body in [
        {"chat": "c", "user": "u"},
        {"chat": "c", "user": "u", "text": ""},
        {"chat": 1, "user": "u", "text": "x"},
    ]:
        async with api.session.post(f"{api.base}/v1/turns", json=body, headers=api.headers) as r:
            assert r.status == 422 and (await r.json())["status"] == "invalid"


async def test_bearer_token_is_required(api: Api) -> None:
    for headers in [{}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic dGVzdA=="}]:
        async with api.session.post(f"{api.base}/v1/turns", json={}, headers=headers) as r:
            assert r.status == 401 and (await r.json())["outcome"] == "unauthorized"


async def test_http_front_end_is_off_without_tokens(approvals: Approvals) -> None:
    from aiohttp.test_utils import TestServer

    from chat_approvals.bots.config import ServerConfig
    from chat_approvals.bots.server import build_app

    server = TestServer(build_app(approvals, ServerConfig(api_token=""), sweep=False), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(server.make_url("/v1/turns"), json={}) as r:
                assert r.status in (401, 404)
            async with s.get(server.make_url("/healthz")) as r:
                assert (await r.json())["http_api"] is False
    finally:
        await server.close()


async def test_audit_trail_records_who_did_what(api: Api) -> None:
    card = await _card(api)
    await api.resume(card["card_id"], "mallory", card["secret"])
    await api.resume(card["card_id"], "alice", card["secret"])
    await api.resume(card["card_id"], "alice", card["secret"])
    _code, body = await api.get("/v1/chats/chat-1/audit")
    kinds = [(e["kind"], e["actor"]) for e in body["events"]]
    assert kinds == [
        ("card_created", "alice"),
        ("claim_won", "alice"),
        ("grant", "alice"),
        ("answered", "alice"),
        ("replayed", "alice"),
    ]


async def test_restarting_the_server_between_card_and_click_loses_nothing(
    store_paths: tuple[Path, Path], clock: ManualClock, counter: Counter
) -> None:
    """Two servers, one after the other, each with its own store connections and agents."""
    from chat_approvals.store.file_objects import FileObjects
    from chat_approvals.store.sqlite_rows import SqliteRows
    from tests.conftest import make_approvals
    from tests.support.agents import scripted_factory

    db, objects = store_paths

    async def one_server(work):
        io = StoreIO(SqliteRows(db), FileObjects(objects, clock=clock))
        server = await serve(make_approvals(io, clock, scripted_factory(counter)))
        try:
            async with aiohttp.ClientSession() as s:
                return await work(Api(s, str(server.make_url("")).rstrip("/")))
        finally:
            await server.close()
            io.close()

    card = await one_server(_card)
    code, body = await one_server(lambda api: api.resume(card["card_id"], "alice", card["secret"]))
    assert code == 200 and body["outcome"] == "resumed"
    assert body["result"]["text"] == "Approved: I may now fetch https://data.example.org/table.csv."
