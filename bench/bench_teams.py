"""Teams invoke-to-response latency on the embedded store (SQLite + files), offline model. By hand:

    .venv/bin/python -m bench.bench_teams [--samples 100] [--rounds 4] [--server inprocess|process]
                                          [--replicas N] [--pin]

The real server (Teams mounted at /api/messages) on 127.0.0.1, a mock Bot Connector as serviceUrl.
`--server inprocess` (the default, as the figures recorded before 2026-12-03): the server runs in this
process. `--server process`: it is `chat-approvals serve` in its own OS process (bench/server_process.py),
with no Microsoft App id (so /api/messages is the unauthenticated, loopback-only endpoint the
Playground uses) and CHAT_APPROVALS_TEAMS_INVOKE_BUDGET=10 as the in-process server's budget; this
process keeps the client and the connector. `--replicas N` (with `--server process`): N such processes
on one SQLite store; the client sends the messages that make cards round-robin over them, each click
on its own card to the replica after the one that took the card's message (so it resumes from the
stored snapshot), and the clicks racing on one card round-robin (the race spans the replicas). Below
the table: each replica's clicks by outcome, claims and turns (its /metrics), and a check that every
clicked card was resumed exactly once. `--pin` (with `--server process`): replica i runs with `serve
--cpus` on core i round the machine's (one replica per core, docs/operating.md); below the table,
the CPUs each replica ran on, read from /proc.
Each click is an `adaptiveCard/action` invoke POSTed the way the Playground sends it; the time is
from sending it to reading the invoke response (the card that replaces the clicked one), which
includes the claim, the resumed agent turn and the reply posted to the connector.

Rows: 1 click at a time; 50 concurrent clicks on 50 cards (50 chats); 50 concurrent clicks racing
on ONE card (one resumes, the rest hear "in progress"/"answered"). Prints a table, the ratio, and
under it the CPU the burst on 50 cards used per click (servers' event loops, all processes; read from
/proc) and the earliest its median click can be done on this machine's cores (bench/cpu_bound.py):
about the least ratio this arrangement can show here. Each invoke is
built before its timing starts; with `--server inprocess` the client, the connector and the server
share one process, one loop and the cores (say so next to the figures). The server queues resume
work (bots/admission.py, CHAT_APPROVALS_RESUME_WORKERS at once, default 2). Not a test: the
machine is shared and noisy; compare the ratios within one run, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench.cpu_bound import Bound, CpuMeter, bound_lines, least_median, reach
from bench.server_process import (
    Balancer,
    Served,
    add_server_args,
    check_replicas,
    cpu_lines,
    describe,
    serve_replicas,
    settle,
    tallies,
    tally_lines,
)
from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app, freeze_heap
from chat_approvals.bots.teams_bot import TEAMS, TeamsConfig
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.open import open_objects, open_rows

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "teams"


@functools.cache
def _fixture(name: str) -> str:
    return json.dumps(json.loads((FIXTURES / name).read_text())["activity"])


def fixture(name: str) -> dict[str, Any]:
    return dict(json.loads(_fixture(name)))


class Connector:
    """Answers like the Playground's mock connector; remembers the last card posted per conversation."""

    def __init__(self) -> None:
        self.cards: dict[str, dict[str, Any]] = {}
        self.n = 1796220926142

    async def handle(self, req: web.Request) -> web.Response:
        body = await req.json() if req.can_read_body else None
        parts = req.path.split("/")
        if req.method == "POST" and body:
            for att in body.get("attachments") or []:
                if any(a.get("verb") == "approve" for a in att["content"].get("actions", [])):
                    self.cards[parts[4]] = att["content"]
        if req.method == "GET":
            return web.json_response({"id": parts[-1], "name": "Alex Wilber"})
        self.n += 1
        return web.json_response({"id": str(self.n)}, status=201 if req.method == "POST" else 200)


