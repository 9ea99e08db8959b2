"""Issue 28: what a person reads on a card, from the real renderers, for each kind (download,
tool, question) and state (open, approved, denied with a reason, expired, quorum in progress),
on Slack Block Kit, Adaptive Cards 1.5 (schema-valid) and the HTTP JSON: who asked, what each
choice does and until when, Answer by, the answered state, the reason with Deny, the call id muted.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from chat_approvals.cards import adaptive, adaptive_parse, http_json
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import ReasonWithApproval, parse_click
from chat_approvals.core.agent.tool_gate import tool_call
from chat_approvals.core.models import Answer, ApprovalCard, CardPolicy, Question, Vote
from tests.support.slack_payloads import block_actions
from tests.teams.schema import assert_valid_card

T0 = 1_800_000_000.0  # 2027-01-15 08:00 UTC
HOUR = 3600.0
SECRET = "s3cret-s3cret-s3cret"


def card(kind: str = "download", **over: Any) -> ApprovalCard:
    base: dict[str, Any] = dict(
        card_id="c_abcdefghijklmnopqrstuv",
        chat="teams:t1:conv1",
        owner="teams:t1:aad-1",
        owner_name="Alex Wilber",
        platform="teams",
        reason="to download https://data.example.test/data.csv",
        sites=["data.example.test"],
        urls=["https://data.example.test/data.csv"],
        packages=[],
        created_at=T0,
        expires_at=T0 + 900,
        grant_seconds=8 * HOUR,
    )
    if kind == "tool":
        base.update(kind="tool", sites=[], urls=[], reason="run save_note", tool=tool_call("save_note", {"text": "hi"}))
    if kind == "question":
        base.update(
            kind="question",
            sites=[],
            urls=[],
            reason="answer delete_repo",
            question=Question(name="delete_repo", reason={"repo": "acme/legacy"}),
        )
    base.update(over)
    return ApprovalCard(**base)


def slack(c: ApprovalCard) -> str:
    m = sb.card_message(c, SECRET)
    return m.text + json.dumps(m.block_dicts(), ensure_ascii=False)


def teams(c: ApprovalCard) -> str:
    body = adaptive.approval_card(c, SECRET)
    assert_valid_card(body)
    return json.dumps(body, ensure_ascii=False)


def http(c: ApprovalCard) -> str:
    return json.dumps(http_json.card_body(c, SECRET)["text"], ensure_ascii=False)


RENDERERS: dict[str, Callable[[ApprovalCard], str]] = {"slack": slack, "teams": teams, "http": http}


@pytest.mark.parametrize("where", RENDERERS)
def test_an_open_download_card_says_who_what_until_when_and_answer_by(where: str) -> None:
    text = RENDERERS[where](card())
    assert "Requested by" in text and ("Alex Wilber" in text or "aad-1" in text)
    assert "The agent wants to download" in text and "https://data.example.test/data.csv" in text
    assert "Answer by" in text and "Expires" not in text
    assert "in this chat for 8 h after you approve (until about" in text  # what Approve allows, how long
    assert "Nothing is downloaded" in text  # what Deny does
    assert "paused its turn" not in text and "Why" not in text  # no jargon, no repeated URL


@pytest.mark.parametrize("where", RENDERERS)
def test_an_open_tool_card_says_what_each_of_its_three_choices_does(where: str) -> None:
    text = RENDERERS[where](card("tool"))
    assert "once, with exactly this input" in text
    assert "with any input in this chat for 8 h after you approve" in text and "without asking again" in text
    assert "does not run; the agent is told" in text
    assert "Call id " in text and "(for the audit trail)" in text


@pytest.mark.parametrize("where", RENDERERS)
def test_a_policy_card_names_its_durations_and_its_approvers(where: str) -> None:
    policy = CardPolicy(approvers="approvers", quorum=2, durations=["1h", "8h"], default_duration="8h")
    text = RENDERERS[where](card(policy=policy))
    assert "for the time you choose (1 hour, 8 hours)" in text
    assert "Needs 2 approvals from approvers (not the requester)" in text


@pytest.mark.parametrize("where", RENDERERS)
@pytest.mark.parametrize("kind", ["download", "tool", "question"])
def test_a_policy_card_names_who_the_approvers_are(where: str, kind: str) -> None:
    policy = CardPolicy(approvers="approvers", quorum=2, approvers_label="Security", approver_ids=["aad-9"])
    text = RENDERERS[where](card(kind, policy=policy))
    assert "Needs 2 approvals from Security (not the requester)" in text  # the label wins over the ids
    one = CardPolicy(approvers="owner_or_approvers", approvers_label="Security")
    assert "or an approver may answer (Security)" in RENDERERS[where](card(kind, policy=one))


@pytest.mark.parametrize("where", ["teams", "http"])  # Slack: mentions, the next test
def test_without_a_label_the_card_names_the_listed_approvers(where: str) -> None:
    ids = ["0d5b6f3e-1c2a-4b7e-9f00-123456789abc"] + [f"aad-{i}" for i in range(6)]
    policy = CardPolicy(approvers="approvers", quorum=2, approver_ids=ids)
    text = RENDERERS[where](card(policy=policy))
    assert "Needs 2 approvals from 0d5b6f3e-1c2a-4b7e-9f00-123456789abc, aad-0, aad-1, aad-2, aad-3 and 2 more" in text


def test_slack_names_approvers_as_mentions_and_user_groups() -> None:
    policy = CardPolicy(approvers="approvers", approver_ids=["S0456DEF", "U0123ABC", "T0001:U0999", "<!channel>"])
    text = slack(card(platform="slack", owner="slack:T0001:U0111", chat="slack:T0001:C0001", policy=policy))
    assert (
        "An approver must answer (not the requester): <!subteam^S0456DEF>, <@U0123ABC>, <@U0999>, `&lt;!channel&gt;`"
        in text
    )


def test_an_approvers_label_is_text_not_markup() -> None:
    policy = CardPolicy(approvers="approvers", quorum=2, approvers_label="<!channel> [x](https://evil.test)")
    assert "<!channel>" not in slack(card(policy=policy))  # no @channel from a policy file
    assert "[x](" not in teams(card(policy=policy))  # no markdown link on a Teams card


@pytest.mark.parametrize("kind", ["download", "tool", "question"])
def test_the_deny_reason_sits_with_deny_on_every_kind_of_card(kind: str) -> None:
    c = card(kind)
    blocks = sb.card_message(c, SECRET).block_dicts()
    ids = [b.get("block_id", "") for b in blocks]
    answer, reason, deny = (
        next(i for i, b in enumerate(ids) if b.startswith(p))
        for p in ("approvals.answer:", "approvals.reason:", "approvals.deny:")
    )
    assert answer < reason == deny - 1  # Approve above; the reason box right above Deny, alone in its row
    assert [e["action_id"] for e in blocks[deny]["elements"]] == [sb.ACTION_DENY]
    body = adaptive.approval_card(c, SECRET)
    show = body["actions"][-1]
    assert show["type"] == "Action.ShowCard" and show["title"] == "Deny"
    assert [i["id"] for i in show["card"]["body"]] == [adaptive.REASON_INPUT]
    assert all(b.get("id") != adaptive.REASON_INPUT for b in body["body"])


def test_the_call_id_is_small_print_not_a_headline() -> None:
    c = card("tool")
    fp = c.tool.fingerprint[:16] if c.tool else ""
    blocks = sb.card_message(c, SECRET).block_dicts()
    assert [b["type"] for b in blocks if fp in json.dumps(b)] == ["context"]
    body = adaptive.approval_card(c, SECRET)
    (shown,) = [b for b in body["body"] if fp in json.dumps(b)]
    assert shown["isSubtle"] is True and shown["size"] == "Small" and "FactSet" not in json.dumps(body)


def test_an_approved_card_drops_answer_by_and_shows_who_when_and_the_grants_end() -> None:
    c = card()
    at = T0 + 60
    answer = Answer(approved=True)
    s = json.dumps(sb.outcome_message(c, answer, "slack:E1:T1:U9", at).block_dicts())
    t = json.dumps(adaptive.outcome_card(c, answer, "Megan Bowen", at))
    h = json.dumps(http_json.answered_text(c, answer, "megan", at))
    for text in (s, t, h):
        assert "Approved by" in text and "allowed in this chat until" in text and "Answer by" not in text
    assert "2027-01-15T16:01:00Z" in t and "2027-01-15T16:01:00Z" in h  # 8 h after the click
    assert "<!date^1800028860^" in s


def test_a_tool_card_approved_once_says_the_next_call_asks_again() -> None:
    c = card("tool")
    t = json.dumps(adaptive.outcome_card(c, Answer(approved=True, duration="once"), "Megan", T0))
    assert "Approved once by Megan" in t and "the next call asks again" in t


@pytest.mark.parametrize("kind", ["download", "tool", "question"])
def test_a_denied_card_shows_the_reason(kind: str) -> None:
    c = card(kind)
    answer = Answer(approved=False, reason="too big")
    for text in (
        json.dumps(sb.outcome_message(c, answer, "slack:E1:T1:U9", T0).block_dicts(), ensure_ascii=False),
        json.dumps(adaptive.outcome_card(c, answer, "Megan", T0), ensure_ascii=False),
        json.dumps(http_json.answered_text(c, answer, "megan", T0), ensure_ascii=False),
    ):
        assert "Denied by" in text and "Reason: “too big”" in text and "Answer by" not in text


def test_an_expired_card_says_nothing_was_approved() -> None:
    text = json.dumps(sb.expired_message(card()).block_dicts())
    assert "Expired at" in text and "nothing was approved" in text


def test_a_quorum_in_progress_shows_the_votes_so_far() -> None:
    policy = CardPolicy(approvers="approvers", quorum=2)
    c = card(policy=policy)
    votes = [Vote(user="slack:E1:T1:U7", at=T0)]
    assert "1 of 2 approvals so far: <@U7>" in json.dumps(sb.card_message(c, SECRET, votes).block_dicts())
    body = adaptive.approval_card(c, SECRET, ["Megan Bowen"])
    assert_valid_card(body)
    assert "1 of 2 approvals so far: Megan Bowen" in json.dumps(body)
    assert http_json.card_body(c, SECRET, votes)["text"]["votes"] == "1 of 2 approvals so far: slack:E1:T1:U7"


def test_a_reason_sent_with_approve_is_refused_with_a_message_never_dropped() -> None:
    c = card()
    value = sb.button_value(c.card_id, SECRET)
    state = {"values": {sb.reason_block_id(c.card_id): {sb.ACTION_REASON: {"type": "plain_text_input", "value": "hm"}}}}
    payload = block_actions(
        action_id=sb.ACTION_APPROVE, value=value, user="U1", channel="C1", message_ts="1.2", state=state
    )
    with pytest.raises(ReasonWithApproval, match="A reason goes only with Deny"):
        parse_click(payload)
    assert "A reason goes only with Deny" in json.dumps(
        sb.refusal_invalid(str(ReasonWithApproval("A reason goes only with Deny"))).block_dicts()
    )
    data = {"card_id": c.card_id, "secret": SECRET, "reason": "hm"}
    with pytest.raises(adaptive_parse.InvalidInvoke, match="A reason goes only with Deny"):
        adaptive_parse.parse_invoke({"action": {"type": "Action.Execute", "verb": "approve", "data": data}})
    denied = adaptive_parse.parse_invoke({"action": {"type": "Action.Execute", "verb": "deny", "data": data}})
    assert isinstance(denied, adaptive_parse.ApprovalClick) and denied.answer.reason == "hm"


def test_the_teams_card_names_the_requester_by_display_name_and_slack_by_mention() -> None:
    assert "Requested by Alex Wilber" in teams(card())
    assert "Requested by teams:t1:aad-1" in teams(card(owner_name=None))  # the id when no name is known
    assert "Requested by <@U5>" in slack(card(owner="slack:E1:T1:U5", owner_name=None))


def test_a_typed_yes_while_a_card_is_open_is_answered_with_a_hint_on_every_front_end() -> None:
    from chat_approvals.cards import effects as fx
    from chat_approvals.core.models import TurnResult
    from chat_approvals.core.protocol import wording as core_wording

    for typed in ("yes", "Yes!", " approve ", "ok."):
        assert core_wording.typed_answer(typed)
    for other in ("yes please fetch https://a.example/x", "why?", "approvals", "go"):
        assert not core_wording.typed_answer(other)
    hint = fx.turn_effect(TurnResult(status="waiting", text=core_wording.USE_THE_BUTTONS))
    assert hint == fx.Waiting(core_wording.USE_THE_BUTTONS)
    assert fx.turn_effect(TurnResult(status="waiting", text=core_wording.WAITING)) == fx.Waiting(None)
    assert "use the buttons on its card" in sb.waiting_message(core_wording.USE_THE_BUTTONS).text


def test_help_on_slack_names_downloads_tools_and_approvals() -> None:
    text = json.dumps(sb.help_message().block_dicts())
    assert "Downloads:" in text and "Tools:" in text and "Approvals:" in text and "/approvals revoke" in text
