"""Issue 32, approve with edits, through the HTTP front end (real HTTP to the running server, the
gated `save_note(text: str)` with its Strands input schema): a policy rule with `edits = true`
lets the approver approve a changed input; exactly that input runs, the model is told, the card,
the answer, the audit trail record both inputs and fingerprints; no grant; a replay runs nothing.
Refused (422/403, nothing consumed): an input the schema rejects, an edit with a deny, an edit
with a duration, an edit on a card whose policy has no edits, an edit by someone not allowed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.bots.approvers import ApproverDirectory
from chat_approvals.core.agent.demo_tools import notes_file
from chat_approvals.core.agent.factory import default_factory, gated_factory
from chat_approvals.core.agent.tool_gate import fingerprint
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.protocol.card_kinds import EDIT_ONCE, NO_EDITS
from chat_approvals.core.protocol.policy import parse_policy
from chat_approvals.core.protocol.resume_checks import EDIT_APPROVERS_ONLY
from chat_approvals.store.aio import StoreIO
from tests.conftest import Api, serve

CHAT = "edit-chat"
USER = "alice"
APPROVER = "sec-bob"
EDITS = """\
[approvers]
http = ["sec-bob"]

[[rule]]
match = "tool:save_note"
edits = true
"""
APPROVERS_EDIT = """\
[approvers]
http = ["sec-bob"]

[[rule]]
match = "tool:save_note"
approvers = "owner_or_approvers"
edits = "approvers"
"""
NO_EDIT = """\
[approvers]
http = ["sec-bob"]

