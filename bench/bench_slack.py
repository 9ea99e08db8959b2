"""Slack click latency on the embedded store (SQLite + files) with the offline scripted model. By hand:

    .venv/bin/python -m bench.bench_slack [--single 50] [--concurrent 100] [--server inprocess|process]
                                          [--replicas N] [--pin]

`--server inprocess` (the default, as the figures recorded before 2026-12-03): everything runs in one
process on 127.0.0.1: the server with the Slack front end, a signed-request client, and the Web API
stand-in (tests/support/slack_standin.py). `--server process`: the server is `chat-approvals serve` in its own
OS process, configured only through SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET and
CHAT_APPROVALS_SLACK_API_URL (bench/server_process.py); this process keeps the client and the stand-in,
which play Slack. `--replicas N` (with `--server process`): N such processes on one SQLite store; the
client spreads the messages that make cards round-robin over them and sends each click to the replica
after the one that took its card's message (so it resumes from the stored snapshot), as a balancer
would usually do; below the table each replica's clicks by outcome, claims and turns (its /metrics),
and a check that every clicked card was resumed exactly once. `--pin` (with `--server process`):
replica i, and the ack floor's replica i, are pinned to core i round the machine's
(CHAT_APPROVALS_CPUS, as `serve --cpus` reads it); below the table, the CPUs each replica ran on,
read from /proc. Measured per click:
  click -> ack           the signed block_actions POST until its HTTP 200 (what Slack's 3 s is about)
  click -> card updated  until the stand-in records the chat.update that shows the outcome
"1 click" sends clicks one at a time, each on its own card; "N concurrent" sends N clicks at once, each
on its own card. The server queues resume work (bots/admission.py: CHAT_APPROVALS_RESUME_WORKERS at
once, default 2). Then the same clicks, signed again, go the same way to the ack floor
(bench/ack_floor.py: the signature check and a 200, nothing else), in the same arrangement: the least
ack p99 any server could show here, and so the least ratio this server could. Under the ratios, the
CPU the burst used per click (servers' event loops, all processes; read from /proc) and the earliest
its median card can be updated on this machine's cores (bench/cpu_bound.py): about the least card
updated ratio this arrangement can show here. Each click's signed body
is built before the timing starts, and the stand-in's calls are read incrementally, so the client's own
work in this process stays small (it still shares the process, the loop and the cores with the server:
say so next to the figures). Not a test: the machine is shared; compare the ratios within one run, not
absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp.test_utils import TestServer

from bench.ack_floor import floor_app
from bench.cpu_bound import OUT, WITHIN, Bound, CpuMeter, bound_lines, least_median
from bench.server_process import (
    Balancer,
    Served,
    add_server_args,
    check_replicas,
    cpu_lines,
    describe,
    run_replicas,
    serve_replicas,
    settle,
    tallies,
    tally_lines,
)
from chat_approvals.bots.server import freeze_heap
from tests.support import slack_payloads as P
from tests.support.slack_rig import SlackRig, buttons
from tests.support.slack_standin import Call, SlackStandIn

HOST = re.compile(r"//(h\d+)\.example\.org/")  # the host in a card's message names the card


class ServedSlackRig(SlackRig):
    """SlackRig's signed client and Web API stand-in, against `chat-approvals serve` running as its
    own process, or as N replicas on one store (bench/server_process.py), instead of an app in this
    process. Every request SlackRig sends takes `url`, the balancer's next replica."""

    def __init__(self, replicas: int = 1, pin: bool = False) -> None:
        super().__init__()
        self.replicas = replicas
        self.pin = pin
        self.members: list[Served] = []
        self.balancer = Balancer([])
        self.took = 0  # the replica that took the last request
        self.home: dict[str, int] = {}  # a card's host -> the replica that took its message
        self._stack = contextlib.AsyncExitStack()

    async def start(self, standin: SlackStandIn | None = None) -> ServedSlackRig:
        assert standin is None
        await self.standin.start()
        self._stack.push_async_callback(self.standin.stop)  # stopped after the server, which calls it
        env = {
            "SLACK_BOT_TOKEN": "xoxb-bench-token",
            "SLACK_SIGNING_SECRET": P.SIGNING_SECRET,
            "CHAT_APPROVALS_SLACK_API_URL": self.standin.api_url,
        }
        try:
            self.members = await self._stack.enter_async_context(serve_replicas(self.replicas, env, pin=self.pin))
        except BaseException:
            await self._stack.aclose()
            raise
        self.balancer = Balancer([m.base_url for m in self.members])
        self.port = urlsplit(self.members[0].base_url).port or 0
        self.session = aiohttp.ClientSession()
        return self

    @property
    def url(self) -> str:
        self.took = self.balancer.next()
        return f"{self.members[self.took].base_url}/slack/events"

    async def dm(self, text: str, **kw: Any) -> tuple[int, str]:
        done = await super().dm(text, **kw)
        for host in HOST.findall(text):
            self.home[host] = self.took
        return done

    def click_url(self, card: Call) -> str:
        """The replica after the one that took the card's message (Balancer.after)."""
        (host,) = set(HOST.findall(json.dumps(card.args.get("blocks"))))
        return f"{self.members[self.balancer.after(self.home[host])].base_url}/slack/events"

    async def stop(self, *, standin: bool = True) -> None:
        if self.session is not None:
            await self.session.close()
        await self._stack.aclose()
        if self._tmp is not None:
            self._tmp.cleanup()

    async def settle(self) -> None:
        assert self.session is not None
        await settle(self.members, self.session, lambda: len(self.standin.calls))

    async def report(self, clicked: int) -> tuple[list[str], bool]:
        """Each replica's tallies, and whether every clicked card resumed exactly once."""
        assert self.session is not None
        counts = await tallies(self.session, self.members)
        resumed = sum(c["chat_approvals_resumes"]["resumed"] for c in counts)
        other = sum(n for c in counts for k, n in c["chat_approvals_resumes"].items() if k != "resumed")
        ok = resumed == clicked and not other
        verdict = "ok" if ok else "NOT exactly once"
        check = (
            f"exactly once: {resumed} resumed, {other} other outcomes, for {clicked} cards clicked once each: {verdict}"
        )
        return [*cpu_lines(self.members), *tally_lines(counts), check], ok


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


