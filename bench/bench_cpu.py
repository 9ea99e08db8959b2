"""CPU per click: this server against bare handlers, in the same run (issue 34, target 2). By hand:

    .venv/bin/python -m bench.bench_cpu [--clicks 100] [--rounds 2] [--only slack,teams]

For each platform, `--clicks` cards are opened, then clicked at once, `--rounds` times, against:
  server  `chat-approvals serve` in its own process (bench/server_process.py), on the embedded store
  bare    bench/bare_handlers.py in its own process: only the platform's part of a click (Slack: the
          signature verified, the ack, one chat.update; Teams: the invoke parsed, answered, one reply
          posted), served the same way, for the same clicks
and each served process's CPU (user + system, all its threads, read from /proc) over the burst and
until it is idle again is divided by the clicks. To the bare handler's CPU is added the agent's part:
Strands' Agent with the same scripted model and a tool of the same name, paused, then resumed in
memory (the resume's CPU, timed in this process). The target: the server's CPU per click at most 2x
that bare total. The bound: the least durable click, run for real (bare_handlers.py `--least`): the
bare handler with the click's two fsync'd commits through a thread (and Slack's reply), and between
them the same agent, paused in that process beforehand, resumed there, as the server resumes the
turn it holds. `--durable` without the agent, plus the agent timed alone, is printed beside it: the
arithmetic the bound was before it ran for real; and below it the least click on the libraries
DESIGN names (`--libraries`: Slack's Block Kit models, botbuilder-core's turn for Teams). The
last two columns of the first table split the server's CPU between its event-loop thread and the
rest (the store's executor threads, mostly: SQLite's statements and fsync'd commits). Nothing here
asserts a timing; the machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from bench.bench_peers import _pause, _resume, new_agent
from bench.bench_slack import Outcomes, Request, ServedSlackRig, make_cards, resigned, signed_click
from bench.bench_teams import Connector, Rig, as_process
from bench.cpu_bound import main_thread_cpu, proc_cpu
from bench.server_process import Served, run_replicas
from tests.support.slack_standin import Call

TARGET = 2.0  # the server's CPU per click at most this many times the bare total
QUIET = 0.3  # seconds without a platform call: the served process is idle again
ROOT = str(Path(__file__).resolve().parents[1])  # the bare handlers run in a temporary directory


@dataclass
class Row:
    platform: str
    server_ms: float  # CPU per click, the server
    loop_ms: float  # of which its event-loop thread's (the rest: the store's and other threads)
    bare_ms: float  # CPU per click, the bare handler
    durable_ms: float  # CPU per click, the bare handler with the click's two commits (and Slack's reply)
    agent_ms: float  # CPU per resume, the agent in memory
    least_ms: float  # CPU per click, the durable bare handler resuming the agent it holds: the bound
    libraries_ms: float  # the same on the libraries DESIGN names (Block Kit models; botbuilder's turn)

    @property
    def bare_total_ms(self) -> float:
        return self.bare_ms + self.agent_ms

    def ratio_of(self, ms: float) -> float:
        """`ms` a click against the bare total: the server's ratio, or a bound's."""
        return ms / self.bare_total_ms

    def room_ms(self, least_ms: float) -> float:
        """What the target leaves per click, above a least click, for the rest: the protocol's
        Python, the card, audit, policy (negative: nothing)."""
        return TARGET * self.bare_total_ms - least_ms


async def quiet(count: Callable[[], int], timeout: float = 60) -> None:
    """Until the platform stand-in saw no new call for QUIET seconds (the clicks' tails are done)."""
    async with asyncio.timeout(timeout):
        last = -1
        while count() != last:
            last = count()
            await asyncio.sleep(QUIET)


@dataclass
class Spent:
    """CPU seconds of a served process: all its threads, and its event-loop thread alone."""

    total: float = 0.0
    loop: float = 0.0

    def __iadd__(self, other: Spent) -> Spent:
        return Spent(self.total + other.total, self.loop + other.loop)


async def cpu_of(pid: int, work: Callable[[], Awaitable[None]], count: Callable[[], int]) -> Spent:
    """CPU seconds process `pid` spent from the start of `work` until it is idle again."""
    before, loop = proc_cpu(pid), main_thread_cpu(pid)
    await work()
    await quiet(count)
    return Spent(proc_cpu(pid) - before, main_thread_cpu(pid) - loop)


# the bare handler; with the click's commits; with the agent too (the bound); on DESIGN's libraries
MODES = ("", "--durable", "--least", "--libraries")
HOLDING = ("--least", "--libraries")  # the modes that resume an agent held in the bare process


@contextlib.asynccontextmanager
async def bare(platform: str, api: str = "", mode: str = "") -> AsyncIterator[Served]:
    def argv(_folder: Path, port: int) -> list[str]:
        extra = (["--api", api] if api else []) + ([mode] if mode else [])
        return [sys.executable, "-m", "bench.bare_handlers", "--platform", platform, "--port", str(port), *extra]

    async with run_replicas(1, {"PYTHONPATH": ROOT}, argv) as (member,):
        yield member


def unlimited() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))


