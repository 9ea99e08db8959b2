"""run_script's kept results (issue 27.5: a resumed download is not fetched again) are swept once
no card can be claimed again: past the card's life, its resume deadline and the retention, on the
same horizon as the objects. File work runs off the event loop (R21)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from aiohttp import web

from chat_approvals.bots.server import _sweeper
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox import sweep_kept
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.open import open_objects, open_rows


def _kept(root: Path, name: str, mtime: float) -> Path:
    f = root / name[:2] / name[2:]
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text("Downloaded …", encoding="utf-8")
    os.utime(f, (mtime, mtime))
    return f


def test_only_results_older_than_the_horizon_go(tmp_path: Path) -> None:
    old = _kept(tmp_path, "aa" + "1" * 32, 1_000.0)
    new = _kept(tmp_path, "ab" + "2" * 32, 3_000.0)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("not the sweep's")
    os.utime(outside, (1.0, 1.0))
    (tmp_path / "ab" / "link").symlink_to(outside)  # a link is never followed or removed
    assert sweep_kept(tmp_path, older_than=2_000.0) == 1
    assert not old.exists() and not old.parent.exists()  # the emptied shard goes too
    assert new.exists() and outside.exists() and (tmp_path / "ab" / "link").is_symlink()


def test_nothing_kept_yet_sweeps_nothing(tmp_path: Path) -> None:
    assert sweep_kept(tmp_path / "runs", older_than=10**12) == 0


async def test_the_servers_sweeper_sweeps_the_kept_results(tmp_path: Path) -> None:
    clock = ManualClock(2_000_000_000.0)
    db = f"sqlite:///{tmp_path}/rows.db"
    root = bootstrap(StoreIO(open_rows(db), open_objects(db, clock)), clock=clock)
    horizon = root.approvals.sweep_horizon()
    kept = tmp_path / "runs"
    old = _kept(kept, "cd" + "3" * 32, horizon - 60)
    new = _kept(kept, "ce" + "4" * 32, horizon + 60)
    app = web.Application()
    app.cleanup_ctx.append(_sweeper(root.approvals, 3600, kept))
    runner = web.AppRunner(app)
    await runner.setup()  # the sweep loop's first pass runs at once
    try:
        for _ in range(200):  # bounded: 10 s at most
            if not old.exists():
                break
            await asyncio.sleep(0.05)
        assert not old.exists() and new.exists()
    finally:
        await runner.cleanup()
        root.close()