class Outcomes:
    """When each card's message was first updated to "Approved": the stand-in's calls are read once
    each, as they come (re-reading them all on every call made the client quadratic)."""

    def __init__(self, standin: SlackStandIn) -> None:
        self.standin = standin
        self.read = 0
        self.at: dict[str, float] = {}

    def scan(self) -> dict[str, float]:
        calls = self.standin.calls
        for c in calls[self.read :]:
            ts = c.args.get("ts")
            if c.method == "chat.update" and ts not in self.at and "Approved" in json.dumps(c.args.get("blocks")):
                self.at[str(ts)] = c.at
        self.read = len(calls)
        return self.at

    async def wait(self, cards: list[Call], timeout: float) -> list[float]:
        want = [str(c.result["ts"]) for c in cards]
        await self.standin.wait_for(lambda s: all(ts in self.scan() for ts in want), timeout=timeout)
        return [self.at[ts] for ts in want]


Request = tuple[bytes, dict[str, str]]  # a signed click: its body and headers


def signed_click(rig: SlackRig, card: Call) -> Request:
    """The click's request, built and signed before its timing starts (Slack's work, not ours)."""
    body, ctype = P.interactive_body(rig.click_payload(card))
    return body, P.signed_headers(body, ctype)


def resigned(request: Request) -> Request:
    """The same body signed now (the floor runs after the real clicks; a signature ages in 300 s)."""
    body, headers = request
    return body, P.signed_headers(body, headers["Content-Type"])


def click_url(rig: SlackRig, card: Call) -> str:
    return rig.click_url(card) if isinstance(rig, ServedSlackRig) else rig.url


