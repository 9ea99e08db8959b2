"""Slack click latency on the embedded store (SQLite + files) with the offline scripted model. By hand:

    .venv/bin/python -m bench.bench_slack [--single 50] [--concurrent 100]

Everything runs in one process on 127.0.0.1: the server with the Slack front end, a signed-request
client, and the Web API stand-in (tests/slack_standin.py). Measured per click:
  click -> ack           the signed block_actions POST until its HTTP 200 (what Slack's 3 s is about)
  click -> card updated  until the stand-in records the chat.update that shows the outcome
"1 click" sends clicks one at a time, each on its own card; "N concurrent" sends N clicks at once,
each on its own card (N resumes in parallel). Not a test: the machine is shared; numbers are indicative.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time

from tests.slack_rig import SlackRig, buttons
from tests.slack_standin import Call


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def make_cards(rig: SlackRig, n: int) -> list[Call]:
    before = len(rig.card_calls())
    for i in range(n):
        await rig.dm(f"download https://h{before + i}.example.org/data.csv")
    await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= before + n, timeout=120)
    await rig.settle()
    return rig.card_calls()[before:]


def outcome_at(rig: SlackRig, card: Call) -> float | None:
    for c in rig.standin.of("chat.update"):
        if c.args["ts"] == card.result["ts"] and "Approved" in json.dumps(c.args.get("blocks")):
            return c.at
    return None


async def timed_click(rig: SlackRig, card: Call) -> tuple[float, float]:
    payload = rig.click_payload(card)
    t0 = time.monotonic()
    status, _ = await rig.click(payload)
    acked = time.monotonic()
    assert status == 200, status
    return t0, acked


async def run(single: int, concurrent: int) -> list[tuple[str, int, list[float], list[float]]]:
    rig = await SlackRig().start()
    rows = []
    try:
        cards = await make_cards(rig, single)
        acks, updates = [], []
        for card in cards:
            t0, acked = await timed_click(rig, card)
            await rig.standin.wait_for(lambda s, c=card: outcome_at(rig, c) is not None, timeout=60)
            acks.append(acked - t0)
            updates.append((outcome_at(rig, card) or 0.0) - t0)
        rows.append(("1 click at a time", single, acks, updates))

        cards = await make_cards(rig, concurrent)
        timings = await asyncio.gather(*(timed_click(rig, c) for c in cards))
        await rig.standin.wait_for(lambda s: all(outcome_at(rig, c) is not None for c in cards), timeout=120)
        await rig.settle()
        acks = [a - t0 for t0, a in timings]
        updates = [(outcome_at(rig, c) or 0.0) - t0 for c, (t0, _) in zip(cards, timings, strict=True)]
        rows.append((f"{concurrent} concurrent clicks", concurrent, acks, updates))
        assert all(not buttons(c.args.get("blocks") or []) for c in rig.standin.of("chat.update"))
    finally:
        await rig.stop()
    return rows


def table(rows: list[tuple[str, int, list[float], list[float]]]) -> str:
    lines = [
        "| scenario | clicks | click->ack p50 | click->ack p99 | click->card updated p50 | click->card updated p99 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, n, acks, updates in rows:
        cells = [pct(acks, 0.5), pct(acks, 0.99), pct(updates, 0.5), pct(updates, 0.99)]
        lines.append(f"| {name} | {n} | " + " | ".join(f"{v * 1000:.1f} ms" for v in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--single", type=int, default=50, help="clicks sent one at a time (default 50)")
    p.add_argument("--concurrent", type=int, default=100, help="clicks sent at once (default 100)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(table(asyncio.run(run(args.single, args.concurrent))))


if __name__ == "__main__":
    main()
