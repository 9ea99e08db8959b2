"""The approval policy file (issue 13): parsing, errors that name the line, the strictest rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from chat_approvals.core.models import CardPolicy, duration_seconds
from chat_approvals.core.protocol.policy import PolicyError, load_policy, parse_policy, rule_for_subjects

EXAMPLE = """\
[defaults]
approvers = "owner"          # "owner" | "owner_or_approvers" | "approvers"
quorum = 1
durations = ["once", "1h", "8h"]
default_duration = "8h"
max_duration = "7d"

[approvers]
http = ["sec-alice", "sec-bob"]
slack = ["U0123ABC", "S0456DEF", "T0001:U0999", "E01:T0001:U0998"]
teams = ["0d5b6f3e-1c2a-4b7e-9f00-123456789abc"]

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
quorum = 2

[[rule]]
match = "package:Torch*"
approvers = "owner_or_approvers"
durations = ["once", "1h"]

[[rule]]
match = "tool:save_*"
durations = ["once"]

[routing]
slack_channel = "C0APPROVALS"
teams_conversation = "19:abc@thread.tacv2"
"""
TTL = 8 * 3600.0


def test_the_issue_example_parses() -> None:
    p = parse_policy(EXAMPLE)
    assert p.defaults.quorum == 1 and len(p.rule) == 3
    assert p.routing.slack_channel == "C0APPROVALS"
    assert p.approvers.http == ["sec-alice", "sec-bob"]


def test_first_match_wins_and_fields_fall_back_to_the_defaults() -> None:
    p = parse_policy(EXAMPLE)
    corp = p.decide([("site", "files.corp.example.com")], TTL)
    assert (corp.approvers, corp.quorum, corp.durations, corp.default_duration) == (
        "approvers",
        2,
        ["once", "1h", "8h"],
        "8h",
    )
    # a host glob does not match the bare parent, nor another kind of subject
    assert p.decide([("site", "corp.example.com")], TTL).approvers == "owner"
    assert p.decide([("package", "corp.example.com")], TTL).approvers == "owner"
    # package globs match PEP 503 names, whatever the spelling on either side
    torch = p.decide([("package", "torch_vision")], TTL)
    assert (torch.approvers, torch.durations, torch.default_duration) == ("owner_or_approvers", ["once", "1h"], "once")
    assert p.decide([("tool", "save_note")], TTL).durations == ["once"]
    assert p.decide([("tool", "delete_note")], TTL).rules == ["defaults"]


def test_a_card_takes_the_strictest_rule_among_its_subjects() -> None:
    p = parse_policy(EXAMPLE)
    both = p.decide([("site", "example.com"), ("site", "a.corp.example.com"), ("package", "torch")], TTL)
    assert both.approvers == "approvers"  # the stricter mode
    assert both.quorum == 2  # the highest quorum
    assert both.durations == ["once", "1h"]  # what every rule offers
    assert both.default_duration == "once"  # the shortest default still offered
    assert set(both.rules) == {"defaults", "rule 1 (*.corp.example.com)", "rule 2 (package:Torch*)"}
    # the mode order: owner < owner_or_approvers < approvers
    mixed = p.decide([("site", "example.com"), ("package", "torch")], TTL)
    assert mixed.approvers == "owner_or_approvers"


def test_lists_with_nothing_in_common_give_the_shortest_duration() -> None:
    p = parse_policy(
        '[defaults]\ndurations = ["1h", "8h"]\ndefault_duration = "8h"\n'
        '[[rule]]\nmatch = "a.com"\ndurations = ["1d", "7d"]\ndefault_duration = "7d"\n'
    )
    c = p.decide([("site", "a.com"), ("site", "b.com")], TTL)
    assert c.durations == ["1h"] and c.default_duration == "1h"


def test_no_durations_means_no_choice_and_the_grant_ttl_capped_by_max_duration() -> None:
    p = parse_policy('[defaults]\nmax_duration = "2h"\n')
    c = p.decide([("site", "a.com")], TTL)
    assert c.durations == [] and c.default_duration is None and c.default_seconds == 2 * 3600
    assert c.grant_seconds(None, TTL) == 2 * 3600
    assert parse_policy("").decide([("site", "a.com")], TTL) == CardPolicy(
        approvers="owner", quorum=1, durations=[], default_duration=None, default_seconds=TTL, rules=["defaults"]
    )


def test_rule_for_subjects_is_pure_and_takes_tools() -> None:
    p = parse_policy(EXAMPLE)
    assert rule_for_subjects(p, [("tool", "save_note")], TTL) == p.decide([("tool", "save_note")], TTL)
    assert rule_for_subjects(p, [], TTL).rules == ["defaults"]


def test_the_card_names_the_approvers_by_label_else_by_the_front_ends_ids() -> None:
    plain = parse_policy(EXAMPLE)
    corp = [("site", "files.corp.example.com")]
    slack = plain.decide(corp, TTL, "slack")
    assert slack.approvers_label is None
    assert slack.approver_ids == ["U0123ABC", "S0456DEF", "T0001:U0999", "E01:T0001:U0998"]
    assert plain.decide(corp, TTL, "http").approver_ids == ["sec-alice", "sec-bob"]
    assert plain.decide(corp, TTL, "cli").approver_ids == []  # no list for that front end
    owner_only = plain.decide([("site", "example.com")], TTL, "slack")
    assert (owner_only.approvers_label, owner_only.approver_ids) == (None, [])  # nobody else answers: no names
    listed = 'http = ["sec-alice", "sec-bob"]'
    named = parse_policy(EXAMPLE.replace(listed, listed + '\nlabel = " Security "'))
    assert named.decide(corp, TTL, "teams").approvers_label == "Security"


def test_durations() -> None:
    assert duration_seconds("once") == 0
    assert duration_seconds("30m") == 1800
    assert duration_seconds("8h") == 8 * 3600
    assert duration_seconds("7d") == 7 * 86400
    assert duration_seconds("2w") == 14 * 86400
    for bad in ["", "0h", "1", "h", "1.5h", "1H", "1y", " 1h", "-1h", "forever"]:
        with pytest.raises(ValueError):
            duration_seconds(bad)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[defaults]\nquorum = 1\nquorom = 2\n", 3, "unknown key 'quorom'"),
        ('[defaults]\n\n\ndurations = ["once", "1y"]\n', 4, "'1y' is not a duration"),
        ('[defaults]\ndefault_duration = "9h"\ndurations = ["1h"]\n', 2, "not in durations"),
        ('[defaults]\ndurations = ["1h", "8d"]\nmax_duration = "7d"\n', 2, "longer than max_duration"),
        (
            '[approvers]\nhttp = ["a"]\n\n[[rule]]\nmatch = "a.com"\n\n[[rule]]\nmatch = "https://b.com/x"\n',
            8,
            "looks like a URL",
        ),
        ('[approvers]\nhttp = ["a"]\n[[rule]]\nmatch = "file:x"\n', 4, "a match is a host glob"),
        ('[[rule]]\nmatch = ""\n', 2, "matches no host"),
        ('[[rule]]\nmatch = "package:"\n', 2, "matches no package"),
        ('[[rule]]\nmatch = "a b.com"\n', 2, "matches no host"),
        ('[[rule]]\nmatch = "a.com"\n[[rule]]\nmatch = "A.com"\n', 4, "never reached: rule 1"),
        ('[[rule]]\nmatch = "a.com"\napprovers = "approvers"\n', 3, "[approvers] lists nobody"),
        ("[defaults]\nquorum = 2\n", 2, "only one person can answer"),
        ("[defaults]\nquorum = 0\n", 2, "greater than or equal to 1"),
        ('[defaults]\nquorum = "2"\n', 2, "valid integer"),
        ('[defaults]\napprovers = "anyone"\n', 2, "'owner', 'owner_or_approvers' or 'approvers'"),
        ('[approvers]\nslack = ["bob"]\n', 2, "not a Slack user"),
        ('[approvers]\nteams = ["not-a-guid"]\n', 2, "not an Entra object id"),
        ('[approvers]\nhttp = ["slack:T1:U1"]\n', 2, "not an HTTP user"),
        ('[approvers]\nhttp = ["a"]\nlabel = "Sec\\nurity"\n', 3, "not a label"),
        ('[approvers]\nhttp = ["a"]\nlabel = "  "\n', 3, "not a label"),
        ('[approvers]\nhttp = ["a"]\nlabel = "%s"\n' % ("x" * 61), 3, "not a label"),
        ('[routing]\nslack_channel = "#approvals"\n', 2, "should match pattern"),
        ('[rules]\nmatch = "a.com"\n', 1, "unknown key 'rules'"),
        ("[defaults]\nquorum = [\n", 2, "not valid TOML"),
    ],
)
def test_a_bad_policy_names_the_line_and_the_problem(text: str, line: int, words: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse_policy(text, "approvals.toml")
    assert f"approvals.toml:{line}:" in str(e.value)
    assert words in str(e.value)


def test_load_policy_reads_the_file_and_names_it(tmp_path: Path) -> None:
    f = tmp_path / "p.toml"
    f.write_text(EXAMPLE)
    assert load_policy(f).rule[0].match == "*.corp.example.com"
    with pytest.raises(PolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.toml")


def test_r15_answers_with_a_duration_or_a_reason() -> None:
    from chat_approvals.core.models import InvalidAnswer, parse_answer, read_answer

    assert read_answer("resolved", {"approved": True, "duration": "1h"}).duration == "1h"
    denied = read_answer("resolved", {"approved": False, "reason": "  no,\r\nthanks\u0000\u009b "})
    assert denied.reason == "no,  thanks"  # control characters removed, line breaks become spaces
    assert read_answer("resolved", {"approved": False, "reason": " \u0007 "}).reason is None  # empty: no reason
    for bad in [
        {"approved": True, "duration": "1y"},
        {"approved": True, "duration": None},
        {"approved": False, "duration": "1h"},
        {"approved": True, "reason": "why"},
        {"approved": False, "reason": "x" * 501},
        {"approved": False, "reason": 5},
    ]:
        with pytest.raises(InvalidAnswer):
            read_answer("resolved", bad)
        assert parse_answer("resolved", bad).approved is False  # the tool's side fails closed
    # the tool keeps a well-formed deny's reason, and only an explicit approval approves
    assert parse_answer("resolved", {"approved": False, "reason": "later"}).reason == "later"
    assert parse_answer("resolved", {"approved": True, "duration": "once"}).duration == "once"
