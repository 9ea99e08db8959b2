"""R7 (snapshot before pointer before card), R11 (lease, heartbeat, claim cap), R13 (chain under the claim)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from strands import tool

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.ids import hash_secret
from chat_approvals.core.models import Answer, ClaimRead, ObjectRef, StoreUnavailable
from chat_approvals.core.protocol.lease import Heartbeat
from chat_approvals.core.protocol.resume import CAP_REACHED
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.base import ObjectStore, StoreError
from tests.conftest import click, make_approvals
from tests.core.test_rules_tool import ask
from tests.support.agents import policy_factory, results_of, text_of, work_policy

TEXT = "fetch https://data.example/x"


class FailingPut(ObjectStore):
    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner

    def put(self, key: str, data: bytes) -> ObjectRef:
        raise StoreError("injected: object PUT failed")

    def get(self, ref: ObjectRef) -> bytes:
        return self.inner.get(ref)

    def get_key(self, key: str) -> bytes | None:
        return self.inner.get_key(key)

    def sweep(self, older_than: float) -> int:
        return self.inner.sweep(older_than)


async def test_r7_snapshot_put_failure_means_no_pointer_and_no_card(
    store: StoreIO, clock: ManualClock, approvals
) -> None:
    broken = StoreIO(store.rows, FailingPut(store.objects))
    a = make_approvals(broken, clock, approvals.turns.factory)
    turn = await a.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert turn.status == "answered" and turn.offer is None and turn.text == wording.SNAPSHOT_FAILED
    assert store.rows.get_pointer("c") is None


async def test_r7_crash_between_snapshot_and_pointer_leaves_no_card(
    store: StoreIO, clock: ManualClock, approvals
) -> None:
    original = store.rows.put_pointer

    def crash(*args: Any) -> bool:
        raise RuntimeError("injected crash after the snapshot PUT")

    store.rows.put_pointer = crash  # type: ignore[method-assign]
    turn = await approvals.run_turn(chat="c", user="u", text=TEXT, platform="http")
    store.rows.put_pointer = original  # type: ignore[method-assign]
    assert turn.status == "answered" and turn.offer is None
    assert store.rows.get_pointer("c") is None
    assert list(store.objects.root.rglob("snapshots/*.json"))  # type: ignore[attr-defined]  # the orphan is harmless
    # The chat is not stuck: the next message gets an ordinary new card.
    again = await approvals.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert again.status == "awaiting_approval"


async def test_r7_snapshot_too_large_means_an_ordinary_message(store: StoreIO, clock: ManualClock, approvals) -> None:
    a = make_approvals(store, clock, approvals.turns.factory, max_snapshot_bytes=64)
    turn = await a.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert turn.status == "answered" and turn.text == wording.SNAPSHOT_FAILED
    assert store.rows.get_pointer("c") is None


def test_r11_heartbeat_renews_until_the_deadline_then_stops(store: StoreIO, clock: ManualClock) -> None:
    renewals: list[tuple[float, float]] = []

    def renew(now: float, until: float) -> bool:
        renewals.append((now, until))
        return True

    start = clock.now()
    hb = Heartbeat(renew, clock, lease=30, deadline=start + 25)
    assert hb.tick() and renewals[-1] == (start, start + 25)  # never past the deadline
    clock.advance(10)
    assert hb.tick() and renewals[-1] == (start + 10, start + 25)
    clock.advance(15)
    assert hb.tick() is False and len(renewals) == 2  # hard stop at the deadline


def test_r11_heartbeat_stops_once_the_lease_is_lost(clock: ManualClock) -> None:
    hb = Heartbeat(lambda now, until: False, clock, lease=30, deadline=clock.now() + 900)
    assert hb.tick() is False and hb.lost
    assert hb.tick() is False


async def test_r11_heartbeat_runs_on_its_own_thread_while_the_loop_is_blocked(
    store: StoreIO, clock: ManualClock
) -> None:
    """A tool that blocks the event loop must not starve the lease (a real, bounded wait of 0.4 s)."""

    @tool
    async def hog() -> str:
        """Block the event loop."""
        time.sleep(0.4)
        return "hogged"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [{"name": "hog", "input": {}}]
        return text_of(results[-1]), []

    a = make_approvals(store, clock, policy_factory(policy, tools=[hog]), heartbeat_every=0.05)
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    calls: list[float] = []
    original = store.rows.renew

    def counting_renew(*args: Any, **kwargs: Any) -> bool:
        calls.append(time.monotonic())
        return original(*args, **kwargs)

    store.rows.renew = counting_renew  # type: ignore[method-assign]
    res = await click(a, turn.offer, approved=True)
    assert res.outcome == "resumed" and res.result is not None and res.result.text == "hogged"
    assert len(calls) >= 3


async def test_r11_claim_cap_denies_and_expires_a_card_that_keeps_killing_workers(
    store: StoreIO,
    clock: ManualClock,
    approvals,
) -> None:
    turn = await approvals.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    card, secret = turn.offer.card, turn.offer.secret
    for n in range(3):  # three workers claim and die: each lease runs out
        now = clock.now()
        won = store.rows.claim(
            ClaimRead("c", card.card_id, hash_secret(secret), n),
            worker=f"dead-{n}",
            now=now,
            lease_until=now + 30,
            resume_deadline=now + 900,
        )
        assert won is not None and won.claim_count == n + 1
        clock.advance(31)
    res = await approvals.resume(card_id=card.card_id, user="u", secret=secret, answer=Answer(approved=True))
    assert res.outcome == "expired" and res.message == CAP_REACHED and res.answer == Answer(approved=False)
    pointer = store.rows.get_pointer("c")
    assert pointer is not None and pointer.state == "expired"
    assert store.rows.list_grants("u", "c", clock.now()) == []


async def test_r11_a_live_lease_answers_in_progress(store: StoreIO, clock: ManualClock, approvals) -> None:
    turn = await approvals.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    card, secret = turn.offer.card, turn.offer.secret
    now = clock.now()
    assert store.rows.claim(
        ClaimRead("c", card.card_id, hash_secret(secret), 0),
        worker="other",
        now=now,
        lease_until=now + 30,
        resume_deadline=now + 900,
    )
    before = store.rows.get_pointer("c")
    res = await approvals.resume(card_id=card.card_id, user="u", secret=secret, answer=Answer(approved=True))
    assert res.outcome == "in_progress"
    assert store.rows.get_pointer("c") == before
    clock.advance(31)  # the other worker died: its lease ran out, the next click resumes
    res = await approvals.resume(card_id=card.card_id, user="u", secret=secret, answer=Answer(approved=True))
    assert res.outcome == "resumed"


async def test_r13_a_chained_card_is_not_written_when_the_claim_was_lost(store: StoreIO, clock: ManualClock) -> None:
    @tool(context=True)
    def slow_step(tool_context) -> str:
        """A step during which this worker's lease lapses and another worker claims the card."""
        p = store.rows.get_pointer("c")
        assert p is not None
        clock.advance(31)
        now = clock.now()
        assert store.rows.claim(
            ClaimRead("c", p.card_id, p.secret_hash, p.claim_count),
            worker="thief",
            now=now,
            lease_until=now + 30,
            resume_deadline=now + 900,
        )
        return "slow"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [{"name": "slow_step", "input": {}}]
        if len(results) == 2:
            return "", [ask(urls=["https://b.example/2"])]
        return "end", []

    a = make_approvals(store, clock, policy_factory(policy, tools=[slow_step]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    res = await click(a, turn.offer, approved=True)
    assert res.outcome == "in_progress"
    p = store.rows.get_pointer("c")
    assert p is not None and p.card_id == turn.offer.card.card_id and p.worker == "thief"
    assert store.objects.get_key(f"answers/{turn.offer.card.card_id}.json") is None


async def test_concurrent_clicks_in_one_process_resume_once(
    store: StoreIO, clock: ManualClock, tmp_path, monkeypatch
) -> None:
    log = tmp_path / "work.log"
    monkeypatch.setenv("CHAT_APPROVALS_TEST_WORK_LOG", str(log))
    from tests.support.agents import do_work

    a = make_approvals(store, clock, policy_factory(work_policy, tools=[do_work]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    results = await asyncio.gather(
        *[
            a.resume(
                card_id=turn.offer.card.card_id,
                user="u",
                secret=turn.offer.secret,
                answer=Answer(approved=True),
            )
            for _ in range(50)
        ]
    )
    outcomes = [r.outcome for r in results]
    assert outcomes.count("resumed") == 1
    assert set(outcomes) <= {"resumed", "in_progress", "replayed"}
    assert len(log.read_text().splitlines()) == 1


def test_r11_lease_keeper_renews_every_held_lease_and_ends_when_none_is_held(clock: ManualClock) -> None:
    """A real, bounded wait: the keeper's own thread ticks every 0.02 s."""
    from chat_approvals.core.protocol.lease import LeaseKeeper

    renewed: list[str] = []
    keeper = LeaseKeeper(every=0.02)
    beats = [
        keeper.hold(
            Heartbeat(lambda now, until, n=n: renewed.append(n) is None, clock, lease=30, deadline=clock.now() + 900)
        )
        for n in ("a", "b")
    ]
    deadline = time.monotonic() + 5
    while not {"a", "b"} <= set(renewed) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert {"a", "b"} <= set(renewed)
    for beat in beats:
        keeper.release(beat)
    while keeper._thread is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert keeper._thread is None


async def test_r13_a_store_fault_writing_the_chained_card_is_a_store_fault(store: StoreIO, clock: ManualClock) -> None:
    """Not "already being resumed": the front end says the store is unavailable (503), and the
    claim's lease lapses so the card can be answered again (R11)."""

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [ask(urls=["https://b.example/2"])]
        return "end", []

    a = make_approvals(store, clock, policy_factory(policy))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None

    def down(*_: Any, **__: Any) -> bool:
        raise StoreError("injected: the chained card's write failed after its retries")

    store.rows.replace = down  # type: ignore[method-assign]
    try:
        with pytest.raises(StoreUnavailable):  # not hidden as "in progress"
            await click(a, turn.offer, approved=True)
    finally:
        del store.rows.replace  # type: ignore[method-assign]
    p = store.rows.get_pointer("c")
    assert p is not None and p.card_id == turn.offer.card.card_id and p.state == "claimed"  # nothing chained
    clock.advance(31)  # the dead claim's lease lapses: the owner's next click resumes it
    res = await click(a, turn.offer, approved=True)
    assert res.outcome == "resumed" and res.result is not None and res.result.status == "awaiting_approval"
