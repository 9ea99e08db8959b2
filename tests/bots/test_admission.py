"""Issue 12 (load): resume work is admitted first in, first out, a few at a time (bots/admission.py),
through the running server with the Slack front end (signed HTTP, the Web API stand-in).

A tool in the resumed turn holds the first resume until the test lets it go, so what waits in the
queue, what is refused and what runs next is decided by the server, never by timing.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.clock import ManualClock
from tests.support.agents import held_resume_factory
from tests.support.slack_rig import OWNER, SlackRig, buttons, open_root
from tests.support.slack_standin import Call

URL = "https://example.org/data.csv"


class Hold:
    """The first resumed turn waits in its tool until `release()`; later ones pass straight on."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self._first = True
        self._lock = threading.Lock()

    def step(self) -> None:
        with self._lock:
            first, self._first = self._first, False
        if first:
            self.entered.set()
            self.gate.wait(timeout=30)

    def release(self) -> None:
        self.gate.set()

    async def wait_entered(self) -> None:
        async with asyncio.timeout(10):
            while not self.entered.is_set():
                await asyncio.sleep(0.01)


def held_factory(hold: Hold) -> Any:
    return held_resume_factory(hold.step, URL)


@pytest.fixture
def hold() -> Iterator[Hold]:
    h = Hold()
    yield h
    h.release()


async def cards(rig: SlackRig, n: int) -> list[Call]:
    """n cards, each in a thread of its own (one open request per chat)."""
    before = len(rig.card_calls())
    for _ in range(n):
        assert await rig.dm(f"download <{URL}>") == (200, "")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= before + n)
    await rig.settle()
    return rig.card_calls()[before:]


def card_id_of(card: Call) -> str:
    return str(json.loads(buttons(card.args["blocks"])[0]["value"])["card"])


def updates_by_card(rig: SlackRig, cs: list[Call]) -> list[tuple[int, str]]:
    """Every chat.update of these cards, in the order the stand-in got them: (card index, state)."""
    where = {c.result["ts"]: i for i, c in enumerate(cs)}
    out = []
    for u in rig.standin.of("chat.update"):
        if u.args["ts"] in where:
            text = json.dumps(u.args.get("blocks"))
            out.append((where[u.args["ts"]], "resuming" if "Resuming" in text else "approved"))
    return out


async def metric(rig: SlackRig, name: str, labels: dict[str, str] | None = None) -> float:
    assert rig.session is not None
    async with rig.session.get(f"http://127.0.0.1:{rig.port}/metrics") as r:
        text = await r.text()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and (labels or {}).items() <= sample.labels.items():
                return float(sample.value)
    raise AssertionError(f"{name} {labels} not exposed")


@pytest.fixture
async def one_worker(hold: Hold) -> AsyncIterator[SlackRig]:
    rig = await SlackRig(factory=held_factory(hold), server={"resume_workers": 1, "resume_patience": None}).start()
    try:
        yield rig
    finally:
        hold.release()
        await rig.stop()


async def test_r10_clicks_are_acked_while_a_resume_runs_and_resume_in_arrival_order(
    one_worker: SlackRig, hold: Hold
) -> None:
    """One worker: the first click's resume is held; three more clicks are acknowledged at once and
    wait in the queue (the depth metric says 3); when it ends they resume one after another, in the
    order they arrived, each claimed (R10) only when its turn comes."""
    rig = one_worker
    cs = await cards(rig, 4)
    assert await rig.click(rig.click_payload(cs[0])) == (200, "")
    await hold.wait_entered()
    for c in cs[1:]:
        assert await rig.click(rig.click_payload(c)) == (200, "")  # the ack does not wait for the held resume
    assert await metric(rig, "chat_approvals_resume_queue_depth") == 3
    assert await metric(rig, "chat_approvals_resume_queue_running") == 1
    for c in cs[1:]:  # queued, not started: nothing claimed
        p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(c))
        assert p is not None and p.state == "pending"
    hold.release()
    await rig.settle()
    expected = [(i, state) for i in range(4) for state in ("resuming", "approved")]
    assert updates_by_card(rig, cs) == expected
    assert await metric(rig, "chat_approvals_resume_queue_depth") == 0


