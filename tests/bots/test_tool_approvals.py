"""Issue 14 through the HTTP front end (real HTTP to the running aiohttp server): a gated tool
pauses BEFORE it runs and becomes a `tool` card; approve once / for this chat / deny (with a
reason); tool grants listed and revoked; unattended deny; a user's own interrupt becomes a
`question` card; several interrupts in one step are one batch card; a chained second call."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.factory import AgentFactory, default_factory, gated_factory, prepare
from chat_approvals.core.agent.tool_gate import fingerprint
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.conftest import Api, make_approvals, serve
from tests.support import agents
from tests.support.agents import chat_notes

CHAT = "notes-chat"
USER = "alice"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "notes"
    monkeypatch.setenv(agents.NOTES_ENV, str(root))
    return root


def lines(root: Path, chat: str = CHAT) -> list[str]:
    return chat_notes(root, chat)


async def _api(approvals: Approvals) -> AsyncIterator[Api]:
    server = await serve(approvals)
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


def gated(factory: AgentFactory, names: str = "save_note") -> AgentFactory:
    return gated_factory(factory, names)


def user_agent(make: Callable[[], object]) -> AgentFactory:
    return lambda: prepare(make())  # type: ignore[arg-type]


@pytest.fixture
async def api(store: StoreIO, clock: ManualClock, notes: Path) -> AsyncIterator[Api]:
    approvals = make_approvals(store, clock, gated(default_factory("scripted", notes_dir=notes)))
    async for a in _api(approvals):
        yield a


async def _tool_card(api: Api, text: str = "save a note: hello", chat: str = CHAT) -> dict:
    code, body = await api.turn(chat, USER, text)
    assert code == 200 and body["status"] == "awaiting_approval", body
    return body["card"]


async def test_r1_a_gated_tool_pauses_before_its_body_and_runs_once_under_20_racing_clicks(
    api: Api, notes: Path
) -> None:
    card = await _tool_card(api)
    assert card["kind"] == "tool"
    assert card["tool"]["name"] == "save_note" and card["tool"]["input"] == {"text": "hello"}
    assert card["tool"]["fingerprint"] == fingerprint("save_note", {"text": "hello"})
    assert "question" not in card
    assert lines(notes) == []  # the body has not run while the card is shown

    clicks = await asyncio.gather(
        *(api.resume(card["card_id"], USER, card["secret"], duration="once") for _ in range(20))
    )
    outcomes = [b["outcome"] for _, b in clicks]
    assert outcomes.count("resumed") == 1, outcomes  # R10: one claim wins
    assert set(outcomes) <= {"resumed", "in_progress", "replayed"}
    assert lines(notes) == ["hello"]  # R12: exactly once
    won = next(b for _, b in clicks if b["outcome"] == "resumed")
    assert won["result"] == {"status": "answered", "text": "Saved the note: hello"}
    # replay: the stored answer, nothing runs again
    code, again = await api.resume(card["card_id"], USER, card["secret"], duration="once")
    assert code == 200 and again["outcome"] == "replayed" and again["result"] == won["result"]
    assert lines(notes) == ["hello"]
    # once: no grant, so the next call asks again
    code, grants = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert grants["grants"] == []
    await _tool_card(api, "save a note: again")


async def test_r16_deny_with_a_reason_never_runs_and_the_model_is_told_why(api: Api, notes: Path) -> None:
    card = await _tool_card(api)
    code, body = await api.resume(card["card_id"], USER, card["secret"], approved=False, reason="not on\x07 Fridays")
    assert code == 200 and body["outcome"] == "resumed"
    assert body["answer"] == {"approved": False, "reason": "not on Fridays"}
    text = body["result"]["text"]
    assert text == "Not saved: you denied the note (not on Fridays).", text  # the person's words, not the model's
    assert lines(notes) == []
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    answered = [e for e in audit["events"] if e["kind"] == "answered"]
    assert answered[-1]["detail"]["reason"] == "not on Fridays" and answered[-1]["detail"]["kind"] == "tool"
    assert answered[-1]["detail"]["tool"] == "save_note"


async def test_deny_without_a_reason_and_a_cancelled_answer_never_run(api: Api, notes: Path) -> None:
    card = await _tool_card(api)
    code, body = await api.resume(card["card_id"], USER, card["secret"], approved=False)
    assert code == 200 and body["result"]["text"] == "Not saved: you denied the note." and lines(notes) == []
    card = await _tool_card(api, chat="other")
    code, raw = await api.resume_raw(
        card["card_id"],
        {
            "user": USER,
            "secret": card["secret"],
            "responses": [{"interruptId": card["card_id"], "status": "cancelled"}],
        },
    )
    assert code == 200 and "you denied the note" in json.loads(raw)["result"]["text"] and lines(notes, "other") == []


async def test_r14_for_this_chat_grants_the_tool_then_revoke_asks_again(api: Api, notes: Path) -> None:
    card = await _tool_card(api)
    code, body = await api.resume(card["card_id"], USER, card["secret"])  # no duration: for this chat
    assert code == 200 and body["result"]["text"] == "Saved the note: hello"
    code, listed = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert [(g["kind"], g["name"], g["card_id"]) for g in listed["grants"]] == [("tool", "save_note", card["card_id"])]
    # the next call runs without a card: the grant is consulted before asking
    code, turn = await api.turn(CHAT, USER, "save a note: second")
    assert turn == {"status": "answered", "text": "Saved the note: second"}
    assert lines(notes) == ["hello", "second"]
    # another chat is not covered
    await _tool_card(api, chat="elsewhere")
    # revoke tool:NAME, then it asks again
    code, revoked = await api.delete(f"/v1/chats/{CHAT}/grants/tool:save_note?user={USER}")
    assert code == 200 and [g["name"] for g in revoked["revoked"]] == ["save_note"]
    code, again = await api.delete(f"/v1/chats/{CHAT}/grants/tool:save_note?user={USER}")
    assert code == 404
    await _tool_card(api, "save a note: third")
    assert lines(notes) == ["hello", "second"]


async def test_r14_a_tool_grant_expires(api: Api, clock: ManualClock, notes: Path) -> None:
    card = await _tool_card(api)
    code, body = await api.resume(card["card_id"], USER, card["secret"])  # no duration: the default grant
    assert code == 200 and body["result"]["text"] == "Saved the note: hello"
    code, listed = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert [(g["kind"], g["name"]) for g in listed["grants"]] == [("tool", "save_note")]
    expires_at = listed["grants"][0]["expires_at"]
    assert expires_at > clock.now()
    # First the grant is shown working: a second before it expires, the call runs without a card
    # (without this, asking again after the expiry would pass even if no grant were ever written).
    clock.set(expires_at - 1)
    code, turn = await api.turn(CHAT, USER, "save a note: second")
    assert turn == {"status": "answered", "text": "Saved the note: second"}
    assert lines(notes) == ["hello", "second"]
    # past its expiry it no longer counts: the call asks again and does not run
    clock.set(expires_at + 1)
    await _tool_card(api, "save a note: later")
    assert lines(notes) == ["hello", "second"]


async def test_r6_unattended_runs_get_the_deterministic_deny(api: Api, notes: Path) -> None:
    first = await api.turn(CHAT, USER, "save a note: hello", unattended=True)
    second = await api.turn(CHAT, USER, "save a note: hello", unattended=True)
    assert first == second
    code, body = first
    assert code == 200 and body["status"] == "answered"
    assert wording.tool_unattended("save_note") in body["text"]
    assert lines(notes) == []


async def test_r15_answers_a_tool_card_does_not_offer_are_invalid_and_change_nothing(api: Api, notes: Path) -> None:
    card = await _tool_card(api)
    for payload in ({"duration": "8h"}, {"packages": ["x"]}):
        code, body = await api.resume(card["card_id"], USER, card["secret"], **payload)  # type: ignore[arg-type]
        assert code == 422 and body["outcome"] == "invalid", body
    code, body = await api.resume(card["card_id"], USER, card["secret"], reason="why")
    assert code == 422
    assert lines(notes) == []
    code, body = await api.resume(card["card_id"], USER, card["secret"], duration="once")
    assert code == 200 and body["outcome"] == "resumed" and lines(notes) == ["hello"]


async def test_r15_a_download_card_takes_no_duration(api: Api) -> None:
    code, body = await api.turn("dl", USER, "fetch https://data.example.org/x.csv")
    card = body["card"]
    assert card["kind"] == "download" and "tool" not in card
    code, body = await api.resume(card["card_id"], USER, card["secret"], duration="once")
    assert code == 422 and body["outcome"] == "invalid"
    code, body = await api.resume(card["card_id"], USER, card["secret"])
    assert code == 200 and body["outcome"] == "resumed"


async def test_r13_a_second_gated_call_in_the_same_turn_is_a_chained_card(
    store: StoreIO, clock: ManualClock, notes: Path
) -> None:
    approvals = make_approvals(store, clock, gated(user_agent(agents.note_chain_agent)))
    async for api in _api(approvals):
        first = await _tool_card(api, "two notes")
        assert first["tool"]["input"] == {"text": "one"}
        code, body = await api.resume(first["card_id"], USER, first["secret"], duration="once")
        assert body["outcome"] == "resumed" and body["result"]["status"] == "awaiting_approval"
        second = body["result"]["card"]
        assert second["kind"] == "tool" and second["card_id"] != first["card_id"]
        assert second["tool"]["input"] == {"text": "two"}
        assert second["tool"]["fingerprint"] != first["tool"]["fingerprint"]
        assert lines(notes) == ["one"]  # the first ran once; the second waits for its own card
        code, body = await api.resume(second["card_id"], USER, second["secret"], approved=False, reason="enough")
        assert body["result"]["status"] == "answered" and "enough" in body["result"]["text"]
        assert lines(notes) == ["one"]


async def test_several_interrupts_of_a_users_agent_in_one_step_are_one_batch_card(
    store: StoreIO, clock: ManualClock, notes: Path
) -> None:
    """Issue 32 (it replaced "not offered"): every interrupt of the step on one card; one answer
    for the card answers them all in one resumed run."""
    approvals = make_approvals(store, clock, gated(user_agent(agents.note_twice_agent)))
    async for api in _api(approvals):
        code, body = await api.turn(CHAT, USER, "two notes at once")
        assert code == 200 and body["status"] == "awaiting_approval", body
        card = body["card"]
        assert card["kind"] == "batch" and len(card["items"]) == 2
        assert lines(notes) == []
        code, body = await api.resume(card["card_id"], USER, card["secret"], duration="once")
        assert code == 200 and body["outcome"] == "resumed", body
        assert len(lines(notes)) == 2


@pytest.mark.parametrize(("approved", "reason"), [(True, None), (False, "keep it"), (False, None)])
async def test_a_users_own_interrupt_becomes_a_question_card_and_receives_the_answer(
    store: StoreIO,
    clock: ManualClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    approved: bool,
    reason: str | None,
) -> None:
    log = tmp_path / "answers.jsonl"
    monkeypatch.setenv(agents.QUESTION_LOG_ENV, str(log))
    approvals = make_approvals(store, clock, user_agent(agents.question_agent))
    async for api in _api(approvals):
        code, body = await api.turn(CHAT, USER, "delete the legacy repo")
        assert body["status"] == "awaiting_approval", body
        card = body["card"]
        assert card["kind"] == "question" and "tool" not in card
        assert card["question"] == {
            "name": "approval",
            "reason": {"action": "delete_repo", "repo": "acme/legacy", "risk": "high"},
        }
        assert not log.exists()  # the tool has not received anything yet
        extra = {"reason": reason} if reason else {}
        code, body = await api.resume(card["card_id"], USER, card["secret"], approved=approved, **extra)
        assert code == 200 and body["outcome"] == "resumed"
        expected = {"approved": approved, **extra}
        assert [json.loads(x) for x in log.read_text().splitlines()] == [expected]
        text = body["result"]["text"]
        assert text == (
            "repo: deleted acme/legacy"
            if approved
            else "repo: NOT deleted acme/legacy" + (f": {reason}" if reason else "")
        )
        code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
        answered = next(e for e in audit["events"] if e["kind"] == "answered")
        assert answered["detail"]["kind"] == "question" and answered["detail"]["question"] == "approval"
        assert answered["detail"]["approved"] is approved and answered["detail"].get("reason") == reason


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chat_approvals", "serve", "--port", "0", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_confirm_tools_name_that_matches_no_tool_stops_the_server(tmp_path: Path) -> None:
    store = ["--store", f"sqlite:///{tmp_path}/a.db", "--objects", str(tmp_path / "o")]
    done = _serve(*store, "--confirm-tools", "save_note,write_table")
    assert done.returncode == 2
    assert "'write_table' matches no tool of the agent" in done.stderr and "save_note" in done.stderr
    done = _serve(*store, env={"CHAT_APPROVALS_CONFIRM_TOOLS": "drop_*"})
    assert done.returncode == 2 and "'drop_*' matches no tool" in done.stderr
    done = _serve(*store, "--agent", "tests.support.agents:question_agent", "--confirm-tools", "save_note")
    assert done.returncode == 2 and "(its tools: delete_repo)" in done.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chat_approvals", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_the_cli_answers_a_tool_card_and_lists_and_revokes_the_tool_grant(tmp_path: Path) -> None:
    common = [
        "--store", f"sqlite:///{tmp_path}/a.db", "--objects", str(tmp_path / "o"),
        "--notes-dir", str(tmp_path / "notes"), "--confirm-tools", "save_note",
    ]  # fmt: skip
    run = _cli("run", *common, "--chat", "c", "--user", "u", "save a note: from the shell")
    assert run.returncode == 0, run.stderr
    card = json.loads(run.stdout)["card"]
    assert card["kind"] == "tool" and card["tool"]["input"] == {"text": "from the shell"}
    bad = _cli("resume", *common, card["card_id"], "--user", "u", f"--secret={card['secret']}", "--deny", "--once")
    assert bad.returncode == 2 and "--once goes with --approve" in bad.stderr
    done = _cli("resume", *common, card["card_id"], "--user", "u", f"--secret={card['secret']}", "--approve")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["text"] == "Saved the note: from the shell"
    assert lines(tmp_path / "notes", "c") == ["from the shell"]
    store = common[:4]  # grants take the store options only
    listed = json.loads(_cli("grants", "list", *store, "--user", "u").stdout)["grants"]
    assert [(g["kind"], g["name"]) for g in listed] == [("tool", "save_note")]
    revoked = _cli("grants", "revoke", *store, "--user", "u", "tool:save_note")
    assert revoked.returncode == 0 and [g["name"] for g in json.loads(revoked.stdout)["revoked"]] == ["save_note"]
    assert json.loads(_cli("grants", "list", *store, "--user", "u").stdout)["grants"] == []
