"""Physical expiry: rows and objects are kept `retention` past their logical expiry, then swept."""

from __future__ import annotations

from chat_approvals.core.approvals import Approvals
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from tests.conftest import click


async def test_sweep_keeps_rows_and_objects_for_the_retention_then_removes_them(
    approvals: Approvals, store: StoreIO, clock: ManualClock
) -> None:
    turn = await approvals.run_turn(chat="c", user="u", text="fetch https://a.example/x", platform="http")
    assert turn.offer is not None
    await click(approvals, turn.offer, approved=True)
    snapshot_key = f"snapshots/{turn.offer.card.card_id}.json"
    clock.advance(6 * 86400)  # past every logical expiry, within the retention
    assert await approvals.sweep() == 0
    assert store.rows.get_pointer("c") is not None and store.objects.get_key(snapshot_key) is not None
    clock.advance(2 * 86400)
    removed = await approvals.sweep()
    assert removed >= 4  # pointer, grant, audit rows, snapshot and answer objects
    assert store.rows.get_pointer("c") is None
    assert store.rows.list_audit("c") == []
    assert store.objects.get_key(snapshot_key) is None
    # A replay after the sweep is an unknown card, not a crash.
    res = await click(approvals, turn.offer, approved=True)
    assert res.outcome == "unknown"
