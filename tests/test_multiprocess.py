"""R10/R11/R12 across real OS processes sharing the embedded store (SQLite WAL + the objects folder)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections import Counter as Tally
from pathlib import Path

import pytest

from chat_approvals.core.agent.factory import user_factory
from chat_approvals.core.bootstrap import Root, bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Answer
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support import mp_workers
from tests.support.agents import BLOCK_ENV, WORK_LOG_ENV


def _card(db: Path, objects: Path, clock: ManualClock | None = None) -> tuple[Root[StoreIO], str, str]:
    import asyncio

    a_root = bootstrap(
        StoreIO(SqliteRows(db), FileObjects(objects)),
        clock=clock,
        agent_factory=user_factory("tests.support.agents:work_agent"),
    )
    turn = asyncio.run(a_root.approvals.run_turn(chat="chat-mp", user="alice", text="go", platform="http"))
    assert turn.offer is not None
    return a_root, turn.offer.card.card_id, turn.offer.secret


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_r10_eight_processes_racing_25_resumes_each_run_the_turn_once(tmp_path: Path) -> None:
    db, objects, log = tmp_path / "a.db", tmp_path / "objects", tmp_path / "work.log"
    a_root, card_id, secret = _card(db, objects)
    a_root.close()
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(8)
        with ctx.Pool(8) as pool:
            jobs = [
                pool.apply_async(
                    mp_workers.race, (str(db), str(objects), card_id, secret, 25, barrier, {WORK_LOG_ENV: str(log)})
                )
                for _ in range(8)
            ]
            outcomes = [o for job in jobs for o in job.get(timeout=240)]
    tally = Tally(outcomes)
    assert len(outcomes) == 200
    assert tally["resumed"] == 1, tally
    assert set(tally) <= {"resumed", "in_progress", "replayed"}, tally
    lines = log.read_text().splitlines()
    assert len(lines) == 1, lines  # the post-approval work happened once
    pointer = SqliteRows(db).get_pointer("chat-mp")
    assert pointer is not None and pointer.state == "done" and pointer.claim_count == 1


def _wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_r11_worker_killed_mid_resume_then_the_next_click_after_the_lease_resumes(tmp_path: Path) -> None:
    db, objects, log, block = tmp_path / "a.db", tmp_path / "objects", tmp_path / "work.log", tmp_path / "block"
    a_root, card_id, secret = _card(db, objects)
    a_root.close()
    block.write_text("hold")
    ctx = mp.get_context("spawn")
    worker = ctx.Process(
        target=mp_workers.resume_once,
        args=(str(db), str(objects), card_id, secret, {WORK_LOG_ENV: str(log), BLOCK_ENV: str(block)}),
    )
    worker.start()
    try:
        assert _wait_for(lambda: log.exists() and log.read_text().strip(), 60), "the worker never reached its work"
        os.kill(worker.pid, signal.SIGKILL)  # type: ignore[arg-type]
        worker.join(timeout=10)
    finally:
        if worker.is_alive():
            worker.kill()
    block.unlink()
    rows = SqliteRows(db)
    claimed = rows.get_pointer("chat-mp")
    assert claimed is not None and claimed.state == "claimed" and claimed.claim_count == 1
    import asyncio

    clock = ManualClock(start=time.time())
    b_root = bootstrap(
        StoreIO(SqliteRows(db), FileObjects(objects)),
        clock=clock,
        agent_factory=user_factory("tests.support.agents:work_agent"),
    )
    b = b_root.approvals
    os.environ.pop(BLOCK_ENV, None)
    res = asyncio.run(b.resume(card_id=card_id, user="alice", secret=secret, answer=Answer(approved=True)))
    assert res.outcome == "in_progress"  # the dead worker's lease is still live
    clock.advance(31)
    res = asyncio.run(b.resume(card_id=card_id, user="alice", secret=secret, answer=Answer(approved=True)))
    assert res.outcome == "resumed" and res.result is not None and res.result.text.startswith("work done")
    done = rows.get_pointer("chat-mp")
    assert done is not None and done.state == "done" and done.claim_count == 2
    b_root.close()
