"""A later turn in the same chat remembers the earlier ones, across processes; other chats do not."""

from __future__ import annotations

from typing import Any

from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import click, make_approvals
from tests.core.test_pause_and_lease import FailingPut
from tests.core.test_rules_tool import ask
from tests.support.agents import policy_factory, results_of


def recall(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Ask once when told to fetch; otherwise list every user text and tool result it can see."""
    said = [b["text"] for m in messages if m["role"] == "user" for b in m["content"] if "text" in b]
    if said[-1].startswith("fetch") and not results_of(messages):
        return "", [ask(urls=["https://a.example/x"])]
    seen = [b["toolResult"]["status"] for m in messages for b in m["content"] if "toolResult" in b]
    return f"heard {said}; tool results {seen}", []


async def test_a_later_turn_sees_the_earlier_turns_of_its_chat_only(store: StoreIO, clock: ManualClock) -> None:
    a = make_approvals(store, clock, policy_factory(recall))
    assert (await a.run_turn(chat="c", user="u", text="one", platform="http")).text == "heard ['one']; tool results []"
    assert (
        await a.run_turn(chat="c", user="u", text="two", platform="http")
    ).text == "heard ['one', 'two']; tool results []"
    assert (
        await a.run_turn(chat="d", user="u", text="three", platform="http")
    ).text == "heard ['three']; tool results []"


async def test_the_resumed_turn_is_remembered_and_survives_a_restart(store_paths, clock: ManualClock) -> None:
    db, objects = store_paths
    first = StoreIO(SqliteRows(db), FileObjects(objects, clock=clock))
    a = make_approvals(first, clock, policy_factory(recall))
    turn = await a.run_turn(chat="c", user="u", text="fetch it", platform="http")
    res = await click(a, turn.offer)
    assert res.result is not None and res.result.text == "heard ['fetch it']; tool results ['success']"
    first.close()
    second = StoreIO(SqliteRows(db), FileObjects(objects, clock=clock))  # another process, same store
    b = make_approvals(second, clock, policy_factory(recall))
    after = await b.run_turn(chat="c", user="u", text="and now?", platform="http")
    assert after.text == "heard ['fetch it', 'and now?']; tool results ['success']"
    second.close()


async def test_history_can_be_turned_off(store: StoreIO, clock: ManualClock) -> None:
    a = make_approvals(store, clock, policy_factory(recall), history=False)
    await a.run_turn(chat="c", user="u", text="one", platform="http")
    assert (await a.run_turn(chat="c", user="u", text="two", platform="http")).text == "heard ['two']; tool results []"
    assert store.rows.get_session("c") is None


async def test_a_history_that_cannot_be_saved_is_forgotten_not_fatal(store: StoreIO, clock: ManualClock) -> None:
    broken = StoreIO(store.rows, FailingPut(store.objects))
    a = make_approvals(broken, clock, policy_factory(recall))
    assert (await a.run_turn(chat="c", user="u", text="one", platform="http")).status == "answered"
    assert (await a.run_turn(chat="c", user="u", text="two", platform="http")).text == "heard ['two']; tool results []"