async def timed_click(rig: SlackRig, url: str, request: Request) -> tuple[float, float]:
    assert rig.session is not None
    return await timed_post(rig.session, url, request)


async def timed_post(session: aiohttp.ClientSession, url: str, request: Request) -> tuple[float, float]:
    body, headers = request
    t0 = time.monotonic()
    async with session.post(url, data=body, headers=headers) as r:
        status = r.status
        await r.read()
    acked = time.monotonic()
    assert status == 200, status
    return t0, acked


Rows = list[tuple[str, int, list[float], list[float]]]
FLOOR = "ack floor"  # bench/ack_floor.py: the signature check and a 200, nothing else


async def run(
    single: int, concurrent: int, server: str = "inprocess", replicas: int = 1, pin: bool = False
) -> tuple[Rows, Bound, list[str], bool]:
    """The rows, the CPU bound of the burst (bench/cpu_bound.py); with `--server process`, each
    replica's tallies and the exactly-once check."""
    rig = await (ServedSlackRig(replicas, pin) if server == "process" else SlackRig()).start()
    meter = CpuMeter([m.pid for m in rig.members] if isinstance(rig, ServedSlackRig) else [os.getpid()])
    if server == "inprocess":
        freeze_heap()  # as `chat-approvals serve` does once started (bots/server.py)
    outcomes = Outcomes(rig.standin)
    rows = []
    notes: list[str] = []
    ok = True
    sent: list[Request] = []
    burst: list[Request] = []
    try:
        cards = await make_cards(rig, single)
        acks, updates = [], []
        for card in cards:
            sent.append(signed_click(rig, card))
            t0, acked = await timed_click(rig, click_url(rig, card), sent[-1])
            (done,) = await outcomes.wait([card], timeout=60)
            acks.append(acked - t0)
            updates.append(done - t0)
            await rig.settle()  # the click's tail (the agent's reply) ends before the next click
        rows.append(("1 click at a time", single, acks, updates))

        cards = await make_cards(rig, concurrent)
        requests = [(click_url(rig, c), signed_click(rig, c)) for c in cards]
        burst = [r for _, r in requests]
        with meter.burst(concurrent):  # until the last card is updated
            timings = await asyncio.gather(*(timed_click(rig, u, r) for u, r in requests))
            done_at = await outcomes.wait(cards, timeout=120)
        await rig.settle()
        acks = [a - t0 for t0, a in timings]
        updates = [d - t0 for d, (t0, _) in zip(done_at, timings, strict=True)]
        rows.append((f"{concurrent} concurrent clicks", concurrent, acks, updates))
        assert all(not buttons(c.args.get("blocks") or []) for c in rig.standin.of("chat.update"))
        if isinstance(rig, ServedSlackRig):
            notes, ok = await rig.report(single + concurrent)
    finally:
        await rig.stop()
    rows += await floor(sent, burst, server, replicas, pin)
    return rows, least_median(meter, concurrent), notes, ok


@contextlib.asynccontextmanager
async def floor_servers(server: str, replicas: int, pin: bool = False) -> AsyncIterator[list[str]]:
    """bench/ack_floor.py's server, arranged as the real one was: in this process, or N processes
    (pinned as they were)."""
    if server == "inprocess":
        test_server = TestServer(floor_app(), host="127.0.0.1")
        await test_server.start_server()
        try:
            yield [str(test_server.make_url("/slack/events"))]
        finally:
            await test_server.close()
        return

    def argv(_folder: Path, port: int) -> list[str]:
        return [sys.executable, "-m", "bench.ack_floor", "--port", str(port)]

    root = str(Path(__file__).resolve().parents[1])  # the processes run in a temporary directory
    async with run_replicas(replicas, {"PYTHONPATH": root}, argv, pin=pin) as members:
        yield [f"{m.base_url}/slack/events" for m in members]


