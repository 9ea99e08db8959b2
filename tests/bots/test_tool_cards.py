"""Issue 14, the pure parts: `--confirm-tools` parsing and its start-up check, the call's
fingerprint, `tool` and `question` cards on every platform, their answers (Approve once, Approve
for this chat, Deny with a reason) and `tool:NAME` revokes."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from chat_approvals.cards import adaptive, adaptive_parse
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.http_json import card_body
from chat_approvals.cards.slack_answer import SlackPayloadError, parse_click
from chat_approvals.cards.slack_chat import chat_key
from chat_approvals.core.agent.factory import default_factory, gated_factory
from chat_approvals.core.agent.tool_gate import (
    MAX_CARD_INPUT,
    ConfirmToolsError,
    canonical_json,
    fingerprint,
    parse_names,
    resolve,
    tool_call,
)
from chat_approvals.core.models import (
    MAX_REASON,
    Answer,
    ApprovalCard,
    Grant,
    InvalidAnswer,
    Question,
    clean_reason,
    parse_answer,
    read_answer,
)
from chat_approvals.core.protocol.subjects import subject_matches
from tests.support.slack_payloads import block_actions
from tests.teams.schema import assert_valid_card

NOW = 1_800_000_000.0
SECRET = "s" * 43
CARD_ID = "c_abcdefghijklmnopqrstuv"
TOOLS = ["request_approval", "save_note", "write_table", "delete_rows", "delete_users", "read_file"]


def card(**kw: Any) -> ApprovalCard:
    base: dict[str, Any] = {
        "card_id": CARD_ID,
        "chat": chat_key("T0APPROV1", "D0DM", "1800000000.000100"),
        "owner": "slack:-:T0APPROV1:U0OWNER",
        "platform": "slack",
        "reason": "",
        "sites": [],
        "urls": [],
        "packages": [],
        "created_at": NOW,
        "expires_at": NOW + 1800,
    }
    base.update(kw)
    return ApprovalCard(**base)


def tool_card(name: str = "write_table", tool_input: Any = None) -> ApprovalCard:
    tool_input = {"table": "users", "rows": [1, 2]} if tool_input is None else tool_input
    return card(kind="tool", tool=tool_call(name, tool_input))


def question_card(reason: Any = None) -> ApprovalCard:
    reason = {"action": "delete_repo", "repo": "acme/legacy", "risk": "high"} if reason is None else reason
    return card(kind="question", question=Question(name="approval", reason=reason))


# --------------------------------------------------------------------------- --confirm-tools


def test_confirm_tools_uses_the_interventions_syntax_and_globs() -> None:
    assert resolve(parse_names("write_table,delete_*"), TOOLS) == {"write_table", "delete_rows", "delete_users"}
    assert resolve(parse_names("*,!read_file"), TOOLS) == {"save_note", "write_table", "delete_rows", "delete_users"}
    assert resolve(parse_names(" save_note , "), TOOLS) == {"save_note"}
    assert resolve(parse_names(["save_note", "write_table"]), TOOLS) == {"save_note", "write_table"}
    assert resolve([], TOOLS) == frozenset()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("save_notes", "'save_notes' matches no tool"),
        ("drop_*", "'drop_*' matches no tool"),
        ("*,!nope", "'!nope' matches no tool"),
        ("request_approval", "cannot be gated"),
        ("save note", "is not a tool name"),
        ("!", "is not a tool name"),
    ],
)
def test_a_name_that_matches_no_tool_is_refused_with_a_clear_message(spec: str, says: str) -> None:
    with pytest.raises(ConfirmToolsError, match=re.escape(says)):
        resolve(parse_names(spec), TOOLS)


def test_the_start_up_check_runs_against_the_real_agent(tmp_path: Any) -> None:
    base = default_factory("scripted", notes_dir=tmp_path)
    with pytest.raises(ConfirmToolsError, match="'write_table' matches no tool of the agent"):
        gated_factory(base, "write_table")
    assert gated_factory(base, "") is base  # nothing to gate: the factory as it was
    agent = gated_factory(base, "save_note")()
    assert "save_note" in agent.tool_names


# --------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_sha256_of_name_and_canonical_input() -> None:
    a = fingerprint("write_table", {"table": "users", "rows": [1, 2]})
    assert a == fingerprint("write_table", {"rows": [1, 2], "table": "users"})  # key order does not count
    assert len(a) == 64 and int(a, 16) >= 0
    assert a != fingerprint("write_table", {"table": "users", "rows": [2, 1]})
    assert a != fingerprint("write_tables", {"table": "users", "rows": [1, 2]})
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'


def test_a_large_input_is_cut_on_the_card_but_fingerprinted_whole() -> None:
    big = {"text": "x" * (MAX_CARD_INPUT * 2)}
    call = tool_call("save_note", big)
    assert call.truncated and isinstance(call.input, str) and len(call.input) == MAX_CARD_INPUT
    assert call.fingerprint == fingerprint("save_note", big)
    small = tool_call("save_note", {"text": "hi"})
    assert not small.truncated and small.input == {"text": "hi"}


# --------------------------------------------------------------------------- answers (R15)


def test_answers_take_a_duration_with_an_approval_and_a_reason_with_a_deny() -> None:
    assert read_answer("resolved", {"approved": True, "duration": "once"}) == Answer(approved=True, duration="once")
    assert read_answer("resolved", {"approved": False, "reason": "not\x00 on\nFriday "}) == Answer(
        approved=False, reason="not on Friday"
    )
    assert read_answer("resolved", {"approved": False, "reason": " \x07 "}) == Answer(approved=False)
    for bad in (
        {"approved": True, "reason": "why"},
        {"approved": False, "duration": "once"},
        {"approved": False, "reason": 5},
        {"approved": False, "reason": "x" * (MAX_REASON + 1)},
        {"approved": True, "duration": ""},
        {"approved": True, "duration": 1},
    ):
        with pytest.raises(InvalidAnswer):
            read_answer("resolved", bad)


def test_the_gate_reads_answers_fail_closed_and_keeps_a_deny_reason() -> None:
    assert parse_answer("resolved", {"approved": True, "duration": "once"}).approved
    assert parse_answer("resolved", {"approved": False, "reason": "no"}) == Answer(approved=False, reason="no")
    assert parse_answer("resolved", {"approved": False, "reason": "x" * 900}).reason == "x" * MAX_REASON
    for bad in ({"approved": True, "duration": None}, {"approved": True, "reason": "x"}, "yes", True, None):
        assert not parse_answer("resolved", bad).approved
    assert clean_reason("a\tb\r\nc\u2028") == "a b  c"  # issue 13: each line break is one space


# --------------------------------------------------------------------------- HTTP JSON


def test_http_card_json_has_kind_and_its_subject() -> None:
    body = card_body(tool_card(), "sec")
    assert body["kind"] == "tool"
    assert set(body["tool"]) >= {"name", "input", "fingerprint"}
    assert body["tool"]["name"] == "write_table" and body["tool"]["input"] == {"table": "users", "rows": [1, 2]}
    assert "question" not in body
    q = card_body(question_card())
    assert q["kind"] == "question" and q["question"]["name"] == "approval" and "tool" not in q
    assert q["question"]["reason"]["repo"] == "acme/legacy"
    d = card_body(card(sites=["example.com"]))
    assert d["kind"] == "download" and "tool" not in d and "question" not in d


# --------------------------------------------------------------------------- Slack


def validated(msg: sb.SlackMessage) -> list[dict[str, Any]]:
    dicts = msg.block_dicts()
    assert [b.to_dict() for b in Block.parse_all(dicts)] == dicts
    return dicts


def test_slack_tool_card_shows_the_call_and_offers_once_chat_deny_and_a_reason() -> None:
    c = tool_card(tool_input={"table": "<!channel> users"})
    blocks = validated(sb.card_message(c, SECRET))
    text = json.dumps(blocks)
    assert "write_table" in text and "&lt;!channel&gt; users" in text and "<!channel>" not in text
    assert c.tool is not None and c.tool.fingerprint[:16] in text
    buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert [(e["action_id"], e["text"]["text"]) for e in buttons] == [
        (sb.ACTION_APPROVE_ONCE, "Approve once"),
        (sb.ACTION_APPROVE, "Approve for this chat"),
        (sb.ACTION_DENY, "Deny"),
    ]
    assert all(json.loads(e["value"]) == {"card": CARD_ID, "secret": SECRET} for e in buttons)
    inputs = [b for b in blocks if b["type"] == "input"]
    assert inputs and inputs[0]["block_id"] == sb.reason_block_id(CARD_ID) and inputs[0]["optional"] is True


def test_slack_tool_input_is_cut_to_fit_a_section() -> None:
    c = tool_card(tool_input={"text": "y" * 10_000})
    blocks = validated(sb.card_message(c, SECRET))
    section = next(b for b in blocks if b["type"] == "section" and "*Input*" in b["text"]["text"])
    assert len(section["text"]["text"]) <= sb.MAX_SECTION and "more characters" in section["text"]["text"]


def test_slack_question_card_shows_the_reason_as_fields() -> None:
    blocks = validated(sb.card_message(question_card(), SECRET))
    text = json.dumps(blocks)
    assert "*risk:* high" in text and "acme/legacy" in text
    buttons = [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]
    assert buttons == [sb.ACTION_APPROVE, sb.ACTION_DENY]
    validated(sb.card_message(question_card("a plain string reason"), SECRET))
    validated(sb.card_message(question_card({f"k{i}": i for i in range(40)}), SECRET))


def _click(action_id: str, state: dict[str, Any] | None = None) -> dict[str, Any]:
    return block_actions(
        action_id=action_id,
        value=sb.button_value(CARD_ID, SECRET),
        user="U0OWNER",
        channel="D0DM",
        message_ts="1800000000.000200",
        state=state,
    )


def test_slack_clicks_become_answers() -> None:
    assert parse_click(_click(sb.ACTION_APPROVE_ONCE)).answer == Answer(approved=True, duration="once")
    assert parse_click(_click(sb.ACTION_APPROVE)).answer == Answer(approved=True)
    assert parse_click(_click(sb.ACTION_DENY)).answer == Answer(approved=False)
    typed = {"values": {sb.reason_block_id(CARD_ID): {sb.ACTION_REASON: {"type": "plain_text_input", "value": "no"}}}}
    assert parse_click(_click(sb.ACTION_DENY, typed)).answer == Answer(approved=False, reason="no")
    empty = {"values": {sb.reason_block_id(CARD_ID): {sb.ACTION_REASON: {"type": "plain_text_input", "value": None}}}}
    assert parse_click(_click(sb.ACTION_DENY, empty)).answer == Answer(approved=False)
    too_long = {
        "values": {sb.reason_block_id(CARD_ID): {sb.ACTION_REASON: {"type": "plain_text_input", "value": "x" * 501}}}
    }
    with pytest.raises(SlackPayloadError):
        parse_click(_click(sb.ACTION_DENY, too_long))
    wrong = {"values": {sb.reason_block_id(CARD_ID): {sb.ACTION_REASON: {"type": "checkboxes", "value": "x"}}}}
    with pytest.raises(SlackPayloadError):
        parse_click(_click(sb.ACTION_DENY, wrong))


def test_slack_outcomes_say_once_or_for_this_chat_and_quote_the_reason() -> None:
    c = tool_card()
    once = json.dumps(validated(sb.outcome_message(c, Answer(approved=True, duration="once"), "U1", NOW)))
    chat = json.dumps(validated(sb.outcome_message(c, Answer(approved=True), "U1", NOW)))
    denied = json.dumps(validated(sb.outcome_message(c, Answer(approved=False, reason="<b>no</b>"), "U1", NOW)))
    assert "Approved once" in once and "Approved for this chat" in chat
    assert "Denied" in denied and "&lt;b&gt;no&lt;/b&gt;" in denied
    validated(sb.resuming_message(c, "U1"))
    validated(sb.expired_message(question_card()))


def test_slack_grants_list_revokes_a_tool_as_tool_name() -> None:
    g = Grant(
        user="U1", chat="http:a", kind="tool", name="save_note", card_id=CARD_ID, created_at=NOW, expires_at=NOW + 1
    )
    blocks = validated(sb.grants_message([g]))
    revoke = next(b["accessory"] for b in blocks if b.get("accessory"))
    assert json.loads(revoke["value"]) == {"chat": "http:a", "name": "tool:save_note"}


# --------------------------------------------------------------------------- Teams


def test_teams_tool_card_validates_and_offers_three_answers_and_a_reason() -> None:
    c = tool_card(tool_input={"table": "[x](https://evil)"})
    body = adaptive.approval_card(c, SECRET)
    assert_valid_card(body)
    actions = adaptive.all_actions(body)
    assert [a["verb"] for a in actions] == ["approve_once", "approve", "deny"]
    assert [a["title"] for a in body["actions"]] == ["Approve once", "Approve for this chat", "Deny"]
    assert all(a["data"] == {"card_id": CARD_ID, "secret": SECRET} for a in actions)
    text = json.dumps(body)
    assert "write_table" in text and "\\\\[x\\\\](https://evil)" in text
    assert adaptive.all_inputs(body)[adaptive.REASON_INPUT]["type"] == "Input.Text"
    for state in (
        adaptive.resolved_card(c, Answer(approved=True, duration="once"), "Alice"),
        adaptive.outcome_card(c, Answer(approved=False, reason="no"), "Alice", NOW),
        adaptive.refusal_card("expired", card=c),
    ):
        assert_valid_card(state)
    assert "Approved once" in json.dumps(adaptive.resolved_card(c, Answer(approved=True, duration="once"), "A"))
    denied = json.dumps(adaptive.outcome_card(c, Answer(approved=False, reason="no"), "A", NOW), ensure_ascii=False)
    assert "Denied by A at" in denied and "Reason: “no”" in denied


def test_teams_question_card_validates() -> None:
    body = adaptive.approval_card(question_card(), SECRET)
    assert_valid_card(body)
    assert [a["verb"] for a in adaptive.all_actions(body)] == ["approve", "deny"]
    assert "acme/legacy" in json.dumps(body)


def _invoke(verb: str, **data: Any) -> dict[str, Any]:
    return {"action": {"type": "Action.Execute", "verb": verb, "data": {"card_id": CARD_ID, "secret": SECRET, **data}}}


def test_teams_invokes_become_answers() -> None:
    once = adaptive_parse.parse_invoke(_invoke("approve_once"))
    assert isinstance(once, adaptive_parse.ApprovalClick) and once.answer == Answer(approved=True, duration="once")
    deny = adaptive_parse.parse_invoke(_invoke("deny", reason="  not today "))
    assert isinstance(deny, adaptive_parse.ApprovalClick) and deny.answer == Answer(approved=False, reason="not today")
    plain = adaptive_parse.parse_invoke(_invoke("deny", reason=""))
    assert isinstance(plain, adaptive_parse.ApprovalClick) and plain.answer == Answer(approved=False)
    for bad in (_invoke("deny", reason=5), _invoke("deny", reason="x" * 501), _invoke("approve_twice")):
        with pytest.raises(adaptive_parse.InvalidInvoke):
            adaptive_parse.parse_invoke(bad)


def test_teams_grants_card_revokes_a_tool_as_tool_name() -> None:
    g = Grant(user="U1", chat="t", kind="tool", name="save_note", card_id=CARD_ID, created_at=NOW, expires_at=NOW + 1)
    body = adaptive.grants_card([g])
    assert_valid_card(body)
    assert "Tool: save_note" in json.dumps(body)
    assert '"subject": "tool:save_note"' in json.dumps(body)


# --------------------------------------------------------------------------- revoke paths


def test_revoke_tool_name_takes_only_the_tool_grant() -> None:
    def g(kind: Any, name: str) -> Grant:
        return Grant(user="U", chat="c", kind=kind, name=name, card_id=CARD_ID, created_at=NOW, expires_at=NOW + 1)

    tool, pkg = g("tool", "save_note"), g("package", "save-note")
    assert subject_matches(tool, "tool:save_note") and not subject_matches(pkg, "tool:save_note")
    assert subject_matches(tool, "save_note")  # a plain name also reaches a tool of exactly that name
    assert not subject_matches(tool, "tool:Save_Note") and not subject_matches(tool, "tool:save_*")
    assert subject_matches(tool, "all")
    assert tool.revoke_subject == "tool:save_note" and pkg.revoke_subject == "save-note"


# --------------------------------------------------------------------------- binding a card to its call


def _snapshot(name: str, tool_input: Any, *, reason_fp: str | None = None, use_input: Any = None) -> dict[str, Any]:
    from chat_approvals.core.agent.tool_gate import draft_reason

    reason = draft_reason(name, tool_input, "tu_1")
    if reason_fp is not None:
        reason["fingerprint"] = reason_fp
    use = {"toolUseId": "tu_1", "name": name, "input": tool_input if use_input is None else use_input}
    return {
        "data": {
            "interrupt_state": {
                "interrupts": {"i1": {"id": "i1", "name": "strands:human-in-the-loop", "reason": reason}},
                "pending_tool_execution": {"assistant_message": {"role": "assistant", "content": [{"toolUse": use}]}},
            }
        }
    }


def test_a_tool_card_binds_only_to_the_stored_call_with_its_fingerprint() -> None:
    from chat_approvals.core.protocol.card_kinds import binds

    c = tool_card("write_table", {"table": "users"})
    assert binds(c, "tu_1", "i1", _snapshot("write_table", {"table": "users"}))
    assert not binds(c, "tu_2", "i1", _snapshot("write_table", {"table": "users"}))  # another tool use
    assert not binds(c, "tu_1", "i2", _snapshot("write_table", {"table": "users"}))  # another interrupt
    assert not binds(c, "tu_1", "i1", _snapshot("write_table", {"table": "orders"}))  # another input
    assert not binds(c, "tu_1", "i1", _snapshot("write_table", {"table": "users"}, reason_fp="0" * 64))
    assert not binds(c, "tu_1", "i1", _snapshot("write_table", {"table": "users"}, use_input={"table": "x"}))
    assert not binds(c, "tu_1", "i1", {})
    assert binds(question_card(), "", "i9", {})  # other kinds carry no call to bind


def test_an_agent_with_its_own_human_in_the_loop_cannot_take_the_gate_too(tmp_path: Any) -> None:
    from strands import Agent
    from strands.vended_interventions.hitl import HumanInTheLoop

    from chat_approvals.core.agent.demo_tools import make_save_note
    from chat_approvals.core.agent.scripted_model import ScriptedModel
    from chat_approvals.core.agent.tool_gate import attach, gate_of

    own = Agent(model=ScriptedModel(), tools=[make_save_note(tmp_path)], interventions=[HumanInTheLoop()])
    with pytest.raises(ConfirmToolsError, match="already has a HumanInTheLoop"):
        attach(own, frozenset({"save_note"}))
    plain = Agent(model=ScriptedModel(), tools=[make_save_note(tmp_path)])
    assert attach(attach(plain, frozenset({"save_note"})), frozenset({"save_note"})) is plain
    gate = gate_of(plain)
    assert gate is not None and gate.gated == {"save_note"}
    assert gate._allowed_tools == {"*", "!save_note"}  # the intervention's own syntax: only save_note asks
