"""Issue 32 through the HTTP front end (real HTTP to the running server, the offline model taught
`save two notes: A | B`): a step that pauses on several gated calls is one `batch` card whose
`items` each carry an `interruptId`; one resumed run answers every item; per-item decisions,
all-or-invalid answers, 20 racing clicks, grants covering items, unattended deny-all."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.demo_tools import notes_file
from chat_approvals.core.agent.factory import gated_factory, prepare
from chat_approvals.core.agent.tool_gate import fingerprint
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.conftest import Api, make_approvals, serve
from tests.support import agents
from tests.support.agents import chat_notes, notes_agent

CHAT = "batch-chat"
USER = "alice"
TWO = "save two notes: first | second"


@pytest.fixture
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "notes"
    monkeypatch.setenv(agents.NOTES_ENV, str(root))
    return root


def lines(root: Path, chat: str = CHAT) -> list[str]:
    return chat_notes(root, chat)


@pytest.fixture
async def api(store: StoreIO, clock: ManualClock, notes: Path) -> AsyncIterator[Api]:
    approvals = make_approvals(store, clock, notes_agent(notes))
    server = await serve(approvals)
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


async def batch_card(api: Api, text: str = TWO, chat: str = CHAT) -> dict:
    code, body = await api.turn(chat, USER, text)
    assert code == 200 and body["status"] == "awaiting_approval", body
    return body["card"]


def entry(interrupt_id: str, approved: bool, **payload: object) -> dict:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": approved, **payload}}


async def answer_items(api: Api, card: dict, entries: list[dict], user: str = USER) -> tuple[int, dict]:
    code, text = await api.resume_raw(card["card_id"], {"user": user, "secret": card["secret"], "responses": entries})
    return code, json.loads(text)


async def test_two_parallel_gated_calls_are_one_card_listing_both_items(api: Api, notes: Path) -> None:
    card = await batch_card(api)
    assert card["kind"] == "batch"
    items = card["items"]
    assert [i["interruptId"] for i in items] == [f"{card['card_id']}:1", f"{card['card_id']}:2"]
    assert [i["tool"]["input"] for i in items] == [{"text": "first"}, {"text": "second"}]
    assert [i["tool"]["fingerprint"] for i in items] == [
        fingerprint("save_note", {"text": "first"}),
        fingerprint("save_note", {"text": "second"}),
    ]
    assert all(i["kind"] == "tool" and i["tool"]["name"] == "save_note" for i in items)
    assert card["text"]["title"] == "Approval needed: 2 requests in one step"
    assert [c["answer"] for c in card["text"]["choices"]] == ["approve_once", "approve", "deny"]
    assert "interrupt_id" not in json.dumps(items)  # the SDK's ids stay inside
    assert lines(notes) == []  # nothing ran while the card is shown
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    created = [e for e in audit["events"] if e["kind"] == "card_created"][-1]
    assert [i["fingerprint"] for i in created["detail"]["items"]] == [i["tool"]["fingerprint"] for i in items]


@pytest.mark.parametrize("duration", ["once", None])
async def test_per_item_decisions_run_the_approved_body_once_and_the_denied_never(
    api: Api, notes: Path, duration: str | None
) -> None:
    """Approved for the chat, the first item writes a grant of save_note: that grant must not run
    the second item, which was denied (the card decides its own calls)."""
    card = await batch_card(api)
    first, second = (i["interruptId"] for i in card["items"])
    approve = entry(first, True, duration=duration) if duration else entry(first, True)
    code, body = await answer_items(api, card, [approve, entry(second, False, reason="not that one")])
    assert code == 200 and body["outcome"] == "resumed", body
    assert lines(notes) == ["first"]
    assert body["result"]["text"] == "Saved the note: first\nNot saved: you denied the note (not that one)."
    assert body["answered_text"]["decision"] == "Partly approved"
    assert (
        "Request 2: run save_note: denied; it did not run. Reason: “not that one”" in body["answered_text"]["answered"]
    )
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    answered = [e for e in audit["events"] if e["kind"] == "answered"][-1]["detail"]
    assert [(i["item"], i["approved"]) for i in answered["items"]] == [(first, True), (second, False)]
    assert answered["items"][1]["reason"] == "not that one"
    code, grants = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert [g["name"] for g in grants["grants"]] == ([] if duration else ["save_note"])  # once: no grant
    # the replay answers the same, and runs nothing again
    code, again = await answer_items(api, card, [approve, entry(second, False, reason="not that one")])
    assert code == 200 and again["outcome"] == "replayed" and again["result"] == body["result"]
    assert lines(notes) == ["first"]


@pytest.mark.parametrize("approved", [True, False])
async def test_one_entry_for_the_card_answers_every_item(api: Api, notes: Path, approved: bool) -> None:
    card = await batch_card(api)
    code, body = await api.resume(card["card_id"], USER, card["secret"], approved=approved)
    assert code == 200 and body["outcome"] == "resumed", body
    assert sorted(lines(notes)) == (["first", "second"] if approved else [])
    assert body["answered_text"]["decision"] == ("Approved" if approved else "Denied")


async def test_20_racing_clicks_resume_the_batch_once_and_each_body_runs_once(api: Api, notes: Path) -> None:
    card = await batch_card(api)
    entries = [entry(i["interruptId"], True, duration="once") for i in card["items"]]
    clicks = await asyncio.gather(*(answer_items(api, card, entries) for _ in range(20)))
    outcomes = [b["outcome"] for _, b in clicks]
    assert outcomes.count("resumed") == 1, outcomes
    assert set(outcomes) <= {"resumed", "in_progress", "replayed"}
    assert sorted(lines(notes)) == ["first", "second"]


@pytest.mark.parametrize(
    "shape",
    ["one item only", "an item twice", "an unknown item", "a duration not offered", "a reason with approve"],
)
async def test_an_answer_that_leaves_an_item_out_or_is_malformed_is_invalid_and_consumes_nothing(
    api: Api, notes: Path, shape: str
) -> None:
    card = await batch_card(api)
    first, second = (i["interruptId"] for i in card["items"])
    entries = {
        "one item only": [entry(first, True)],
        "an item twice": [entry(first, True), entry(first, False)],
        "an unknown item": [entry(first, True), entry(f"{card['card_id']}:3", True)],
        "a duration not offered": [entry(first, True, duration="7y"), entry(second, True)],
        "a reason with approve": [entry(first, True, reason="why"), entry(second, True)],
    }[shape]
    code, body = await answer_items(api, card, entries)
    assert code == 422 and body["outcome"] == "invalid", body
    assert lines(notes) == []
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    assert not [e for e in audit["events"] if e["kind"] in ("claim_won", "answered")]
    # the card stays answerable
    code, body = await answer_items(api, card, [entry(first, True), entry(second, True)])
    assert code == 200 and body["outcome"] == "resumed" and sorted(lines(notes)) == ["first", "second"]


async def test_an_item_approved_for_the_chat_writes_its_grant_and_covered_calls_are_not_asked(
    api: Api, notes: Path
) -> None:
    card = await batch_card(api)
    first, second = (i["interruptId"] for i in card["items"])
    code, body = await answer_items(api, card, [entry(first, True), entry(second, True, duration="once")])
    assert code == 200 and body["outcome"] == "resumed", body
    code, grants = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert [(g["kind"], g["name"]) for g in grants["grants"]] == [("tool", "save_note")]
    # every item of the next step is covered by the grant: the step does not pause
    code, body = await api.turn(CHAT, USER, "save two notes: third | fourth")
    assert code == 200 and body["status"] == "answered", body
    assert sorted(lines(notes)) == ["first", "fourth", "second", "third"]


async def test_r6_an_unattended_batch_denies_every_item_deterministically(api: Api, notes: Path) -> None:
    first = await api.turn(CHAT, USER, TWO, unattended=True)
    second = await api.turn(CHAT, USER, TWO, unattended=True)
    assert first == second
    code, body = first
    assert code == 200 and body["status"] == "answered"
    assert body["text"].count(wording.tool_unattended("save_note")) == 2, body["text"]
    assert lines(notes) == []


async def test_a_gated_call_and_a_question_in_one_step_each_get_their_own_answer(
    store: StoreIO, clock: ManualClock, notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question item is resumed with `{"approved": bool, "reason"?}`, a tool item by the gate."""
    answers = tmp_path / "answers.jsonl"
    monkeypatch.setenv(agents.QUESTION_LOG_ENV, str(answers))
    factory = gated_factory(lambda: prepare(agents.mixed_batch_agent()), "save_note")
    server = await serve(make_approvals(store, clock, factory))
    async with aiohttp.ClientSession() as session:
        api = Api(session, str(server.make_url("")).rstrip("/"))
        card = await batch_card(api, "do both")
        kinds = [(i["kind"], (i.get("tool") or i.get("question") or {}).get("name")) for i in card["items"]]
        assert kinds == [("tool", "save_note"), ("question", "approval")]
        note, question = (i["interruptId"] for i in card["items"])
        # a question takes no duration: the whole answer is invalid, nothing consumed
        code, body = await answer_items(api, card, [entry(note, True), entry(question, True, duration="once")])
        assert code == 422, body
        code, body = await answer_items(api, card, [entry(note, False), entry(question, True)])
        assert code == 200 and body["outcome"] == "resumed", body
        assert lines(notes) == []  # the denied call never ran
        assert [json.loads(line) for line in answers.read_text().splitlines()] == [{"approved": True}]
        assert "deleted acme/old" in body["result"]["text"]
    await server.close()