async def floor(single: list[Request], burst: list[Request], server: str, replicas: int, pin: bool = False) -> Rows:
    """The same clicks, re-signed, from a new client of the same kind, against the ack floor: one
    at a time, then all at once (new connections, as in the real burst). Its two rows."""
    async with floor_servers(server, replicas, pin) as urls, aiohttp.ClientSession() as session:
        balancer = Balancer(urls)
        acks = []
        for request in single:
            t0, acked = await timed_post(session, urls[balancer.next()], resigned(request))
            acks.append(acked - t0)
        requests = [(urls[balancer.next()], resigned(r)) for r in burst]
        timings = await asyncio.gather(*(timed_post(session, u, r) for u, r in requests))
    return [
        (f"{FLOOR}, 1 at a time", len(single), acks, []),
        (f"{FLOOR}, {len(burst)} concurrent", len(burst), [a - t0 for t0, a in timings], []),
    ]


def table(rows: Rows) -> str:
    lines = [
        "| scenario | clicks | click->ack p50 | click->ack p99 | click->card updated p50 | click->card updated p99 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, n, acks, updates in rows:
        cells = [pct(acks, 0.5), pct(acks, 0.99)] + ([pct(updates, 0.5), pct(updates, 0.99)] if updates else [])
        shown = [f"{v * 1000:.1f} ms" for v in cells] + ["-"] * (4 - len(cells))  # the floor updates no card
        lines.append(f"| {name} | {n} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


def ratios(rows: Rows, bound: Bound) -> str:
    """Issue 12's targets, as ratios within this run (absolute times swing from run to run), and
    the least each could be here: the ack floor's, and the CPU bound's for the card updated."""
    (_, _, acks1, updates1), (name, n, acks_n, updates_n), (_, _, floor1, _), (_, _, floor_n, _) = rows
    update = pct(updates_n, 0.5) / pct(updates1, 0.5)
    ack = pct(acks_n, 0.99) / pct(acks1, 0.5)
    # This server's ack p99 in the burst cannot be below the floor's (it does all the floor does and
    # more, for the same clicks from the same client), up to the noise between the two bursts: so
    # neither can its ratio be below `least`.
    least = pct(floor_n, 0.99) / pct(acks1, 0.5)

    def verdict(x: float, met: str = "met", unmet: str = "not met") -> str:
        if n != 100:
            return "set for 100 concurrent clicks"
        return met if x <= 15 else unmet

    return "\n".join(
        [
            f"click->card updated p50, {name} / 1 at a time: {update:.1f}x (target <= 15x: {verdict(update)})",
            f"click->ack p99, {name} / ack p50 1 at a time: {ack:.1f}x (target <= 15x: {verdict(ack)})",
            f"{FLOOR}: click->ack p99, {name} / its own ack p50 1 at a time: "
            f"{pct(floor_n, 0.99) / pct(floor1, 0.5):.1f}x",
            f"{FLOOR}: its click->ack p99, {name} / this server's ack p50 1 at a time: {least:.1f}x "
            f"(the least this server's ack ratio can be here, up to run-to-run noise: the ack target is "
            f"{verdict(least, 'within reach', 'out of reach on this machine')})",
            *bound_lines(
                bound,
                pct(updates1, 0.5),
                f"click->card updated p50, {name}",
                lambda x: verdict(x, WITHIN, OUT),
            ),
        ]
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--single", type=int, default=50, help="clicks sent one at a time (default 50)")
    p.add_argument("--concurrent", type=int, default=100, help="clicks sent at once (default 100)")
    add_server_args(p)
    args = p.parse_args()
    check_replicas(args.server, args.replicas, args.pin)
    logging.basicConfig(level=logging.WARNING)
    rows, bound, notes, ok = asyncio.run(run(args.single, args.concurrent, args.server, args.replicas, args.pin))
    print(describe(args.server, args.replicas, args.pin))
    print()
    print(table(rows))
    print()
    print(ratios(rows, bound))
    if notes:
        print()
        print("\n".join(notes))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