[[rule]]
match = "tool:save_note"
"""


def lines(root: Path) -> list[str]:
    path = notes_file(root, CHAT)
    return path.read_text().splitlines() if path.exists() else []


async def _api(store: StoreIO, clock: ManualClock, notes: Path, policy_text: str) -> AsyncIterator[Api]:
    policy = parse_policy(policy_text)
    approvals = bootstrap(
        store,
        clock=clock,
        agent_factory=gated_factory(default_factory("scripted", notes_dir=notes), "save_note"),
        policy=policy,
        approvers=ApproverDirectory(policy),
    ).approvals
    server = await serve(approvals)
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    return tmp_path / "notes"


@pytest.fixture
async def api(store: StoreIO, clock: ManualClock, notes: Path) -> AsyncIterator[Api]:
    async for a in _api(store, clock, notes, EDITS):
        yield a


async def note_card(api: Api, text: str = "save a note: call Alex at 3") -> dict:
    code, body = await api.turn(CHAT, USER, text)
    assert code == 200 and body["status"] == "awaiting_approval", body
    return body["card"]


async def test_an_edited_approval_runs_exactly_the_edited_input_and_records_both(api: Api, notes: Path) -> None:
    card = await note_card(api)
    assert card["edits"] is True
    assert card["tool"]["input_schema"]["properties"]["text"]["type"] == "string"
    assert "approve_edited" in [c["answer"] for c in card["text"]["choices"]]
    edited = {"text": "call Alex at 4"}
    code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input=edited)
    assert code == 200 and body["outcome"] == "resumed", body
    assert lines(notes) == ["call Alex at 4"]  # what ran is exactly the edited input
    # the model was told (the offline model says so, without repeating the words meant for it)
    assert body["result"]["text"] == "Saved the note: call Alex at 4 (the approver edited it before it ran)"
    shown = body["answered_text"]
    assert shown["decision"] == "Approved with edits"
    assert shown["proposed_input"] == {"text": "call Alex at 3"} and shown["approved_input"] == edited
    assert shown["proposed_fingerprint"] == card["tool"]["fingerprint"]
    assert shown["approved_fingerprint"] == fingerprint("save_note", edited)
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    detail = [e for e in audit["events"] if e["kind"] == "answered"][-1]["detail"]
    assert detail["edited"] is True and detail["approved_input"] == edited
    assert detail["proposed_input"] == {"text": "call Alex at 3"}
    assert detail["fingerprint"] == card["tool"]["fingerprint"]
    assert detail["approved_fingerprint"] == fingerprint("save_note", edited)
    code, grants = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert grants["grants"] == []  # an edited approval approves one call: never a grant
    # the replay of the edited approval: the same answer, nothing runs again
    code, again = await api.resume(card["card_id"], USER, card["secret"], edited_input=edited)
    assert code == 200 and again["outcome"] == "replayed" and again["result"] == body["result"]
    assert again["answer"]["edited_input"] == edited
    assert lines(notes) == ["call Alex at 4"]


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"edited_input": {"text": 5}}, "Invalid edit: text: 5 is not of type 'string'"),
        ({"edited_input": {}}, "Invalid edit: the input: 'text' is a required property"),
        ({"edited_input": {"text": "x"}, "duration": "once", "approved": False}, "an edit with a deny"),
        ({"edited_input": {"text": "x"}, "duration": "1h"}, EDIT_ONCE),
        ({"edited_input": "call Alex at 4"}, "payload.edited_input must be an object"),
    ],
)
async def test_a_bad_edit_is_refused_with_its_reason_and_consumes_nothing(
    api: Api, notes: Path, payload: dict, says: str
) -> None:
    card = await note_card(api)
    approved = payload.pop("approved", True)
    if not approved:
        payload.pop("duration")
    code, body = await api.resume(card["card_id"], USER, card["secret"], approved=approved, **payload)
    assert code == 422 and body["outcome"] == "invalid", body
    assert says in body["message"], body["message"]
    assert lines(notes) == []
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    assert "claim_won" not in [e["kind"] for e in audit["events"]]
    code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input={"text": "fine"})
    assert code == 200 and body["outcome"] == "resumed" and lines(notes) == ["fine"]


async def test_an_edit_on_a_card_whose_policy_has_no_edits_is_refused(
    store: StoreIO, clock: ManualClock, notes: Path
) -> None:
    async for api in _api(store, clock, notes, NO_EDIT):
        card = await note_card(api)
        assert card["edits"] is False and card["tool"]["input_schema"] is None
        code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input={"text": "other"})
        assert code == 422 and body["message"] == NO_EDITS
        assert lines(notes) == []


async def test_edits_kept_to_approvers_refuse_the_requester_and_take_an_approvers_edit(
    store: StoreIO, clock: ManualClock, notes: Path
) -> None:
    async for api in _api(store, clock, notes, APPROVERS_EDIT):
        card = await note_card(api)
        assert card["edits"] == "approvers"
        code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input={"text": "mine"})
        assert code == 403 and body["message"] == EDIT_APPROVERS_ONLY, body
        assert lines(notes) == []
        code, body = await api.resume(card["card_id"], APPROVER, card["secret"], edited_input={"text": "theirs"})
        assert code == 200 and body["outcome"] == "resumed", body
        assert lines(notes) == ["theirs"]


async def test_the_audit_webhook_receives_both_inputs_and_fingerprints(tmp_path: Path, clock: ManualClock) -> None:
    """The answered event a real webhook receiver is POSTed carries the proposed and the approved
    input and both fingerprints (R22 for whoever reads the trail)."""
    import asyncio
    import json

    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from chat_approvals.bots.config import ServerConfig
    from chat_approvals.bots.server import open_root, serve_app
    from tests.conftest import TOKEN

    got: list[dict] = []
    answered = asyncio.Event()

    async def hook(request: web.Request) -> web.Response:
        event = json.loads(await request.read())
        got.append(event)
        if event["kind"] == "answered":
            answered.set()
        return web.Response(status=204)

    receiver = web.Application()
    receiver.router.add_post("/hook", hook)
    rserver = TestServer(receiver, host="127.0.0.1")
    await rserver.start_server()
    policy = tmp_path / "policy.toml"
    policy.write_text(EDITS)
    notes = tmp_path / "notes"
    cfg = ServerConfig(
        api_token=TOKEN,
        store=f"sqlite:///{tmp_path}/rows.db",
        objects=str(tmp_path / "objects"),
        policy=str(policy),
        audit_webhook=[str(rserver.make_url("/hook"))],
        audit_webhook_secret="whsec-0123456789",
        audit_webhook_poll=0.05,
    )
    factory = gated_factory(default_factory("scripted", notes_dir=notes), "save_note")
    opened = open_root(cfg, clock=clock, factory=factory)
    server = TestServer(serve_app(opened, cfg, sweep=False), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            api = Api(session, str(server.make_url("")).rstrip("/"))
            card = await note_card(api)
            edited = {"text": "call Alex at 5"}
            code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input=edited)
            assert code == 200 and body["outcome"] == "resumed", body
            await asyncio.wait_for(answered.wait(), 30)
        (event,) = [e for e in got if e["kind"] == "answered"]
        detail = event["detail"]
        assert detail["proposed_input"] == {"text": "call Alex at 3"} and detail["approved_input"] == edited
        assert detail["fingerprint"] == fingerprint("save_note", {"text": "call Alex at 3"})
        assert detail["approved_fingerprint"] == fingerprint("save_note", edited)
    finally:
        await server.close()
        await rserver.close()
        opened.close()


async def test_a_download_card_never_takes_edits(api: Api, notes: Path) -> None:
    code, body = await api.turn("fetch-chat", USER, "please fetch https://example.com/data.csv")
    assert code == 200 and body["card"]["kind"] == "download", body
    card = body["card"]
    assert card["edits"] is False
    code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input={"urls": ["https://x.test/"]})
    assert code == 422 and body["message"] == NO_EDITS, body
    code, body = await api.resume(card["card_id"], USER, card["secret"])
    assert code == 200 and body["outcome"] == "resumed"


async def test_an_item_of_a_batch_card_approved_with_edits_runs_its_edited_input(api: Api, notes: Path) -> None:
    code, body = await api.turn(CHAT, USER, "save two notes: first | second")
    card = body["card"]
    assert card["kind"] == "batch" and card["edits"] is True
    assert all(i["tool"]["input_schema"] for i in card["items"])
    first, second = (i["interruptId"] for i in card["items"])

    def entry(item: str, **payload: object) -> dict:
        return {"interruptId": item, "status": "resolved", "payload": payload}

    async def answer(entries: list[dict]) -> tuple[int, dict]:
        code, text = await api.resume_raw(
            card["card_id"], {"user": USER, "secret": card["secret"], "responses": entries}
        )
        return code, json.loads(text)

    code, body = await answer([entry(first, approved=True, edited_input={"text": 1}), entry(second, approved=False)])
    assert code == 422 and "Invalid edit: text: 1 is not of type 'string'" in body["message"], body
    code, body = await answer(
        [entry(first, approved=True, edited_input={"text": "FIRST"}), entry(second, approved=False)]
    )
    assert code == 200 and body["outcome"] == "resumed", body
    assert lines(notes) == ["FIRST"]
    assert "approved with edits; it runs once with" in body["answered_text"]["answered"]
    code, audit = await api.get(f"/v1/chats/{CHAT}/audit")
    item = [e for e in audit["events"] if e["kind"] == "answered"][-1]["detail"]["items"][0]
    assert item["approved_input"] == {"text": "FIRST"} and item["proposed_input"] == {"text": "first"}
    assert item["approved_fingerprint"] == fingerprint("save_note", {"text": "FIRST"})
    code, grants = await api.get(f"/v1/chats/{CHAT}/grants?user={USER}")
    assert grants["grants"] == []


async def test_the_response_schema_offers_edited_input_as_the_tool_takes_it_and_the_resume_agrees(
    api: Api, notes: Path
) -> None:
    """Issue 33's `responseSchema` carries issue 32's `edited_input` (the tool's own input schema)
    where the policy allows edits; what it refuses, the server refuses (422, nothing consumed)."""
    import jsonschema

    card = await note_card(api)
    schema = card["responseSchema"]
    jsonschema.Draft202012Validator.check_schema(schema)
    valid = jsonschema.Draft202012Validator(schema).is_valid
    assert schema["properties"]["edited_input"]["properties"]["text"]["type"] == "string"
    refused = [
        {"approved": True, "edited_input": {"text": 5}},  # the tool's schema
        {"approved": False, "edited_input": {"text": "x"}},  # an edit with a deny
        {"approved": True, "edited_input": {"text": "x"}, "duration": "1h"},  # an edit approves one call
    ]
    for payload in refused:
        assert not valid(payload), payload
        code, _ = await api.resume_raw(
            card["card_id"],
            {
                "user": USER,
                "secret": card["secret"],
                "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": payload}],
            },
        )
        assert code == 422, payload
    accepted = {"approved": True, "edited_input": {"text": "call Alex at 5"}}
    assert valid(accepted)
    code, body = await api.resume(card["card_id"], USER, card["secret"], edited_input=accepted["edited_input"])
    assert code == 200 and body["outcome"] == "resumed", body
    assert lines(notes) == ["call Alex at 5"]


async def test_each_item_of_a_batch_card_carries_its_own_response_schema(api: Api) -> None:
    """AG-UI: one schema per interrupt. A batch card's items each say what their entry's payload
    may hold: an approval, a reason, and (edits allowed) the tool's input; no packages."""
    import jsonschema

    code, body = await api.turn(CHAT, USER, "save two notes: first | second")
    items = body["card"]["items"]
    for item in items:
        schema = item["responseSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        valid = jsonschema.Draft202012Validator(schema).is_valid
        assert valid({"approved": True, "edited_input": {"text": "ok"}})
        assert not valid({"approved": True, "edited_input": {"text": 1}})
        assert not valid({"approved": True, "packages": ["x"]})
