"""The one audit path (core/protocol/audit.py): every audit event the core writes, on every path (the
pause step, the claim step with its grants, a lone event), reaches the store with one outbox item
per audit sink, ids in append order, the body the event itself; the senders are nudged after.
Real SQLite rows, the real facade."""

from __future__ import annotations

import json

from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import OutboxItem
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from tests.conftest import click
from tests.support.agents import Counter, scripted_factory

URL_TEXT = "please fetch https://data.example.org/table.csv"
SINKS = ["hook-a", "hook-b"]


def outbox(store: StoreIO, sink: str) -> list[OutboxItem]:
    return store.rows.claim_outbox(sink, "test", 0.0, 1e12, 1000)


async def test_every_event_of_a_turn_and_its_answer_has_an_outbox_item_per_sink_in_order(
    store: StoreIO, clock: ManualClock, counter: Counter
) -> None:
    a = bootstrap(
        store, settings=Settings(), clock=clock, agent_factory=scripted_factory(counter), audit_sinks=[*SINKS, "hook-a"]
    ).approvals
    nudges: list[int] = []
    a.trail.on_outbox = lambda: nudges.append(1)
    turn = await a.run_turn(chat="c1", user="alice", text=URL_TEXT, platform="http")
    assert nudges, "the pause step wrote an event with outbox items: the senders are nudged"
    res = await click(a, turn.offer, user="alice")
    assert res.outcome == "resumed"
    await a.withdraw(chat="c1", card_id="nope", why="test")  # expires nothing: no event
    trail = await a.audit("c1")
    kinds = [e.kind for e in trail]
    assert kinds[:4] == ["card_created", "claim_won", "grant", "answered"], kinds

    for sink in SINKS:  # a sink named twice is one sink
        items = outbox(store, sink)
        assert [i.id for i in items] == sorted(i.id for i in items)  # append order
        bodies = [json.loads(i.body) for i in items]
        assert [b["kind"] for b in bodies] == kinds  # one item per event, in the order written
        assert all(b["chat"] == "c1" and b["id"] == i.id for b, i in zip(bodies, items, strict=True))
    assert outbox(store, SINKS[0])[0].id == outbox(store, SINKS[1])[0].id  # one event id across sinks
    assert len(nudges) == 2  # one a write that carried items: the pause step, the claim step


async def test_without_sinks_events_are_written_with_no_outbox(
    store: StoreIO, clock: ManualClock, counter: Counter
) -> None:
    a = bootstrap(store, settings=Settings(), clock=clock, agent_factory=scripted_factory(counter)).approvals
    nudges: list[int] = []
    a.trail.on_outbox = lambda: nudges.append(1)
    turn = await a.run_turn(chat="c1", user="alice", text=URL_TEXT, platform="http")
    await click(a, turn.offer, user="alice")
    assert len(await a.audit("c1")) >= 3
    assert outbox(store, "hook-a") == [] and nudges == []


def test_an_event_holds_only_valid_text_whatever_it_was_given() -> None:
    """R20: an event's every string, dict keys and nested values too, is valid text (a lone surrogate
    an older version stored reads as U+FFFD)."""
    from chat_approvals.core.models import AuditEvent

    bad = "x\ud800y"
    event = AuditEvent(
        chat=bad, at=1.0, kind="answered", actor=bad, card_id=bad, detail={bad: [bad, {"k": bad}], "n": 1}
    )
    body = event.model_dump_json()
    body.encode("utf-8")  # a lone surrogate would fail here
    assert json.loads(body) == {
        "chat": "x\ufffdy",
        "at": 1.0,
        "kind": "answered",
        "actor": "x\ufffdy",
        "card_id": "x\ufffdy",
        "detail": {"x\ufffdy": ["x\ufffdy", {"k": "x\ufffdy"}], "n": 1},
    }
    assert AuditEvent(chat="c", at=1.0, kind="turn", actor="a", detail={"ok": ["é"]}).detail == {"ok": ["é"]}