async def test_a_full_queue_refuses_the_click_and_changes_nothing(hold: Hold) -> None:
    """One worker, room for one waiting click: the third click is refused with a clear ephemeral
    message, its card is untouched and stays answerable, and the refusal is counted."""
    rig = await SlackRig(
        factory=held_factory(hold), server={"resume_workers": 1, "resume_queue": 1, "resume_patience": None}
    ).start()
    try:
        cs = await cards(rig, 3)
        assert await rig.click(rig.click_payload(cs[0])) == (200, "")
        await hold.wait_entered()
        assert await rig.click(rig.click_payload(cs[1])) == (200, "")  # waits in the queue
        before = await rig.snapshot(card_id_of(cs[2]))
        assert await rig.click(rig.click_payload(cs[2])) == (200, "")  # Slack is always acked: never a 5xx
        await rig.standin.wait_for(lambda s: bool(s.of("chat.postEphemeral")))
        (busy,) = rig.standin.of("chat.postEphemeral")
        assert busy.args["user"] == OWNER and wording.TOO_MANY_CLICKS in busy.args["text"]
        assert busy.args.get("thread_ts") == cs[2].args["thread_ts"]
        assert await rig.snapshot(card_id_of(cs[2])) == before
        assert await metric(rig, "chat_approvals_resume_queue_refused_total", {"platform": "slack"}) == 1
        assert await metric(rig, "chat_approvals_resumes_total", {"platform": "slack", "outcome": "busy"}) == 1
        hold.release()
        await rig.settle()
        # once there is room, the same click resumes the card
        assert await rig.click(rig.click_payload(cs[2])) == (200, "")
        await rig.settle()
        assert [i for i, state in updates_by_card(rig, cs) if state == "approved"] == [0, 1, 2]
        p = await rig.store.run(rig.store.rows.get_pointer_by_card, card_id_of(cs[2]))
        assert p is not None and p.state == "done"
    finally:
        hold.release()
        await rig.stop()


async def test_shutdown_works_off_the_queued_clicks_first(hold: Hold, tmp_path: Any) -> None:
    """No click is lost at shutdown: the server stops only after the queued clicks have resumed."""
    rig = await SlackRig(
        tmp_path, factory=held_factory(hold), server={"resume_workers": 1, "resume_patience": None}
    ).start()
    stopped = False
    try:
        cs = await cards(rig, 3)
        for c in cs:
            assert await rig.click(rig.click_payload(c)) == (200, "")
        await hold.wait_entered()
        stopping = asyncio.ensure_future(rig.stop(standin=False))
        for _ in range(20):  # the server is closing (no longer listening) while the queue still holds two
            await asyncio.sleep(0)
        assert not stopping.done()
        hold.release()
        await stopping
        stopped = True
        assert [i for i, state in updates_by_card(rig, cs) if state == "approved"] == [0, 1, 2]
        root = open_root(tmp_path, ManualClock())
        try:
            for c in cs:
                p = await root.store.run(root.store.rows.get_pointer_by_card, card_id_of(c))
                assert p is not None and p.state == "done"
        finally:
            root.close()
    finally:
        hold.release()
        if not stopped:
            await rig.stop(standin=False)
        await rig.standin.stop()


async def test_a_resume_waiting_past_its_patience_lets_the_next_click_start(hold: Hold) -> None:
    """One worker, patience 0: the held resume (as if waiting on its model) stops counting as the
    worker, so the next click resumes while it is still held; slow resumes do not cap throughput."""
    rig = await SlackRig(factory=held_factory(hold), server={"resume_workers": 1, "resume_patience": 0}).start()
    try:
        cs = await cards(rig, 2)
        assert await rig.click(rig.click_payload(cs[0])) == (200, "")
        await hold.wait_entered()
        assert await rig.click(rig.click_payload(cs[1])) == (200, "")
        await rig.standin.wait_for(lambda s: (1, "approved") in updates_by_card(rig, cs))
        assert (0, "approved") not in updates_by_card(rig, cs)  # the first is still held
        hold.release()
        await rig.settle()
        assert [i for i, state in updates_by_card(rig, cs) if state == "approved"] == [1, 0]
    finally:
        hold.release()
        await rig.stop()


async def test_an_unreadable_signed_click_is_still_a_clear_4xx() -> None:
    """The click fast path reads only well-formed Approve/Deny payloads; a signed body that is not
    UTF-8 still gets its 400 from the shape check, never a 500."""
    rig = await SlackRig().start()
    try:
        status, _ = await rig.send(b"payload=\xff\xfe", "application/x-www-form-urlencoded")
        assert status == 400
        status, _ = await rig.send(b"payload=%7B%22type%22%3A", "application/x-www-form-urlencoded")
        assert status == 400
    finally:
        await rig.stop()