@dataclass
class PerClick:
    """CPU seconds per click of each served process, for the same clicks."""

    server: Spent
    bare: float
    durable: float  # the bare handler with --durable
    least: float  # with --least: the bound
    libraries: float  # with --libraries: the bound on the libraries DESIGN names


async def bare_cpu(
    platform: str,
    api: str,
    batches: list[list[Any]],
    send: Callable[[aiohttp.ClientSession, str, Any], Awaitable[None]],
    count: Callable[[], int],
    mode: str,
) -> float:
    """CPU seconds the bare handler in `mode` (one of MODES) spent on all `batches`."""
    path = "/slack/events" if platform == "slack" else "/api/messages"
    async with bare(platform, api, mode) as member, unlimited() as http:
        url = f"{member.base_url}{path}"
        spent = Spent()
        for batch in batches:
            if mode in HOLDING:  # the agents the clicks resume, paused before the burst is measured
                async with http.post(f"{member.base_url}/prepare", params={"n": str(len(batch))}) as r:
                    if r.status != 200:
                        raise RuntimeError(f"HTTP {r.status} preparing {len(batch)} paused agents")

            before, calls = count(), (2 if platform == "slack" and mode else 1) * len(batch)

            async def bare_burst(batch: list[Any] = batch, before: int = before, calls: int = calls) -> None:
                await asyncio.gather(*(send(http, url, r) for r in batch))
                # until every click reached the platform: a Slack click's work follows its ack, and a
                # pause longer than QUIET before the first call would end the count early
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(120):
                        while count() - before < calls:
                            await asyncio.sleep(0.01)

            spent += await cpu_of(member.pid, bare_burst, count)
            if count() - before != calls:  # a failed click would leave its CPU out, unseen
                done = count() - before
                raise RuntimeError(f"bare {mode or 'plain'}: {done} platform calls, not {calls}: {member.log_tail()}")
    return spent.total


async def slack(clicks: int, rounds: int) -> PerClick:
    """CPU seconds per click: the server and the bare handler in each of MODES, the same signed clicks to each."""
    rig = await ServedSlackRig(1).start()
    assert rig.session is not None
    outcomes = Outcomes(rig.standin)
    server, sent = Spent(), []
    pid = rig.members[0].pid

    def calls() -> int:
        return len(rig.standin.calls)

    try:
        for _ in range(rounds):
            cards = await make_cards(rig, clicks)
            requests = [(rig.click_url(c), signed_click(rig, c)) for c in cards]
            sent += [r for _, r in requests]

            async def burst(requests: list[tuple[str, Request]] = requests, cards: list[Call] = cards) -> None:
                assert rig.session is not None
                await asyncio.gather(*(post(rig.session, u, r) for u, r in requests))
                await outcomes.wait(cards, timeout=120)

            server += await cpu_of(pid, burst, calls)
        batches = [sent[i * clicks : (i + 1) * clicks] for i in range(rounds)]

        async def send(http: aiohttp.ClientSession, url: str, r: tuple[bytes, dict[str, str]]) -> None:
            await post(http, url, resigned(r))

        api = rig.standin.api_url
        bares = [await bare_cpu("slack", api, batches, send, calls, m) for m in MODES]
    finally:
        await rig.stop()
    n = clicks * rounds
    return PerClick(Spent(server.total / n, server.loop / n), *(b / n for b in bares))


async def post(http: aiohttp.ClientSession, url: str, request: tuple[bytes, dict[str, str]]) -> None:
    body, headers = request
    async with http.post(url, data=body, headers=headers) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status} from {url}")


async def teams(clicks: int, rounds: int) -> PerClick:
    """CPU seconds per click: the server and the bare handler in each of MODES, the same invokes to each."""
    connector = Connector()
    capp = web.Application()
    capp.router.add_route("*", "/_connector/{tail:.*}", connector.handle)
    cserver = TestServer(capp, host="127.0.0.1")
    await cserver.start_server()
    service_url = str(cserver.make_url("/_connector"))

    def calls() -> int:
        return connector.n

    invokes: list[bytes] = []
    try:
        async with as_process(1) as (member,), unlimited() as http:
            rig = Rig(http, [f"{member.base_url}/api/messages"], service_url, connector)
            await rig.click(*await rig.card())  # warm-up
            server = Spent()
            for _ in range(rounds):
                cards = [await rig.card() for _ in range(clicks)]
                batch = [rig.invoke(conv, data) for conv, data in cards]
                invokes += batch

                async def burst(batch: list[bytes] = batch) -> None:
                    await asyncio.gather(*(rig.send(rig.bot_urls[0], i) for i in batch))

                server += await cpu_of(member.pid, burst, calls)
        batches = [invokes[i * clicks : (i + 1) * clicks] for i in range(rounds)]

        async def send(http: aiohttp.ClientSession, url: str, body: bytes) -> None:
            await post(http, url, (body, {"Content-Type": "application/json"}))

        bares = [await bare_cpu("teams", "", batches, send, calls, m) for m in MODES]
    finally:
        await cserver.close()
    n = clicks * rounds
    return PerClick(Spent(server.total / n, server.loop / n), *(b / n for b in bares))


