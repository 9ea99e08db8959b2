"""R3 with fewer reads (issue 34): a new turn's refusals are known to be none, without a store read,
until one is recorded through the grant book (the gate's backend and the tools' access both are
it); any later run of the turn (a resume, here or in another process) reads them from the store."""

from __future__ import annotations

from typing import Any

from strands import tool

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import context_of
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Refusal
from chat_approvals.core.protocol.grants import UnrefusedTurns
from chat_approvals.store.aio import StoreIO
from tests.conftest import click
from tests.core.test_rules_tool import approvals_for, ask
from tests.support.agents import results_of


def count_refusal_reads(store: StoreIO) -> list[str]:
    """The turn ids the store is asked for refusals of (the real read still runs)."""
    asked: list[str] = []
    read = store.rows.list_refusals

    def counted(chat: str, turn_id: str) -> list[Refusal]:
        asked.append(turn_id)
        return read(chat, turn_id)

    store.rows.list_refusals = counted  # type: ignore[method-assign]
    return asked


async def test_r3_a_new_turn_with_nothing_refused_asks_without_reading_refusals(
    store: StoreIO, clock: ManualClock
) -> None:
    asked = count_refusal_reads(store)

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        return ("done", []) if results_of(messages) else ("", [ask(urls=["https://a.example/1"])])

    a = approvals_for(store, clock, policy)
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.sites == ["a.example"]
    assert asked == []
    assert len(a._grants.unrefused._turns) == 0  # the run ended: nothing kept for it


async def test_r3_a_refusal_through_the_gate_backend_is_read_and_merged(store: StoreIO, clock: ManualClock) -> None:
    asked = count_refusal_reads(store)
    box: dict[str, Any] = {}

    @tool(context=True)
    async def blocked(tool_context) -> str:
        """Pretend the gate refused a download of this turn's script."""
        ctx = context_of(tool_context.invocation_state)
        assert ctx is not None
        refusal = Refusal(chat=ctx.chat, turn_id=ctx.turn_id, kind="site", name="mirror.example", at=clock.now())
        await box["approvals"].gate_backend.record_refusal(refusal)  # what the egress gate calls
        return "blocked: mirror.example"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [{"name": "blocked", "input": {}}]
        return ("", [ask()]) if len(results) == 1 else ("done", [])

    a = box["approvals"] = approvals_for(store, clock, policy, tools=[blocked])
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.sites == ["mirror.example"]
    assert len(asked) == 1


async def test_r3_a_resumed_run_reads_the_turns_refusals_from_the_store(store: StoreIO, clock: ManualClock) -> None:
    """A refusal this process never saw (written by another process's gate during the turn) is
    merged when the resumed run asks again: the resume reads the store."""
    asked = count_refusal_reads(store)

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        return ("", [ask()]) if len(results) == 1 else ("done", [])

    a = approvals_for(store, clock, policy)
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and asked == []
    pointer = store.rows.get_pointer("c")
    assert pointer is not None
    store.rows.record_refusal(
        Refusal(chat="c", turn_id=pointer.turn_id, kind="site", name="elsewhere.example", at=clock.now()),
        clock.now() + 60,
    )
    res = await click(a, turn.offer, approved=False)
    assert res.result is not None and res.result.offer is not None, res.result
    assert res.result.offer.card.sites == ["elsewhere.example"]
    assert asked == [pointer.turn_id]
    assert res.result.text != wording.NOTHING_NAMED


def test_r3_unrefused_turns_are_bounded_and_leave_on_a_refusal() -> None:
    turns = UnrefusedTurns(size=2)
    for t in ("t1", "t2", "t3"):
        turns.enter(t)
    assert "t1" not in turns and "t2" in turns and "t3" in turns  # the oldest pushed out: it reads the store
    turns.leave("t2")
    assert "t2" not in turns
