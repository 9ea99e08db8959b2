"""A Slack click's payload is read once (issue 34): the ack reads it strictly as `BlockActions`
(`shaped_click`), and the click's task uses that instead of reading it again. This holds only if a
payload `shaped_click` reads is one the ack's shape check (`SlackInteraction`, issue 27.3: a 400)
and `read_block_actions` (the click's refusal) both let through, with the same values; every
other payload goes through those two, as before. No rule number covers the reading itself; the
refusals it must keep are issue 27.3's and R15's.

Checked here on every part of a real click payload, each replaced by a value of another type, one
too long, or removed: a length of the shape check left out of `BlockActions` fails the first and
the last test (checked by breaking two of them once)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from chat_approvals.bots.slack_shapes import SlackInteraction, _problem
from chat_approvals.cards import slack_answer
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import (
    SlackPayloadError,
    parse_click,
    read_block_actions,
    shaped_click,
)
from chat_approvals.core.models import ApprovalCard
from tests.support.card_pictures import download_card_with
from tests.support.slack_payloads import block_actions
from tests.support.slack_rig import SlackRig

SECRET = "s" * 43
MISSING = object()


def _card() -> ApprovalCard:
    return download_card_with(
        reason="fetch the data", sites=["pypi.org"], urls=[], packages=["numpy", "pandas", "scipy"]
    )


def _click() -> dict[str, Any]:
    """An Approve click on a card offering a package choice, one box unticked, a reason typed."""
    card = _card()
    blocks = sb.card_message(card, SECRET).block_dicts()
    value = sb.button_value(card.card_id, SECRET)
    boxes = {"type": "checkboxes", "selected_options": [{"value": "numpy"}, {"value": "scipy"}]}
    state = {
        "values": {
            sb.packages_block_id(card.card_id): {f"{sb.ACTION_PACKAGES}.0": boxes},
            sb.reason_block_id(card.card_id): {sb.ACTION_REASON: {"type": "plain_text_input", "value": None}},
        }
    }
    message = {"type": "message", "ts": "1800000000.000200", "thread_ts": "1800000000.000100", "blocks": blocks}
    return block_actions(
        action_id=sb.ACTION_APPROVE,
        value=value,
        user="U0OWNER",
        channel="D0DM",
        message_ts="1800000000.000200",
        message=message,
        state=state,
        thread_ts="1800000000.000100",
        enterprise="E0GRID0001",
    )


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):  # a card's blocks: the first few are enough
            yield from _paths(v, (*path, i))


def _replaced(payload: dict[str, Any], path: tuple[Any, ...], new: Any) -> dict[str, Any]:
    out = copy.deepcopy(payload)
    parent = out
    for step in path[:-1]:
        parent = parent[step]
    if new is MISSING:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return out


REPLACEMENTS: list[Any] = [None, 5, 1.5, True, "", "x" * 256, "x" * 2001, [], [{}], {}, MISSING]


def _variants() -> Iterator[dict[str, Any]]:
    base = _click()
    yield base
    for path in _paths(base):
        if not path:
            continue
        for new in REPLACEMENTS:
            yield _replaced(base, path, new)
    yield _replaced(base, ("actions",), [base["actions"][0], base["actions"][0]])


def _read(payload: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return read_block_actions(payload).model_dump()
    except SlackPayloadError:
        return None


def test_a_payload_read_at_the_ack_passes_both_later_checks_with_the_same_values() -> None:
    shaped = refused_at_the_ack = refused_at_the_click = 0
    for payload in _variants():
        ba = shaped_click(payload)
        at_ack = _problem(SlackInteraction, payload, "the payload", text_checked=True)
        at_click = _read(payload)
        refused_at_the_ack += at_ack is not None
        refused_at_the_click += at_ack is None and at_click is None
        if ba is None:
            continue
        shaped += 1
        assert at_ack is None, (json.dumps(payload)[:300], at_ack)
        assert at_click == ba.model_dump(), json.dumps(payload)[:300]
    # the variants reach every branch: read at the ack, refused there (a 400), refused at the click
    assert shaped > 100 and refused_at_the_ack > 20 and refused_at_the_click > 20


def test_the_click_reads_the_same_answer_from_what_the_ack_read() -> None:
    payload = _click()
    ba = shaped_click(payload)
    assert ba is not None
    assert parse_click(payload, ba) == parse_click(payload)
    assert parse_click(payload).answer.packages == ["numpy", "scipy"]


def test_a_value_the_ack_refuses_is_not_read_there() -> None:
    """Slack's limits the shape check keeps (a 400 at the ack) are never read past by the strict read."""
    for path, long in [
        (("actions", 0, "value"), "x" * 2001),
        (("actions", 0, "action_id"), "x" * 256),
        (("actions", 0, "block_id"), "x" * 256),
        (("user", "id"), "U" * 256),
        (("team", "id"), "T" * 256),
        (("enterprise", "id"), "E" * 256),
        (("channel", "id"), "C" * 256),
    ]:
        payload = _replaced(_click(), path, long)
        assert _problem(SlackInteraction, payload, "the payload", text_checked=True) is not None, path
        assert shaped_click(payload) is None, path


async def test_a_served_click_is_read_once_and_resumes(rig: SlackRig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over HTTP the click's task resumes with what the ack read: with the second read made to
    fail, the card is still answered (it would be logged as a failed click instead)."""
    await rig.dm("download <https://example.org/data.csv>")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
    await rig.settle()
    card = rig.card_calls()[-1]

    def read_again(payload: object) -> slack_answer.BlockActions:
        raise AssertionError("the click's payload was read a second time")

    monkeypatch.setattr(slack_answer, "read_block_actions", read_again)
    assert await rig.click(rig.click_payload(card)) == (200, "")
    await rig.settle()
    outcome = rig.standin.of("chat.update")[-1]
    assert outcome.args["ts"] == card.result["ts"] and "Approved" in json.dumps(outcome.args["blocks"])