async def agent_resume(n: int) -> float:
    """CPU seconds per resume of a paused Strands Agent in memory (the agent's part of a click)."""
    for _ in range(3):  # first Agent, imports
        agent = new_agent()
        await _resume(agent, await _pause(agent))
    spent = 0.0
    for _ in range(n):
        agent = new_agent()
        interrupt_id = await _pause(agent)
        t = time.process_time()
        await _resume(agent, interrupt_id)
        spent += time.process_time() - t
    return spent / n


def met(ratio: float) -> str:
    return "yes" if ratio <= TARGET else "no"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| platform | server CPU per click ms | bare handler ms | agent resumed in memory ms | bare total ms | "
        "server / bare total | target | met | server's event loop ms | server's other threads ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        ratio = r.ratio_of(r.server_ms)
        lines.append(
            f"| {r.platform} | {r.server_ms:.2f} | {r.bare_ms:.2f} | {r.agent_ms:.2f} | {r.bare_total_ms:.2f} | "
            f"{ratio:.2f}x | <= {TARGET:.0f}x | {met(ratio)} | {r.loop_ms:.2f} | {r.server_ms - r.loop_ms:.2f} |"
        )
    lines += [
        "",
        "The bound: the least durable click, run for real: the bare handler doing also what a durable click",
        "cannot do without (the claim's and the finish's fsync'd commits through a thread; for Slack the turn's",
        "reply too) and, between the commits, the same agent resumed in that process. Beside it, the bound by",
        "arithmetic: the durable bare handler without the agent, plus the agent timed alone",
        "",
        "| platform | durable bare ms | + agent ms | / bare total | least click ms | / bare total | target | met | "
        "left for the rest ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        summed, bound = r.durable_ms + r.agent_ms, r.ratio_of(r.least_ms)
        lines.append(
            f"| {r.platform} | {r.durable_ms:.2f} | {summed:.2f} | {r.ratio_of(summed):.2f}x | "
            f"{r.least_ms:.2f} | {bound:.2f}x | <= {TARGET:.0f}x | {met(bound)} | {r.room_ms(r.least_ms):.2f} |"
        )
    lines += [
        "",
        "The same least click on the libraries DESIGN names, as the server uses them (Slack: the outcome and",
        "the reply built with slack_sdk's Block Kit models; Teams: the invoke through the server's R20 edge",
        "check and botbuilder's CloudAdapter to a TeamsActivityHandler, the reply sent in its turn)",
        "",
        "| platform | least click on DESIGN's libraries ms | / bare total | target | met | left for the rest ms |",
        "|---|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        bound = r.ratio_of(r.libraries_ms)
        lines.append(
            f"| {r.platform} | {r.libraries_ms:.2f} | {bound:.2f}x | <= {TARGET:.0f}x | {met(bound)} "
            f"| {r.room_ms(r.libraries_ms):.2f} |"
        )
    return lines


async def main_async(clicks: int, rounds: int, only: list[str]) -> list[Row]:
    agent = await agent_resume(max(clicks, 20)) * 1000
    rows = []
    for platform in only:
        c = await (slack if platform == "slack" else teams)(clicks, rounds)
        ms = [x * 1000 for x in (c.server.total, c.server.loop, c.bare, c.durable)]
        rows.append(Row(platform, *ms, agent, c.least * 1000, c.libraries * 1000))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clicks", type=int, default=100, help="cards clicked at once per round (default 100)")
    p.add_argument("--rounds", type=int, default=2, help="bursts per platform (default 2)")
    p.add_argument("--only", default="slack,teams", help="platforms, of slack, teams (default both)")
    args = p.parse_args()
    only = [s for s in args.only.split(",") if s]
    if args.clicks < 1 or args.rounds < 1 or not only or set(only) - {"slack", "teams"}:
        p.error("--clicks and --rounds at least 1; --only of slack, teams")
    logging.basicConfig(level=logging.WARNING)
    load = os.getloadavg()[0]
    rows = asyncio.run(main_async(args.clicks, args.rounds, only))
    print(f"\nCPU per click, {args.clicks} clicks at once x {args.rounds} rounds, each served in its own process "
          f"(load {load:.1f} before)\n")  # fmt: skip
    print("\n".join(table(rows)))
    print("\nCPU read from /proc in clock ticks (10 ms): small --clicks give coarse figures")


if __name__ == "__main__":
    main()