def pct(values: list[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


class Rig:
    """The client, and the load balancer over the server's /api/messages URLs (one per replica)."""

    def __init__(
        self, http: aiohttp.ClientSession, bot_urls: list[str], service_url: str, connector: Connector
    ) -> None:
        self.http, self.bot_urls, self.service_url, self.connector = http, bot_urls, service_url, connector
        self.balancer = Balancer(bot_urls)
        self.home: dict[str, int] = {}  # conversation -> the replica that took its message

    def activity(self, name: str, conversation: str, **over: Any) -> dict[str, Any]:
        act = fixture(name)
        act["conversation"] = {**act["conversation"], "id": conversation}
        act.update(serviceUrl=self.service_url, id=str(uuid.uuid4()), **over)
        return act

    async def card(self) -> tuple[str, dict[str, Any]]:
        conv = f"bench-{uuid.uuid4().hex[:12]}"
        act = self.activity("playground-message-text.json", conv, text="please fetch https://data.example.org/t.csv")
        self.home[conv] = i = self.balancer.next()
        async with self.http.post(self.bot_urls[i], json=act) as resp:
            assert resp.status == 201, resp.status
        card = self.connector.cards[conv]
        data = next(a["data"] for a in card["actions"] if a["verb"] == "approve")
        return conv, data

    def invoke(self, conv: str, data: dict[str, Any]) -> bytes:
        """The click's request body, built before its timing starts (the client's work, not ours)."""
        act = self.activity("playground-invoke-adaptiveCard-action.json", conv)
        act["value"] = {"action": {"type": "Action.Execute", "verb": "approve", "title": "Approve", "data": data}}
        return json.dumps(act).encode()

    def click_url(self, conv: str) -> str:
        """A click on the card of `conv`: the replica after the one that took its message."""
        return self.bot_urls[self.balancer.after(self.home[conv])]

    def race_url(self) -> str:
        """One of many clicks racing on one card: round-robin."""
        return self.bot_urls[self.balancer.next()]

    async def click(self, conv: str, data: dict[str, Any]) -> tuple[float, str]:
        return await self.send(self.click_url(conv), self.invoke(conv, data))

    async def send(self, url: str, invoke: bytes) -> tuple[float, str]:
        t0 = time.perf_counter()
        async with self.http.post(url, data=invoke, headers={"Content-Type": "application/json"}) as resp:
            body = await resp.json()
        ms = (time.perf_counter() - t0) * 1000
        title = body["value"]["body"][0]["text"] if resp.status == 200 else f"HTTP {resp.status}"
        return ms, title.split(" by ")[0]


INVOKE_BUDGET = 10.0  # seconds a click waits for its outcome (default 2): the bench times the outcome


@contextlib.asynccontextmanager
async def in_process() -> AsyncIterator[list[Served]]:
    """The server in this process, on the server's default store: one member, its URL only."""
    with tempfile.TemporaryDirectory(prefix="bench-teams-") as tmp:
        clock = SystemClock()
        db = f"sqlite:///{Path(tmp) / 'rows.db'}"  # objects in the same file: the server's default
        store = StoreIO(open_rows(db), open_objects(db, clock))
        approvals = bootstrap(store, clock=clock).approvals
        teams = TeamsConfig(invoke_budget=INVOKE_BUDGET)
        app = build_app(approvals, ServerConfig(host="127.0.0.1"), sweep=False, teams=teams)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        freeze_heap()  # as `chat-approvals serve` does once started (bots/server.py)
        try:
            yield [Served(str(server.make_url("")).rstrip("/"), Path(tmp), os.getpid(), Path(os.devnull))]
        finally:
            await app[TEAMS].bot.drain()
            await server.close()
            store.close()


@contextlib.asynccontextmanager
async def as_process(replicas: int, pin: bool = False) -> AsyncIterator[list[Served]]:
    """`chat-approvals serve` in its own process(es), Teams configured only by its environment."""
    env = {"CHAT_APPROVALS_TEAMS_INVOKE_BUDGET": str(INVOKE_BUDGET)}
    async with serve_replicas(replicas, env, drop=("CHAT_APPROVALS_TEAMS_",), pin=pin) as members:
        yield members


Rows = list[tuple[str, int, list[float], Counter[str]]]


async def run(
    samples: int, rounds: int, server: str = "inprocess", replicas: int = 1, pin: bool = False
) -> tuple[Rows, Bound, list[str], bool]:
    """The rows, the CPU bound of the burst on 50 cards (bench/cpu_bound.py); with `--server
    process`, each replica's tallies and the exactly-once check."""
    connector = Connector()
    capp = web.Application()
    capp.router.add_route("*", "/_connector/{tail:.*}", connector.handle)
    cserver = TestServer(capp, host="127.0.0.1")
    await cserver.start_server()
    rows: Rows = []
    notes: list[str] = []
    ok = True
    try:
        async with (
            in_process() if server == "inprocess" else as_process(replicas, pin) as members,
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=200)) as http,
        ):
            bot_urls = [f"{m.base_url}/api/messages" for m in members]
            rig = Rig(http, bot_urls, str(cserver.make_url("/_connector")), connector)
            meter = CpuMeter([m.pid for m in members])
            await rig.click(*await rig.card())  # warm-up
            lat: list[float] = []
            seen: Counter[str] = Counter()
            for _ in range(samples):
                ms, what = await rig.click(*await rig.card())
                lat.append(ms)
                seen[what] += 1
            rows.append(("1 click at a time", samples, lat, seen))

            lat, seen = [], Counter()
            for _ in range(rounds):
                cards = [await rig.card() for _ in range(50)]
                invokes = [(rig.click_url(conv), rig.invoke(conv, data)) for conv, data in cards]
                with meter.burst(len(invokes)):
                    answers = await asyncio.gather(*(rig.send(u, i) for u, i in invokes))
                for ms, what in answers:
                    lat.append(ms)
                    seen[what] += 1
            rows.append(("50 concurrent, 50 cards", 50 * rounds, lat, seen))

            lat, seen = [], Counter()
            for _ in range(rounds):
                conv, data = await rig.card()
                invokes = [(rig.race_url(), rig.invoke(conv, data)) for _ in range(50)]
                for ms, what in await asyncio.gather(*(rig.send(u, i) for u, i in invokes)):
                    lat.append(ms)
                    seen[what] += 1
            rows.append(("50 concurrent, 1 card", 50 * rounds, lat, seen))
            if server == "process":
                await settle(members, http, lambda: connector.n)  # the last turns' tails, on any replica
                notes, ok = exactly_once(await tallies(http, members), 1 + samples + 51 * rounds)
                notes = [*cpu_lines(members), *notes]
    finally:
        await cserver.close()  # after the server: it posts to the connector until it has stopped
    return rows, least_median(meter, 50), notes, ok


