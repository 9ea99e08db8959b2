"""Slack renderers and parsers (pure): every message validates through slack_sdk's Block Kit models,
and the click parser turns real block_actions payloads into R15 answers, failing closed."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import (
    SlackPayloadError,
    message_text,
    parse_click,
    parse_command,
    parse_revoke_click,
)
from chat_approvals.cards.slack_chat import chat_key, in_workspace, parse_chat_key
from chat_approvals.core.models import Answer, ApprovalCard, Grant, SubjectKind
from tests.support.slack_payloads import block_actions

NOW = 1_800_000_000.0


def card(**kw: Any) -> ApprovalCard:
    base: dict[str, Any] = {
        "card_id": "c_abcdefghijklmnopqrstuv",
        "chat": chat_key("T0APPROV1", "D0DM", "1800000000.000100"),
        "owner": "U0OWNER",
        "platform": "slack",
        "reason": "fetch the data set",
        "sites": ["example.org"],
        "urls": ["https://example.org/data.csv"],
        "packages": [],
        "created_at": NOW,
        "expires_at": NOW + 1800,
    }
    base.update(kw)
    return ApprovalCard(**base)


SECRET = "s" * 43


def validated(msg: sb.SlackMessage) -> list[dict[str, Any]]:
    """Serialise through the SDK models (which validates), then parse back and compare."""
    dicts = msg.block_dicts()
    assert 1 <= len(dicts) <= sb.MAX_BLOCKS
    assert msg.text
    reparsed = [b.to_dict() for b in Block.parse_all(dicts)]
    assert reparsed == dicts
    return dicts


def all_text(dicts: list[dict[str, Any]]) -> str:
    return json.dumps(dicts)


def buttons(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for b in dicts:
        out += [e for e in b.get("elements", []) if e.get("type") == "button"]
        if b.get("accessory", {}).get("type") == "button":
            out.append(b["accessory"])
    return out


# ----------------------------------------------------------------------------- the card


def test_card_has_what_why_expiry_and_two_buttons() -> None:
    c = card(packages=["numpy"])
    dicts = validated(sb.card_message(c, SECRET))
    text = all_text(dicts)
    for part in ("example.org", "https://example.org/data.csv", "numpy", "fetch the data set", "<@U0OWNER>"):
        assert part in text
    assert f"<!date^{int(c.expires_at)}^" in text
    approve, deny = buttons(dicts)
    assert (approve["action_id"], approve["style"]) == (sb.ACTION_APPROVE, "primary")
    assert (deny["action_id"], deny["style"]) == (sb.ACTION_DENY, "danger")
    # the value is the card id and the secret, nothing else, well under 2,000 characters
    for b in (approve, deny):
        assert json.loads(b["value"]) == {"card": c.card_id, "secret": SECRET}
        assert len(b["value"]) < 200
    # a single package offers no choice
    assert not any(e.get("type") == "checkboxes" for b in dicts for e in b.get("elements", []))


def test_card_offers_a_package_choice_when_several_packages() -> None:
    pkgs = [f"pkg{i}" for i in range(13)]
    dicts = validated(sb.card_message(card(packages=pkgs), SECRET))
    groups = [e for b in dicts for e in b.get("elements", []) if e.get("type") == "checkboxes"]
    assert [len(g["options"]) for g in groups] == [10, 3]  # at most 10 options per group
    assert [o["value"] for g in groups for o in g["initial_options"]] == pkgs  # all ticked at first


def test_card_escapes_agent_text() -> None:
    dicts = validated(sb.card_message(card(reason="<!channel> & <https://evil|click>"), SECRET))
    text = all_text(dicts)
    assert "<!channel>" not in text and "&lt;!channel&gt; &amp;" in text


def test_card_with_many_subjects_stays_within_limits() -> None:
    sites = [f"host{i}.example.org" for i in range(200)]
    urls = [f"https://host{i}.example.org/" + "x" * 200 for i in range(200)]
    pkgs = [f"package-{i}" for i in range(300)]
    dicts = validated(sb.card_message(card(sites=sites, urls=urls, packages=pkgs), SECRET))
    assert "more" in all_text(dicts)


# ----------------------------------------------------------------------------- states after a click


def test_resuming_state_has_no_buttons() -> None:
    dicts = validated(sb.resuming_message(card(), "U0OWNER"))
    assert "Resuming" in all_text(dicts) and not buttons(dicts)


def test_shown_again_state_is_read_only() -> None:
    """R19: an earlier copy of a card shown again with a new secret; nothing left to click."""
    dicts = validated(sb.shown_again_message(card()))
    assert not buttons(dicts) and not [b for b in dicts if b["type"] in ("actions", "input")]
    assert "Shown again below" in all_text(dicts) and "example.org" in all_text(dicts)


def test_outcome_states_say_what_who_when() -> None:
    c = card(packages=["numpy", "pandas"])
    approved = validated(sb.outcome_message(c, Answer(approved=True, packages=["numpy"]), "U0OWNER", NOW + 5))
    text = all_text(approved)
    assert "Approved" in text and "<@U0OWNER>" in text and f"<!date^{int(NOW + 5)}^" in text
    assert "numpy" in text and "Not allowed" in text and "pandas" in text
    denied = validated(sb.outcome_message(c, Answer(approved=False), "U0OWNER", NOW + 5))
    assert "Denied" in all_text(denied) and not buttons(denied)
    validated(sb.expired_message(c))


def test_every_refusal_validates() -> None:
    c = card()
    msgs = [
        sb.refusal_forbidden("U0OWNER"),
        sb.refusal_forbidden(None),
        sb.refusal_expired(),
        sb.refusal_in_progress(),
        sb.refusal_answered(c, Answer(approved=True), "U0OWNER", NOW),
        sb.refusal_answered(None, None, None, None),
        sb.refusal_unknown(),
        sb.refusal_invalid(),
        sb.usage_message(),
        sb.help_message(),
        sb.waiting_message(),
        sb.reply_message("done: <b> & " + "y" * 7000),
        sb.reply_message(""),
    ]
    for m in msgs:
        validated(m)
    assert "<@U0OWNER>" in all_text(validated(sb.refusal_forbidden("U0OWNER")))


# ----------------------------------------------------------------------------- /approvals


def grant(chat: str, name: str, kind: SubjectKind = "site") -> Grant:
    return Grant(user="U0OWNER", chat=chat, kind=kind, name=name, card_id="c_x", created_at=NOW, expires_at=NOW + 9)


def test_grants_list_grouped_by_chat_with_revoke_buttons() -> None:
    a, b = chat_key("T0APPROV1", "C1", "1.1"), chat_key("T0APPROV1", "C2", "2.2")
    dicts = validated(sb.grants_message([grant(a, "example.org"), grant(b, "numpy", "package"), grant(a, "b.org")]))
    text = all_text(dicts)
    assert text.index("<#C1>") < text.index("b.org") < text.index("example.org") < text.index("<#C2>")
    revokes = buttons(dicts)
    assert [json.loads(x["value"]) for x in revokes] == [
        {"chat": a, "name": "b.org"},
        {"chat": a, "name": "example.org"},
        {"chat": b, "name": "numpy"},
    ]
    assert all(x["action_id"] == sb.ACTION_REVOKE for x in revokes)
    assert "nothing" in all_text(validated(sb.grants_message([])))


def test_long_grants_list_is_truncated_to_one_message() -> None:
    gs = [grant(chat_key("T0APPROV1", f"C{i % 7}", "1.1"), f"h{i}.org") for i in range(120)]
    dicts = validated(sb.grants_message(gs))
    assert len(dicts) <= sb.MAX_BLOCKS and "more" in all_text(dicts)


def test_revoked_message() -> None:
    a = chat_key("T0APPROV1", "C1", "1.1")
    assert "Revoked" in all_text(validated(sb.revoked_message("example.org", [grant(a, "example.org")])))
    assert "nothing to revoke" in all_text(validated(sb.revoked_message("all", [])))


@pytest.mark.parametrize(
    ("text", "verb", "subject"),
    [
        ("", "list", None),
        ("list", "list", None),
        ("help", "help", None),
        ("revoke example.org", "revoke", "example.org"),
        ("revoke <http://example.org|example.org>", "revoke", "example.org"),
        ("revoke `numpy`", "revoke", "numpy"),
        ("revoke all", "revoke", "all"),
        ("revoke ALL", "revoke", "all"),
        ("revoke", "usage", None),
        ("revoke a b", "usage", None),
        ("delete example.org", "usage", None),
        ("revoke <!channel>", "usage", None),
    ],
)
def test_parse_command(text: str, verb: str, subject: str | None) -> None:
    cmd = parse_command(text)
    assert (cmd.verb, cmd.subject) == (verb, subject)


def test_chat_keys() -> None:
    key = chat_key("T1", "C1", "1.2")
    assert key == "slack:T1:C1:1.2"
    assert parse_chat_key(key) is not None and in_workspace(key, "T1") and not in_workspace(key, "T2")
    assert parse_chat_key("teams:tenant:conv") is None


# ----------------------------------------------------------------------------- the click parser (R15)


def click_payload(msg: sb.SlackMessage, action_id: str, **kw: Any) -> dict[str, Any]:
    dicts = msg.block_dicts()
    value = next(b["value"] for b in buttons(dicts) if b["action_id"] == action_id)
    message = {
        "type": "message",
        "ts": "1800000000.000200",
        "thread_ts": "1800000000.000100",
        "blocks": dicts,
    }
    return block_actions(
        action_id=action_id, value=value, user="U0OWNER", channel="D0DM", message_ts="1800000000.000200",
        message=message, **kw,
    )  # fmt: skip


def test_r15_approve_and_deny_clicks_parse() -> None:
    c = card()
    msg = sb.card_message(c, SECRET)
    click = parse_click(click_payload(msg, sb.ACTION_APPROVE))
    assert (click.card_id, click.secret, click.answer) == (c.card_id, SECRET, Answer(approved=True))
    assert (click.user, click.team, click.channel, click.thread_ts) == (
        "U0OWNER",
        "T0APPROV1",
        "D0DM",
        "1800000000.000100",
    )
    assert parse_click(click_payload(msg, sb.ACTION_DENY)).answer == Answer(approved=False)


def test_r15_package_choice_from_state_and_from_untouched_checkboxes() -> None:
    pkgs = [f"p{i}" for i in range(12)]
    c = card(packages=pkgs)
    msg = sb.card_message(c, SECRET)
    # untouched: what the reader saw ticked (all of them)
    assert parse_click(click_payload(msg, sb.ACTION_APPROVE)).answer == Answer(approved=True, packages=pkgs)
    # the reader unticked p1 in the first group; the second group is untouched
    block = sb.packages_block_id(c.card_id)
    first = [{"value": p} for p in pkgs[:10] if p != "p1"]
    state = {"values": {block: {f"{sb.ACTION_PACKAGES}.0": {"type": "checkboxes", "selected_options": first}}}}
    got = parse_click(click_payload(msg, sb.ACTION_APPROVE, state=state)).answer
    assert got == Answer(approved=True, packages=[p for p in pkgs if p != "p1"])
    # nothing ticked at all: approved, but for no package
    none = {f"{sb.ACTION_PACKAGES}.{n}": {"type": "checkboxes", "selected_options": []} for n in (0, 1)}
    got = parse_click(click_payload(msg, sb.ACTION_APPROVE, state={"values": {block: none}})).answer
    assert got == Answer(approved=True, packages=[])
    # a deny ignores the choice
    assert parse_click(click_payload(msg, sb.ACTION_DENY, state=state)).answer == Answer(approved=False)


def _broken(mutate: Any) -> dict[str, Any]:
    p = click_payload(sb.card_message(card(), SECRET), sb.ACTION_APPROVE)
    mutate(p)
    return p


@pytest.mark.parametrize(
    "mutate",
    [
        lambda p: p.update(type="view_submission"),
        lambda p: p.update(actions=[]),
        lambda p: p.update(actions=p["actions"] * 2),
        lambda p: p.pop("user"),
        lambda p: p["actions"][0].update(action_id="approvals.other"),
        lambda p: p["actions"][0].pop("value"),
        lambda p: p["actions"][0].update(value="not json"),
        lambda p: p["actions"][0].update(value='{"card": "c_1"}'),
        lambda p: p["actions"][0].update(value='{"card": "c_1", "secret": "s", "approved": true}'),
        lambda p: p["actions"][0].update(value='{"card": 1, "secret": "s"}'),
        lambda p: p["actions"][0].update(value='["c_1", "s"]'),
    ],
)
def test_r15_malformed_clicks_are_parse_errors(mutate: Any) -> None:
    with pytest.raises(SlackPayloadError):
        parse_click(_broken(mutate))
    with pytest.raises(SlackPayloadError):
        parse_click("payload")


def test_r15_malformed_package_state_is_a_parse_error() -> None:
    c = card(packages=["a", "b"])
    block = sb.packages_block_id(c.card_id)
    bad = {"values": {block: {"x": {"type": "static_select", "selected_options": []}}}}
    with pytest.raises(SlackPayloadError):
        parse_click(click_payload(sb.card_message(c, SECRET), sb.ACTION_APPROVE, state=bad))


def test_revoke_click_parses() -> None:
    a = chat_key("T0APPROV1", "C1", "1.1")
    dicts = sb.grants_message([grant(a, "example.org")]).block_dicts()
    value = buttons(dicts)[0]["value"]
    p = block_actions(action_id=sb.ACTION_REVOKE, value=value, user="U0OWNER", channel="C1", message_ts="1.2")
    r = parse_revoke_click(p)
    assert (r.user, r.team, r.chat, r.subject) == ("slack:-:T0APPROV1:U0OWNER", "T0APPROV1", a, "example.org")
    p["actions"][0]["value"] = '{"chat": "x"}'
    with pytest.raises(SlackPayloadError):
        parse_revoke_click(p)


def test_expiry_token_shape() -> None:
    assert re.fullmatch(
        r"<!date\^1800000000\^\{date_short_pretty\} at \{time\}\|2027-01-15 08:00 UTC>", sb.date_token(NOW)
    )


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        ("<@U0BOT> download <https://example.org/a.csv>", "download https://example.org/a.csv"),
        ("get <https://example.org/a?x=1&amp;y=2|example.org/a>", "get https://example.org/a?x=1&y=2"),
        ("tell <!here> and <#C123|general>, mail <mailto:a@b.org|a@b.org>", "tell @here and #general, mail a@b.org"),
        ("1 &lt; 2 &amp;&amp; 3 &gt; 2", "1 < 2 && 3 > 2"),
        ("", ""),
    ],
)
def test_message_text_undoes_slack_formatting(raw: str, plain: str) -> None:
    assert message_text(raw) == plain
