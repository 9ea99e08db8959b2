"""R20 at the HTTP front end, over real HTTP to the running server: text that is not a sequence of
Unicode scalar values (a lone surrogate is valid JSON and decodes in Python, but SQLite, hashing and
JSON encoding refuse it) is refused with a 422 before anything is claimed or written, and the
audit trail stays readable (issue 27, finding 1)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.models import Answer, Strict
from chat_approvals.core.text import InvalidText, check_text, first_invalid
from tests.conftest import Api
from tests.support.raw_http import raw_request

URL_TEXT = "please fetch https://data.example.org/table.csv"
SURROGATE = "\ud800"


async def _card(api: Api, chat: str = "chat-1", user: str = "alice") -> dict[str, Any]:
    code, body = await api.turn(chat, user, URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval", body
    card: dict[str, Any] = body["card"]
    return card


async def _kinds(api: Api, chat: str) -> list[str]:
    code, body = await api.get(f"/v1/chats/{chat}/audit")
    assert code == 200, body
    return [e["kind"] for e in body["events"]]


async def test_the_owners_deny_with_a_lone_surrogate_is_refused_before_the_claim(api: Api) -> None:
    card = await _card(api)
    code, body = await api.resume(card["card_id"], "alice", card["secret"], approved=False, reason=f"no {SURROGATE}")
    assert code == 422 and body["outcome"] == "invalid", body
    assert "claim_won" not in await _kinds(api, "chat-1")  # nothing claimed, nothing written
    # The card is still answerable, once: an approval resumes it, a second click replays.
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed", body
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert body["outcome"] == "replayed", body
    kinds = await _kinds(api, "chat-1")
    assert kinds.count("claim_won") == 1 and kinds.count("answered") == 1, kinds


@pytest.mark.parametrize(
    "field, value",
    [("chat", f"c{SURROGATE}"), ("user", f"al{SURROGATE}ice"), ("text", f"save a note: x{SURROGATE}y")],
)
async def test_a_turn_with_a_lone_surrogate_is_refused(api: Api, field: str, value: str) -> None:
    body = {"chat": "chat-2", "user": "alice", "text": URL_TEXT, field: value}
    code, answer = await api.turn(**body)
    assert code == 422 and answer["outcome"] == "invalid", answer
    assert "Unicode" in answer["message"], answer
    assert await _kinds(api, "chat-2") == []


async def test_a_resume_whose_secret_holds_a_lone_surrogate_is_refused(api: Api) -> None:
    card = await _card(api, chat="chat-3")
    code, body = await api.resume(card["card_id"], "alice", f"x{SURROGATE}")
    assert code == 422 and body["outcome"] == "invalid", body
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed", body


async def test_the_query_and_path_refuse_text_that_is_not_utf8(api: Api) -> None:
    auth = {b"Authorization": api.headers["Authorization"].encode()}
    for target in (b"/v1/chats/chat-4/grants?user=al%ED%A0%80ice", b"/v1/chats/chat-4/grants?user=al%FFice"):
        status, _ = await raw_request(api.base, "GET", target, headers=auth)
        assert status == 422, target
    status, _ = await raw_request(api.base, "GET", b"/v1/chats/c%ED%A0%80/audit", headers=auth)
    assert status == 422


def test_the_models_refuse_lone_surrogates_by_construction() -> None:
    with pytest.raises(ValueError):
        Answer(approved=False, reason=f"no {SURROGATE}")
    with pytest.raises(InvalidText):
        check_text(f"a{SURROGATE}", "reason")
    assert first_invalid({"a": [1, {"b": f"x{SURROGATE}"}]}) == "a[1].b"
    assert first_invalid({f"k{SURROGATE}": 1}) == "a key"
    assert first_invalid({"a": ["ok", "é", "\U0001f600"]}) is None
    assert issubclass(Answer, Strict)
    json.dumps(Answer(approved=False, reason="fine").model_dump())


async def test_an_audit_row_an_older_version_stored_with_a_lone_surrogate_stays_readable(
    api: Api, store_paths: tuple[Path, Path]
) -> None:
    """The issue's store, written before this fix: GET audit (and the CLI's audit) failed for the
    whole chat with "Error serializing to JSON"."""
    db, _ = store_paths
    await _card(api, chat="chat-old")
    with sqlite3.connect(db) as conn:  # what the old code wrote: json.dumps escapes the surrogate
        conn.execute(
            "INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl) VALUES (?,?,?,?,?,?,?)",
            ("chat-old", 1.0, "answered", "alice", None, json.dumps({"reason": f"no {SURROGATE}"}), 9e12),
        )
    code, body = await api.get("/v1/chats/chat-old/audit")
    assert code == 200, body
    assert {"reason": "no \ufffd"} in [e["detail"] for e in body["events"]]
