"""Issue 12: the process that paused a turn resumes the Agent it still holds, only while the
bytes it paused with hash to the checksum on the pointer the claim won; the stored snapshot stays
the truth, and a mismatched, evicted or absent entry (another process) resumes from the store."""

from __future__ import annotations

from typing import Any

from chat_approvals.core.agent.paused_agents import PausedAgents
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ResumeResult
from chat_approvals.store.aio import StoreIO
from tests.conftest import click, make_approvals
from tests.support.agents import Counter, scripted_factory

TEXT = "please fetch https://data.example.org/table.csv"


class Built:
    """Counts the Agents a factory builds (a resume from the store builds one more)."""

    def __init__(self, counter: Counter) -> None:
        self.n = 0
        self._make = scripted_factory(counter)

    def __call__(self) -> Any:
        self.n += 1
        return self._make()


def approvals_with(store: StoreIO, clock: ManualClock, built: Built) -> tuple[Approvals, PausedAgents]:
    a = make_approvals(store, clock, built)
    return a, a.resumes.paused


def resumed(res: ResumeResult) -> bool:
    return res.outcome == "resumed" and res.result is not None and res.result.status == "answered"


async def test_the_pausing_process_resumes_the_agent_it_holds(store: StoreIO, clock: ManualClock) -> None:
    counter = Counter()
    built = Built(counter)
    a, paused = approvals_with(store, clock, built)
    turn = await a.run_turn(chat="c1", user="u", text=TEXT, platform="http")
    assert turn.offer is not None and len(paused) == 1
    assert resumed(await click(a, turn.offer))
    assert built.n == 1 and (paused.hits, paused.misses) == (1, 0)  # no second Agent
    assert counter.calls() == 2  # R1: one model call before the pause, one after, as from the store
    assert len(paused) == 0  # taken out when used: an Agent never runs twice


async def test_a_mismatched_entry_is_not_used_and_the_store_is(store: StoreIO, clock: ManualClock) -> None:
    built = Built(Counter())
    a, paused = approvals_with(store, clock, built)
    turn = await a.run_turn(chat="c1", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    entry = paused._entries[turn.offer.card.card_id]
    paused.put(turn.offer.card.card_id, entry.agent, entry.snapshot + b" ")  # not what the store holds
    assert resumed(await click(a, turn.offer))
    assert built.n == 2 and (paused.hits, paused.misses) == (0, 1)  # a new Agent from the stored snapshot


async def test_an_evicted_entry_resumes_from_the_store(store: StoreIO, clock: ManualClock) -> None:
    built = Built(Counter())
    a, paused = approvals_with(store, clock, built)
    paused.size = 1
    first = await a.run_turn(chat="c1", user="u", text=TEXT, platform="http")
    second = await a.run_turn(chat="c2", user="u", text=TEXT, platform="http")
    assert len(paused) == 1  # bounded: the oldest went
    assert resumed(await click(a, first.offer))
    assert built.n == 3 and paused.misses == 1
    assert resumed(await click(a, second.offer))
    assert built.n == 3 and paused.hits == 1


async def test_another_process_resumes_from_the_store_and_the_holder_never_runs_it_again(
    store: StoreIO, clock: ManualClock
) -> None:
    built = Built(Counter())
    holder, paused = approvals_with(store, clock, built)
    other_built = Built(Counter())
    other, _ = approvals_with(store, clock, other_built)  # another replica on the same store
    turn = await holder.run_turn(chat="c1", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    first = await click(other, turn.offer)
    assert resumed(first) and other_built.n == 1  # built from the stored snapshot
    again = await click(holder, turn.offer)
    assert again.outcome == "replayed" and again.result == first.result
    assert paused.hits == 0 and built.n == 1  # the held Agent was never run


def test_take_checks_the_checksum_and_removes_the_entry() -> None:
    import hashlib

    paused = PausedAgents(size=2)
    agent: Any = object()
    paused.put("c_1", agent, b"snap")
    good = hashlib.sha256(b"snap").hexdigest()
    assert paused.matches("c_1", good) and not paused.matches("c_1", "0" * 64)
    assert paused.take("c_1", "0" * 64) is None and len(paused) == 0  # a mismatch is dropped
    paused.put("c_1", agent, b"snap")
    taken = paused.take("c_1", good)
    assert taken is not None and taken.agent is agent and paused.take("c_1", good) is None
    off = PausedAgents(size=0)
    off.put("c_1", agent, b"snap")
    assert len(off) == 0  # size 0: nothing kept