def exactly_once(counts: list[dict[str, Counter[str]]], cards: int) -> tuple[list[str], bool]:
    """Every clicked card (warm-up, one at a time, 50 cards per round, 1 raced card per round)
    resumed once: the racing clicks' other outcomes are expected and shown in the table."""
    resumed = sum(c["chat_approvals_resumes"]["resumed"] for c in counts)
    ok = resumed == cards
    check = f"exactly once: {resumed} resumed for {cards} cards clicked: {'ok' if ok else 'NOT exactly once'}"
    return [*tally_lines(counts), check], ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=100, help="clicks for the one-at-a-time row")
    ap.add_argument("--rounds", type=int, default=4, help="rounds of 50 for the concurrent rows")
    add_server_args(ap)
    args = ap.parse_args()
    check_replicas(args.server, args.replicas, args.pin)
    rows, bound, notes, ok = asyncio.run(run(args.samples, args.rounds, args.server, args.replicas, args.pin))
    print(describe(args.server, args.replicas, args.pin))
    print("Teams invoke -> response (embedded SQLite + files, scripted model, 127.0.0.1)")
    print(f"{'scenario':<26} {'clicks':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}  outcomes")
    for name, n, lat, seen in rows:
        outcomes = ", ".join(f"{k}: {v}" for k, v in seen.most_common())
        print(f"{name:<26} {n:>6} {pct(lat, 50):>8.1f} {pct(lat, 99):>8.1f} {max(lat):>8.1f}  {outcomes}")
    single = pct(rows[0][2], 50)
    ratio = pct(rows[1][2], 50) / single
    verdict = "met" if ratio <= 15 else "not met"
    print(f"\np50, 50 concurrent on 50 cards / 1 at a time: {ratio:.1f}x (target <= 15x: {verdict})")
    print("\n".join(bound_lines(bound, single / 1000, "p50, 50 concurrent on 50 cards", reach)))
    if notes:
        print()
        print("\n".join(notes))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
