"""Issue 10, findings 5-8: no usable secret at rest (R19), chats never stuck behind a card the owner
cannot see, one turn per chat (a durable turn lease), the resume deadline, the resume attempt a
tool can key a side effect on, and the sweep of interrupted writes' leftovers.

Two replicas racing first messages for one chat is in tests/test_replicas.py; the Slack and Teams
post failures in tests/bots/test_slack_http.py and tests/teams/test_teams_bot.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from strands import tool

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.context import context_of
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.ids import hash_secret
from chat_approvals.core.models import Answer, ClaimRead
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from tests.conftest import Api, click, make_approvals
from tests.core.test_rules_tool import ask
from tests.support.agents import Counter, policy_factory, results_of, text_of

CHAIN = "download https://a.example/x then https://b.example/y"
ROOT = Path(__file__).resolve().parents[2]


def stored_bytes(folder: Path) -> bytes:
    """Every byte at rest: the SQLite database with its WAL, and every object file."""
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


# --- R19: no usable secret at rest ----------------------------------------------------------------


async def test_r19_no_secret_at_rest_in_a_chained_cycle_and_the_replay_gives_a_working_fresh_secret(
    api: Api, store_paths: tuple[Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    folder = store_paths[0].parent
    code, body = await api.turn("chat-1", "alice", CHAIN)
    first = body["card"]
    code, res = await api.resume(first["card_id"], "alice", first["secret"])
    assert (code, res["result"]["status"]) == (200, "awaiting_approval")
    chained = res["result"]["card"]
    # The replay of the first card must return the chained card: it does so with a new secret.
    code, replay = await api.resume(first["card_id"], "alice", first["secret"])
    assert (code, replay["outcome"]) == (200, "replayed")
    fresh = replay["result"]["card"]
    assert fresh["card_id"] == chained["card_id"] and fresh["secret"] != chained["secret"]
    code, stale = await api.resume(chained["card_id"], "alice", chained["secret"])
    assert (code, stale["outcome"]) == (404, "unknown")  # the secret handed out before stops working
    # The owner's next message re-offers it once more (another rotation), and that one is answered.
    code, again = await api.turn("chat-1", "alice", "are you there?")
    assert again["status"] == "awaiting_approval" and again["text"] == wording.REOFFERED
    last = again["card"]
    assert last["card_id"] == chained["card_id"] and last["secret"] not in (fresh["secret"], chained["secret"])
    code, stale = await api.resume(chained["card_id"], "alice", fresh["secret"])
    assert (code, stale["outcome"]) == (404, "unknown")
    code, done = await api.resume(chained["card_id"], "alice", last["secret"])
    assert (code, done["outcome"]) == (200, "resumed") and done["result"]["status"] == "answered"
    code, replay = await api.resume(chained["card_id"], "alice", last["secret"])
    assert replay["outcome"] == "replayed" and replay["result"] == done["result"]

    secrets = [first["secret"], chained["secret"], fresh["secret"], last["secret"]]
    at_rest = stored_bytes(folder)
    assert len(list(folder.rglob("answers/**/*.json"))) == 2  # both answers were stored
    assert hash_secret(last["secret"]).encode() in at_rest  # the hash is what is kept
    for s in secrets:
        assert s.encode() not in at_rest, "a card secret is stored"
        assert s not in caplog.text, "a card secret is logged"


# --- stuck chats: the owner gets the open request back ------------------------------------------


async def test_reoffer_after_a_lost_reply_over_http(api: Api, counter: Counter) -> None:
    """The reply carrying the card was lost: the owner's next message gets the same request back
    with a rotated secret (one conditional write), and runs no model; anyone else hears waiting."""
    code, body = await api.turn("chat-1", "alice", "please fetch https://data.example.org/t.csv")
    lost = body["card"]  # as if this response never reached the client
    calls = counter.calls()
    code, other = await api.turn("chat-1", "bob", "hello")
    assert other["status"] == "waiting" and "card" not in other
    code, again = await api.turn("chat-1", "alice", "hello?")
    assert code == 200 and again["status"] == "awaiting_approval" and again["text"] == wording.REOFFERED
    card = again["card"]
    assert card["card_id"] == lost["card_id"] and card["secret"] != lost["secret"]
    assert {k: v for k, v in card.items() if k != "secret"} == {k: v for k, v in lost.items() if k != "secret"}
    assert counter.calls() == calls  # nothing ran
    code, stale = await api.resume(lost["card_id"], "alice", lost["secret"])
    assert (code, stale["outcome"]) == (404, "unknown")
    code, done = await api.resume(card["card_id"], "alice", card["secret"])
    assert (code, done["outcome"]) == (200, "resumed")
    code, audit = await api.get("/v1/chats/chat-1/audit")
    assert [e["kind"] for e in audit["events"]].count("reoffered") == 1


async def test_no_reoffer_while_the_request_is_being_resumed(
    store: StoreIO, clock: ManualClock, approvals: Approvals
) -> None:
    turn = await approvals.run_turn(chat="c", user="u", text="fetch https://a.example/x", platform="http")
    assert turn.offer is not None
    now = clock.now()
    won = store.rows.claim(
        ClaimRead("c", turn.offer.card.card_id, hash_secret(turn.offer.secret), 0),
        worker="w",
        now=now,
        lease_until=now + 30,
        resume_deadline=now + 900,
    )
    assert won is not None
    again = await approvals.run_turn(chat="c", user="u", text="hello?", platform="http")
    assert again.status == "waiting" and again.offer is None
    assert store.rows.get_pointer("c") == won  # nothing rotated under a live claim
    clock.advance(31)  # the worker died: its lease lapsed, so the owner gets the card back
    again = await approvals.run_turn(chat="c", user="u", text="hello?", platform="http")
    assert again.status == "awaiting_approval" and again.offer is not None
    res = await click(approvals, again.offer)
    assert res.outcome == "resumed"


# --- one turn per chat: the durable turn lease --------------------------------------------------


def held_turn_factory(started: threading.Event, release: threading.Event, counter: Counter):
    @tool
    async def slow_step() -> str:
        """A step that takes until the test lets it finish."""
        started.set()
        for _ in range(600):  # bounded
            if release.is_set():
                break
            await asyncio.sleep(0.01)
        return "slow done"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [{"name": "slow_step", "input": {}}]
        return text_of(results[-1]), []

    return policy_factory(policy, counter, tools=[slow_step])


async def test_a_second_message_during_a_turn_is_busy_and_runs_nothing(store: StoreIO, clock: ManualClock) -> None:
    started, release, counter = threading.Event(), threading.Event(), Counter()
    a = make_approvals(store, clock, held_turn_factory(started, release, counter))
    first = asyncio.create_task(a.run_turn(chat="c", user="u", text="go", platform="http"))
    for _ in range(500):
        if started.is_set():
            break
        await asyncio.sleep(0.01)
    assert started.is_set()
    calls = counter.calls()
    second = await a.run_turn(chat="c", user="v", text="me too", platform="http")
    assert second.status == "busy" and second.text == wording.BUSY
    assert counter.calls() == calls  # ran nothing
    other_chat = asyncio.create_task(a.run_turn(chat="d", user="u", text="go", platform="http"))
    release.set()
    assert (await asyncio.wait_for(first, 10)).text == "slow done"
    assert (await asyncio.wait_for(other_chat, 10)).text == "slow done"  # chats are independent
    third = await a.run_turn(chat="c", user="v", text="now", platform="http")  # released at the end
    assert third.status == "answered" and third.text == "slow done"
    # No per-chat state is kept in the process (the old per-chat lock map grew forever).
    assert not any(isinstance(v, dict) for v in vars(a.turns).values())


async def test_a_dead_processs_turn_lease_lapses(store: StoreIO, clock: ManualClock, approvals: Approvals) -> None:
    now = clock.now()
    assert store.rows.take_turn("c", "a-process-that-died", now, now + approvals.settings.lease)
    busy = await approvals.run_turn(chat="c", user="u", text="hello", platform="http")
    assert busy.status == "busy"
    clock.advance(approvals.settings.lease + 1)
    turn = await approvals.run_turn(chat="c", user="u", text="hello", platform="http")
    assert turn.status == "answered"


async def test_the_turn_lease_is_renewed_while_the_turn_runs(store: StoreIO, clock: ManualClock) -> None:
    started, release, counter = threading.Event(), threading.Event(), Counter()
    a = make_approvals(store, clock, held_turn_factory(started, release, counter), heartbeat_every=0.02)
    renewed: list[float] = []
    original = store.rows.renew_turn

    def counting(chat: str, holder: str, now: float, until: float) -> bool:
        renewed.append(until)
        return original(chat, holder, now, until)

    store.rows.renew_turn = counting  # type: ignore[method-assign]
    first = asyncio.create_task(a.run_turn(chat="c", user="u", text="go", platform="http"))
    for _ in range(500):
        if started.is_set() and renewed:
            break
        await asyncio.sleep(0.01)
    clock.advance(a.settings.lease - 1)  # within the lease: renewals keep it ahead of the clock
    for _ in range(500):
        if renewed and renewed[-1] > clock.now():
            break
        await asyncio.sleep(0.01)
    assert renewed and renewed[-1] > clock.now()
    assert (await a.run_turn(chat="c", user="v", text="x", platform="http")).status == "busy"
    release.set()
    assert (await asyncio.wait_for(first, 10)).status == "answered"


# --- the resume deadline ----------------------------------------------------------------------


async def test_resume_deadline_cancels_the_run_releases_the_lease_and_answers_a_deny(
    store: StoreIO, clock: ManualClock
) -> None:
    started, cancelled = threading.Event(), threading.Event()

    @tool
    async def slow_tool() -> str:
        """A step that would run far past the resume deadline."""
        started.set()
        try:
            await asyncio.sleep(30)  # bounded; the deadline cancels it long before
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "finished"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [{"name": "slow_tool", "input": {}}]
        return text_of(results[-1]), []

    a = make_approvals(
        store, clock, policy_factory(policy, tools=[slow_tool]), resume_deadline=60, heartbeat_every=0.02
    )
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    resuming = asyncio.create_task(click(a, turn.offer, approved=True))
    for _ in range(500):
        if started.is_set():
            break
        await asyncio.sleep(0.01)
    assert started.is_set()
    assert [g.name for g in store.rows.list_grants("u", "c", clock.now())] == ["a.example"]  # approved so far
    clock.advance(61)  # past the resume deadline, by the injected clock
    res = await asyncio.wait_for(resuming, 10)
    assert cancelled.is_set()
    assert res.outcome == "resumed" and res.answer == Answer(approved=False)
    assert res.result is not None and res.result.text == wording.RESUME_TOO_LONG
    p = store.rows.get_pointer("c")
    assert p is not None and p.state == "done" and p.lease_until is None  # the lease is released
    assert store.rows.list_grants("u", "c", clock.now()) == []  # answered as a deny: the grant is gone
    replay = await click(a, turn.offer, approved=True)
    assert replay.outcome == "replayed" and replay.answer == Answer(approved=False)
    assert replay.result is not None and replay.result.text == wording.RESUME_TOO_LONG
    fresh = await a.run_turn(chat="c", user="u", text="again", platform="http")  # the chat is free: a new card
    assert fresh.offer is not None and fresh.offer.card.card_id != turn.offer.card.card_id


# --- the resume attempt (fencing token) in the tool's context ------------------------------------


async def test_the_tools_context_carries_the_resume_attempt(store: StoreIO, clock: ManualClock) -> None:
    @tool(context=True)
    def side_effect(tool_context) -> str:  # type: ignore[no-untyped-def]
        """Report the attempt this resume is."""
        ctx = context_of(tool_context.invocation_state)
        assert ctx is not None and ctx.resume_card is not None
        return f"attempt {ctx.resume_attempt} of {ctx.resume_card.card_id}"

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [{"name": "side_effect", "input": {}}]
        return text_of(results[-1]), []

    a = make_approvals(store, clock, policy_factory(policy, tools=[side_effect]))
    turn = await a.run_turn(chat="c1", user="u", text="go", platform="http")
    assert turn.offer is not None
    res = await click(a, turn.offer)
    assert res.result is not None and res.result.text == f"attempt 1 of {turn.offer.card.card_id}"

    turn = await a.run_turn(chat="c2", user="u", text="go", platform="http")
    assert turn.offer is not None
    now = clock.now()
    card_id, sh = turn.offer.card.card_id, hash_secret(turn.offer.secret)
    assert store.rows.claim(
        ClaimRead("c2", card_id, sh, 0),
        worker="killed-worker",
        now=now,
        lease_until=now + 30,
        resume_deadline=now + 900,
    )
    clock.advance(31)  # the first worker died after its side effect: the card is resumed again
    res = await click(a, turn.offer)
    assert res.result is not None and res.result.text == f"attempt 2 of {card_id}"


# --- crash leftovers: interrupted object writes -------------------------------------------------


def test_sweep_removes_the_temporary_file_of_a_write_killed_midway(tmp_path: Path) -> None:
    root = tmp_path / "objects"
    child = textwrap.dedent(
        f"""
        import os, sys, time
        from chat_approvals.store.file_objects import FileObjects
        def stuck(*args):
            print("linking", flush=True)
            time.sleep(60)
        os.link = stuck
        FileObjects({str(root)!r}).put("snapshots/killed.json", b"half of a snapshot")
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", child], cwd=ROOT, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"linking"  # bounded by the child
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    leftovers = list(root.rglob(".*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].read_bytes() == b"half of a snapshot"
    clock = ManualClock(time.time() + 3600)  # newer than the leftover: the complete object stays
    objects = FileObjects(root, clock=clock)
    kept = objects.put("snapshots/kept.json", b"whole")
    written = leftovers[0].stat().st_mtime
    assert objects.sweep(written - 1) == 0 and leftovers[0].exists()  # younger than the horizon
    assert objects.sweep(written + 1) == 1
    assert not list(root.rglob(".*.tmp")) and objects.get(kept) == b"whole"
    assert objects.get_key("snapshots/killed.json") is None
    with pytest.raises(ValueError):
        objects.put("snapshots/.x.json.abc.tmp", b"not a key")  # nobody can name a write in progress