POLICY = """\
[approvers]
http = ["sec-bob"]

[[rule]]
match = "tool:save_note"
approvers = "approvers"
"""


async def test_the_strictest_rule_over_the_items_decides_who_may_answer(
    store: StoreIO, clock: ManualClock, notes: Path
) -> None:
    from chat_approvals.bots.approvers import ApproverDirectory
    from chat_approvals.core.bootstrap import bootstrap
    from chat_approvals.core.protocol.policy import parse_policy

    policy = parse_policy(POLICY)
    factory = notes_agent(notes)
    approvals = bootstrap(
        store, clock=clock, agent_factory=factory, policy=policy, approvers=ApproverDirectory(policy)
    ).approvals
    server = await serve(approvals)
    async with aiohttp.ClientSession() as session:
        api = Api(session, str(server.make_url("")).rstrip("/"))
        card = await batch_card(api)
        assert card["approvers"] == "approvers"
        entries = [entry(i["interruptId"], True, duration="once") for i in card["items"]]
        code, body = await answer_items(api, card, entries)  # the requester
        assert code == 403 and body["outcome"] == "forbidden", body
        assert lines(notes) == []
        code, body = await answer_items(api, card, entries, user="sec-bob")
        assert code == 200 and body["outcome"] == "resumed" and sorted(lines(notes)) == ["first", "second"]
    await server.close()


async def test_parallel_calls_each_mark_where_their_own_line_went(api: Api, notes: Path) -> None:
    """The demo tool's marker (what makes a repeated attempt write nothing, R11) names where THIS
    call's line went, even when the calls of one step write at the same moment."""
    texts = [f"note {n}" for n in range(8)]
    card = await batch_card(api, "save several notes: " + " | ".join(texts))
    entries = [entry(i["interruptId"], True, duration="once") for i in card["items"]]
    code, body = await answer_items(api, card, entries)
    assert code == 200 and sorted(lines(notes)) == texts, body
    raw = notes_file(notes, CHAT).read_bytes()
    markers = list((notes_file(notes, CHAT).parent / "applied").iterdir())
    starts = sorted(int(m.read_text()) for m in markers)
    assert starts == sorted(raw.index(t.encode() + b"\n") for t in texts)  # one line each, none shared
