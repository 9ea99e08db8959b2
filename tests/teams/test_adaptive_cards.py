"""cards/adaptive.py: every card validates against the official Adaptive Card 1.5 schema, and the
invoke parser turns only well-formed clicks into answers (R15: fail closed)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import adaptive, adaptive_parse
from chat_approvals.core.models import Answer, ApprovalCard, Grant, TurnResult
from tests.teams.schema import assert_valid_card

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "teams"  # copied from shared/fixtures/teams


def make_card(**over: Any) -> ApprovalCard:
    base: dict[str, Any] = dict(
        card_id="c_abcdefghijklmnopqrstuv",
        chat="teams:t1:conv1",
        owner="aad-1",
        platform="teams",
        reason="fetch the data set for the report",
        sites=["example.com"],
        urls=["https://example.com/data_set.csv"],
        packages=[],
        created_at=1_800_000_000.0,
        expires_at=1_800_001_800.0,
        grant_seconds=8 * 3600.0,
    )
    base.update(over)
    return ApprovalCard(**base)


def execute_value(verb: str, data: Any) -> dict[str, Any]:
    return {"action": {"type": "Action.Execute", "title": verb.title(), "verb": verb, "data": data}}


def test_approval_card_schema_and_data_holds_only_id_and_secret() -> None:
    card = adaptive.approval_card(make_card(), "s3cret")
    assert_valid_card(card)
    actions = adaptive.all_actions(card)
    assert [(a["type"], a["verb"]) for a in actions] == [
        ("Action.Execute", "approve"),
        ("Action.Execute", "deny"),
    ]
    for a in actions:
        assert a["data"] == {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s3cret"}
    text = json.dumps(card)
    for shown in (
        "example.com",
        "https://example.com/data_set.csv",
        "fetch the data set",
        "Answer by {{DATE(2027-01-15T08:30:00Z, SHORT)}} {{TIME(2027-01-15T08:30:00Z)}}",
    ):
        assert shown in text
    assert not any(b.get("type") == "Input.ChoiceSet" for b in card["body"])


def test_approval_card_offers_a_package_choice_when_several() -> None:
    card = adaptive.approval_card(make_card(sites=[], urls=[], packages=["numpy", "pandas"]), "s")
    assert_valid_card(card)
    choice = next(b for b in card["body"] if b.get("type") == "Input.ChoiceSet")
    assert choice["id"] == "packages" and choice["isMultiSelect"] is True
    assert choice["value"] == "numpy,pandas"
    assert [c["value"] for c in choice["choices"]] == ["numpy", "pandas"]
    assert card["actions"][0]["associatedInputs"] == "auto"  # Approve carries the choice
    deny = adaptive.all_actions(card)[1]
    assert deny["verb"] == "deny" and set(adaptive.all_inputs(card)) == {"packages", "reason"}
    # Deny sits in its own show-card with the reason: Approve can never send the reason along
    assert card["actions"][1]["type"] == "Action.ShowCard" and '"id": "reason"' not in json.dumps(card["body"])


def test_one_package_has_no_choice() -> None:
    card = adaptive.approval_card(make_card(packages=["numpy"]), "s")
    assert_valid_card(card)
    assert not any(b.get("type") == "Input.ChoiceSet" for b in card["body"])


def test_model_text_cannot_become_a_link() -> None:
    card = adaptive.approval_card(make_card(reason="click [here](https://evil.test) <at>x</at>"), "s")
    assert_valid_card(card)
    why = card["body"][2]["text"]
    assert "\\[here\\]" in why and "\\<at\\>" in why


@pytest.mark.parametrize("approved", [True, False])
def test_resolved_and_outcome_cards_have_no_buttons(approved: bool) -> None:
    c = make_card(packages=["numpy", "pandas"])
    answer = Answer(approved=approved, packages=["numpy"] if approved else None)
    resolved = adaptive.resolved_card(c, answer, "Alex Wilber")
    assert_valid_card(resolved)
    assert "actions" not in resolved and "Resuming" in json.dumps(resolved)
    for result in (None, TurnResult(status="answered", text="done"), TurnResult(status="awaiting_approval")):
        out = adaptive.outcome_card(c, answer, "Alex Wilber", 1_800_000_100.0, result)
        assert_valid_card(out)
        assert "actions" not in out
        words = json.dumps(out)
        said = "Approved by Alex Wilber at" if approved else "Denied by Alex Wilber at"
        assert said in words
        if approved:
            assert "allowed in this chat until" in words and "Not allowed: pandas" in words


@pytest.mark.parametrize("kind", ["forbidden", "expired", "in_progress", "answered", "unknown", "invalid"])
def test_refusal_cards_are_read_only(kind: adaptive.RefusalKind) -> None:
    card = adaptive.refusal_card(kind, "some words", card=make_card(), owner="Alex Wilber")
    assert_valid_card(card)
    assert "actions" not in card
    if kind == "forbidden":
        assert "Only Alex Wilber may answer" in json.dumps(card)


def test_shown_again_card_is_read_only() -> None:
    """R19: an earlier copy of a card shown again with a new secret; nothing left to click."""
    card = adaptive.shown_again_card(make_card(packages=["numpy", "pandas"]))
    assert_valid_card(card)
    assert "actions" not in card and not [b for b in card["body"] if b["type"].startswith("Input.")]
    assert "Shown again below" in json.dumps(card) and "numpy" in json.dumps(card)


def test_grants_card_has_a_revoke_button_each() -> None:
    grants = [
        Grant(user="u", chat="c", kind="site", name="example.com", card_id="c1", created_at=1.0, expires_at=2.0),
        Grant(user="u", chat="c", kind="package", name="numpy", card_id="c1", created_at=1.0, expires_at=2.0),
    ]
    card = adaptive.grants_card(grants)
    assert_valid_card(card)
    text = json.dumps(card)
    subjects = [
        a["data"]["subject"]
        for row in card["body"]
        if row["type"] == "ColumnSet"
        for a in row["columns"][1]["items"][0]["actions"]
    ]
    assert subjects == ["example.com", "numpy"]
    assert card["actions"][0]["data"] == {"subject": "all"}
    assert "numpy" in text
    empty = adaptive.grants_card([])
    assert_valid_card(empty)
    assert "no approvals" in json.dumps(empty)
    after = adaptive.revoked_card(grants[:1], grants[1:])
    assert_valid_card(after)
    assert "Revoked: example.com." in json.dumps(after)


def test_message_card_valid() -> None:
    assert_valid_card(adaptive.message_card("Help", "approvals, revoke X"))


# --------------------------------------------------------------------------- parser


def test_parse_approve_and_deny() -> None:
    data = {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s"}
    click = adaptive_parse.parse_invoke(execute_value("approve", data))
    assert click == adaptive_parse.ApprovalClick("c_abcdefghijklmnopqrstuv", "s", Answer(approved=True))
    card_id, secret, answer = click  # unpacks as (card_id, secret, Answer)
    assert (card_id, secret, answer.approved) == ("c_abcdefghijklmnopqrstuv", "s", True)
    deny = adaptive_parse.parse_invoke(execute_value("deny", dict(data, packages="numpy")))
    assert deny == adaptive_parse.ApprovalClick("c_abcdefghijklmnopqrstuv", "s", Answer(approved=False))


def test_parse_package_choice() -> None:
    click = adaptive_parse.parse_invoke(
        execute_value("approve", {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s", "packages": "numpy, pandas"})
    )
    assert isinstance(click, adaptive_parse.ApprovalClick)
    assert click.answer == Answer(approved=True, packages=["numpy", "pandas"])
    none_chosen = adaptive_parse.parse_invoke(
        execute_value("approve", {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s", "packages": ""})
    )
    assert isinstance(none_chosen, adaptive_parse.ApprovalClick)
    assert none_chosen.answer == Answer(approved=True, packages=[])


def test_parse_the_captured_invoke_shape_with_our_data() -> None:
    """The Playground's real invoke, with this app's data in it; Teams adds trigger and action.id."""
    path = FIXTURES / "playground-invoke-adaptiveCard-action.json"
    value = copy.deepcopy(json.loads(path.read_text())["activity"]["value"])
    value["action"]["data"] = {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "x"}
    value["trigger"] = "manual"
    value["action"]["id"] = "approve"
    assert adaptive_parse.parse_invoke(value) == adaptive_parse.ApprovalClick(
        "c_abcdefghijklmnopqrstuv", "x", Answer(approved=True)
    )


def test_parse_revoke() -> None:
    assert adaptive_parse.parse_invoke(
        execute_value("revoke", {"subject": " example.com "})
    ) == adaptive_parse.RevokeClick("example.com")


@pytest.mark.parametrize(
    "value",
    [
        None,
        "x",
        {},
        {"action": "approve"},
        {"action": {"type": "Action.Submit", "verb": "approve", "data": {"card_id": "c", "secret": "s"}}},
        execute_value("approve", None),
        execute_value("approve", "card c"),
        execute_value("approve", {"card_id": "c"}),
        execute_value("approve", {"card_id": "", "secret": "s"}),
        execute_value("approve", {"card_id": 5, "secret": "s"}),
        execute_value("approve", {"card_id": "c" * 500, "secret": "s"}),
        execute_value("approve", {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s", "packages": 3}),
        execute_value("refresh", {"card_id": "c", "secret": "s"}),
        # Not of the minted shape (core/ids.py): refused before the id is used anywhere.
        execute_value("approve", {"card_id": "c_abcdefghijklmnopqrstuv/1", "secret": "s"}),
        execute_value("approve", {"card_id": "%2e%2e", "secret": "s"}),
        execute_value("approve", {"card_id": "c_abcdefghijklmnopqrst\x00v", "secret": "s"}),
        execute_value("approve", {"card_id": "c_" + "a" * 4998, "secret": "s"}),
        execute_value("revoke", {"subject": ""}),
        execute_value("revoke", {}),
    ],
)
def test_parse_malformed_is_a_clear_error(value: object) -> None:
    with pytest.raises(adaptive_parse.InvalidInvoke):
        adaptive_parse.parse_invoke(value)


def test_parse_fails_closed_on_extra_answer_fields() -> None:
    """R15: the approve verb with a non-string package list is refused, never approved."""
    with pytest.raises(adaptive_parse.InvalidInvoke):
        adaptive_parse.parse_invoke(
            execute_value("approve", {"card_id": "c_abcdefghijklmnopqrstuv", "secret": "s", "packages": [1, 2]})
        )


def test_invoke_bodies() -> None:
    card = adaptive.message_card("t", "x")
    assert adaptive.invoke_response_body(card) == {
        "statusCode": 200,
        "type": adaptive.CONTENT_TYPE,
        "value": card,
    }
    err = adaptive.invoke_error_body(400, "bad")
    assert err["statusCode"] == 400 and err["type"] == "application/vnd.microsoft.error"
    assert err["value"] == {"code": "BadRequest", "message": "bad"}
