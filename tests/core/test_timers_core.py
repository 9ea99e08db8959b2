"""Issue 33 in the core, on real SQLite with the injected clock: the expiry timer denies an
unanswered card once and the paused turn is told; it never runs a card again that kept killing
its workers (R11's claim cap: only expired); a timer of a replaced card does nothing."""

from __future__ import annotations

from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ClaimRead
from chat_approvals.core.protocol.timers import TimerFired
from chat_approvals.store.aio import StoreIO
from tests.conftest import click

URL = "please fetch https://data.example.org/table.csv"


async def _card(approvals: Approvals) -> tuple[str, str]:
    turn = await approvals.run_turn(chat="c", user="u", text=URL, platform="http")
    assert turn.offer is not None
    return turn.offer.card.card_id, turn.offer.secret


async def test_the_expiry_timer_denies_once_and_the_turn_is_told(approvals: Approvals, clock: ManualClock) -> None:
    fired: list[TimerFired] = []

    async def seen(e: TimerFired) -> None:
        fired.append(e)

    approvals.on_timer(seen)
    card_id, _ = await _card(approvals)
    clock.advance(approvals.settings.card_expiry - 11)
    assert await approvals.fire_timers() == 0
    clock.advance(2)  # within the lead before the expiry
    assert await approvals.fire_timers() == 1
    assert await approvals.fire_timers() == 0  # once
    (event,) = fired
    assert event.kind == "expire" and event.result is not None and event.result.status == "answered"
    assert "Not downloaded" in event.result.text  # the paused turn went on with the deny
    kinds = [(e.kind, e.actor) for e in await approvals.audit("c") if e.card_id == card_id]
    assert kinds.count(("expired", "system")) == 1 and kinds.count(("answered", "system")) == 1


async def test_a_card_at_its_claim_cap_is_only_expired_never_run_again(
    approvals: Approvals, store: StoreIO, clock: ManualClock
) -> None:
    card_id, _ = await _card(approvals)
    settings = approvals.settings
    for _ in range(settings.claim_cap):  # workers that claimed it and died (their leases lapse)
        p = store.rows.get_pointer("c")
        assert p is not None
        read = ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count)
        now = clock.now()
        assert store.rows.claim(read, worker="dead", now=now, lease_until=now + 1, resume_deadline=now + 60)
        clock.advance(2)
    clock.set(store.rows.get_pointer("c").created_at + settings.card_expiry - 5)  # type: ignore[union-attr]
    assert await approvals.fire_timers() == 1
    kinds = [(e.kind, e.actor) for e in await approvals.audit("c") if e.card_id == card_id]
    assert ("expired", "system") in kinds and ("answered", "system") not in kinds
    assert store.rows.get_pointer("c").state == "expired"  # type: ignore[union-attr]


async def test_a_timer_of_an_answered_card_does_nothing(approvals: Approvals, clock: ManualClock) -> None:
    turn = await approvals.run_turn(chat="c", user="u", text=URL, platform="http")
    res = await click(approvals, turn.offer)
    assert res.outcome == "resumed"
    clock.advance(approvals.settings.card_expiry)
    assert await approvals.fire_timers() == 1  # fired (once), and found nothing waiting
    kinds = [e.kind for e in await approvals.audit("c") if turn.offer and e.card_id == turn.offer.card.card_id]
    assert "expired" not in kinds and kinds.count("answered") == 1
