"""Approval-cycle benchmark on the embedded store with the offline model. Run by hand:

    .venv/bin/python -m bench.bench_core [--cycles 200]

Prints a table. Not a test: the machine is shared and noisy; numbers are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter as Tally
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp.test_utils import TestServer

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.core.agent import ScriptedModel, prepare, request_approval
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.models import Answer, Grant
from chat_approvals.core.observe import Metrics, observe
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows

TEXT = "please fetch https://data.example.org/table.csv"
TOKEN = "bench"


class Counting:
    """Wraps a store and counts every method call (each is one round trip to the backend)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Tally[str] = Tally()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr) or name == "atomic":  # a transaction's bracket, not a round trip
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


class ModelTally:
    def __init__(self) -> None:
        self.models: list[ScriptedModel] = []
        self.tool_bodies = 0

    def factory(self) -> Any:
        from strands import Agent

        def make() -> Agent:
            model = ScriptedModel()
            self.models.append(model)
            agent = prepare(Agent(model=model, tools=[request_approval], callback_handler=None))
            agent.hooks.add_callback(_before_tool_type(), self._count)
            return agent

        return make

    def _count(self, event: Any) -> None:
        self.tool_bodies += 1

    def calls(self) -> int:
        return sum(m.calls for m in self.models)


def _before_tool_type() -> Any:
    from strands.hooks import BeforeToolCallEvent

    return BeforeToolCallEvent


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def interrupt_vs_rerun(root: Path) -> list[tuple[str, str, str]]:
    rows = Counting(SqliteRows(root / "a.db"))
    objects = Counting(FileObjects(root / "o"))
    tally = ModelTally()
    a_root = bootstrap(StoreIO(rows, objects), agent_factory=tally.factory())  # type: ignore[arg-type]
    a = a_root.approvals
    turn = await a.run_turn(chat="c1", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    pointer = rows.get_pointer("c1")
    snap = pointer.snapshot.size
    rows.calls.clear()
    objects.calls.clear()
    turn = await a.run_turn(chat="c2", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    card_trips = sum(rows.calls.values()), sum(objects.calls.values())
    rows.calls.clear()
    objects.calls.clear()
    res = await a.resume(
        card_id=turn.offer.card.card_id,
        user="u",
        secret=turn.offer.secret,
        answer=Answer(approved=True),
    )
    assert res.outcome == "resumed"
    click_trips = sum(rows.calls.values()), sum(objects.calls.values())
    click_detail = dict(rows.calls) | {f"objects.{k}": v for k, v in objects.calls.items()}

    # One interrupted cycle: model calls and tool bodies.
    t1 = ModelTally()
    b = bootstrap(StoreIO(SqliteRows(root / "b.db"), FileObjects(root / "ob")), agent_factory=t1.factory()).approvals
    turn = await b.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert turn.offer is not None
    await b.resume(
        card_id=turn.offer.card.card_id,
        user="u",
        secret=turn.offer.secret,
        answer=Answer(approved=True),
    )
    interrupt_calls, interrupt_tools = t1.calls(), t1.tool_bodies

    # The rejected design: end the turn at the refusal, then run it again with the host approved.
    t2 = ModelTally()
    c_root = bootstrap(StoreIO(SqliteRows(root / "c.db"), FileObjects(root / "oc")), agent_factory=t2.factory())
    c = c_root.approvals
    first = await c.run_turn(chat="c", user="u", text=TEXT, platform="http", unattended=True)  # ends at the refusal
    now = time.time()
    c_root.store.rows.put_grant(
        Grant(
            user="u", chat="c", kind="site", name="data.example.org", card_id="x", created_at=now, expires_at=now + 60
        ),
        now + 60,
    )
    second = await c.run_turn(chat="c", user="u", text=TEXT, platform="http")
    assert first.status == second.status == "answered"
    rerun_calls, rerun_tools = t2.calls(), t2.tool_bodies

    protocol_min_rows = (
        "card: rows 2 (open-request read, conditional pointer write), objects 1 (snapshot PUT); "
        "click: rows 3 + 1 per grant (read, claim, finish), objects 2 (snapshot GET, answer PUT)"
    )
    return [
        ("model calls per cycle", f"{interrupt_calls} (interrupt)", f"{rerun_calls} (re-run the turn)"),
        ("tool calls per cycle", f"{interrupt_tools} (interrupt)", f"{rerun_tools} (re-run the turn)"),
        ("snapshot bytes (one-tool turn)", str(snap), ""),
        ("store round trips: post the card", f"rows {card_trips[0]}, objects {card_trips[1]}", ""),
        ("store round trips: the click", f"rows {click_trips[0]}, objects {click_trips[1]}", str(click_detail)),
        ("protocol minimum", protocol_min_rows, "the rest: grants and refusals reads, audit appends"),
    ]


async def http_latency(root: Path, cycles: int) -> list[tuple[str, str, str]]:
    # As `serve` runs it: every store call timed and counted (/metrics), the facade's counters.
    metrics = Metrics()
    rows, objects = observe(SqliteRows(root / "h.db"), metrics), observe(FileObjects(root / "oh"), metrics)
    a_root = bootstrap(StoreIO(rows, objects), metrics=metrics)
    a = a_root.approvals
    server = TestServer(build_app(a, ServerConfig(api_token=TOKEN), sweep=False), host="127.0.0.1")
    await server.start_server()
    base = str(server.make_url("")).rstrip("/")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    out: list[tuple[str, str, str]] = []
    try:
        async with aiohttp.ClientSession() as s:

            async def card(chat: str) -> dict[str, Any]:
                async with s.post(
                    f"{base}/v1/turns", json={"chat": chat, "user": "u", "text": TEXT}, headers=headers
                ) as r:
                    return (await r.json())["card"]  # type: ignore[no-any-return]

            async def click(c: dict[str, Any]) -> tuple[float, str]:
                body = {
                    "user": "u",
                    "secret": c["secret"],
                    "responses": [{"interruptId": c["card_id"], "status": "resolved", "payload": {"approved": True}}],
                }
                t = time.perf_counter()
                async with s.post(f"{base}/v1/interrupts/{c['card_id']}/resume", json=body, headers=headers) as r:
                    outcome = (await r.json())["outcome"]
                return (time.perf_counter() - t) * 1000, outcome

            lat: list[float] = []
            t0 = time.perf_counter()
            for i in range(cycles):
                ms, outcome = await click(await card(f"chat-{i}"))
                assert outcome == "resumed"
                lat.append(ms)
            elapsed = time.perf_counter() - t0
            out.append(
                (
                    "resume endpoint, 1 click at a time",
                    f"p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms",
                    f"{cycles} cycles",
                )
            )
            out.append(("full cycles per second (card + click)", f"{cycles / elapsed:.0f}/s", "sequential, one client"))

            c = await card("chat-concurrent")
            results = await asyncio.gather(*[click(c) for _ in range(50)])
            lat = [ms for ms, _ in results]
            tally = Tally(o for _, o in results)
            out.append(
                (
                    "50 concurrent clicks on one card",
                    f"p50 {pct(lat, 50):.1f} ms, p99 {pct(lat, 99):.1f} ms",
                    str(dict(tally)),
                )
            )
    finally:
        await server.close()
        a_root.close()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = await interrupt_vs_rerun(Path(d))
        rows += await http_latency(Path(d), args.cycles)
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure'.ljust(width)} | value | note |")
    print(f"|{'-' * (width + 2)}|---|---|")
    for name, value, note in rows:
        print(f"| {name.ljust(width)} | {value} | {note} |")


if __name__ == "__main__":
    asyncio.run(main())
