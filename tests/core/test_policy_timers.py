"""Issue 33's policy keys: expires_after, remind_after, escalate_after/escalate_to and where the
escalated card goes; refused shapes name their line; several rules take the strictest timers;
the worked example in docs/policy.md is a valid file; a card's timers are what it asks for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chat_approvals.core.models import ApprovalCard
from chat_approvals.core.protocol.policy import PolicyError, parse_policy
from chat_approvals.core.protocol.timers import EXPIRY_LEAD, card_life, card_timers
from chat_approvals.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_worked_example_in_the_docs_is_a_valid_policy() -> None:
    doc = (ROOT / "docs" / "policy.md").read_text()
    example = doc.split("**Worked example**", 1)[1]
    toml = re.search(r"```toml\n(.*?)```", example, re.S)
    assert toml is not None
    card = parse_policy(toml.group(1)).decide([("site", "example.org")], 3600, "slack")
    assert (card.expires_after, card.remind_after, card.escalate_after) == (7200, [600], 1800)
    assert card.escalate_to == ["S0SECURITY"] and card.escalate_channel == "C0SECURITY"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[defaults]\nremind_after = "once"\n', "defaults.remind_after: 'once' is not a time"),
        ('[defaults]\nexpires_after = "2x"\n', "'2x' is not a duration"),
        ('[defaults]\nremind_after = ["10m", "10m"]\n', "listed twice"),
        ('[defaults]\nescalate_after = "30m"\n', "escalation needs both escalate_after and escalate_to"),
        ('[defaults]\nescalate_to = ["U0SEC"]\n', "escalation needs both"),
        ('[defaults]\nexpires_after = "1h"\nremind_after = ["10m", "1h"]\n', "remind_after '1h' is not before"),
        ('[defaults]\nescalate_channel = "#security"\n', "escalate_channel"),
        ('[defaults]\nescalate_after = "30m"\nescalate_to = ["slack:x"]\n', "is not an approver id"),
    ],
)
def test_bad_timer_keys_stop_start_up_naming_the_problem(text: str, words: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy(text, "p.toml")
    assert words in str(e.value) and str(e.value).startswith("p.toml:")


def test_several_rules_take_every_reminder_the_earliest_escalation_and_the_shortest_life() -> None:
    policy = parse_policy(
        """
[[rule]]
match = "a.example"
remind_after = ["10m", "1h"]
expires_after = "4h"
escalate_after = "1h"
escalate_to = ["U0ONE"]

[[rule]]
match = "b.example"
remind_after = "30m"
expires_after = "2h"
escalate_after = "30m"
escalate_to = ["U0TWO", "sec-http"]
escalate_channel = "C0SEC"
"""
    )
    card = policy.decide([("site", "a.example"), ("site", "b.example")], 3600, "slack")
    assert card.remind_after == [600, 1800, 3600] and card.expires_after == 7200
    assert card.escalate_after == 1800 and card.escalate_to == ["U0ONE", "U0TWO"]  # Slack's ids only
    assert card.escalate_channel == "C0SEC"
    assert policy.decide([("site", "b.example")], 3600, "http").escalate_to == ["sec-http"]


def test_a_cards_timers_are_its_expiry_and_what_its_policy_asks_before_it() -> None:
    policy = parse_policy('[defaults]\nexpires_after = "2h"\nremind_after = ["10m", "1h"]\n')
    settings = Settings(max_card_life=3600)  # the server's cap: 1 h
    decided = policy.decide([("site", "x.example")], 3600, "http")
    card = ApprovalCard(
        card_id="c_" + "b" * 22, chat="http:c", owner="alice", platform="http", reason="r",
        sites=["x.example"], urls=[], packages=[], created_at=1000.0, expires_at=1000.0, policy=decided,
    )  # fmt: skip
    assert card_life(card, settings) == 3600  # capped
    card = card.model_copy(update={"expires_at": 1000.0 + card_life(card, settings)})
    timers = {t.name: t.due_at for t in card_timers(card, ttl=99999.0)}
    assert timers == {"expire": 1000.0 + 3600 - EXPIRY_LEAD, "remind:0": 1600.0}  # 1 h is not before the end


def test_the_objects_sweep_waits_for_the_longest_card_life_a_policy_allows() -> None:
    from chat_approvals.core.protocol.timers import longest_life

    settings = Settings(card_expiry=1800, max_card_life=86400)
    assert longest_life(None, settings) == 1800
    assert longest_life(parse_policy('[[rule]]\nmatch = "a.example"\nexpires_after = "6h"\n'), settings) == 6 * 3600
    assert longest_life(parse_policy('[defaults]\nexpires_after = "3d"\n'), settings) == 86400  # capped
