"""`chat-approvals serve` as its own OS process for the load benches (`--server process`): started
exactly as a user starts it (the installed console script, flags and environment only, the
default objects in the store's SQLite file), a bounded wait for /readyz, SIGTERM at the end.

`--replicas N`: N such processes on N ports, all on the same SQLite file (WAL, shared by the
processes), as replicas behind a load balancer; the bench's client plays the balancer (Balancer).

The bench process keeps only the client and the platform stand-in (Slack's Web API or Teams' Bot
Connector), so their CPU is no longer in the server's event loop, as in production where Slack
and Teams are other machines. The two processes still share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from chat_approvals.bots.cpus import format_cpu_list
from tests.support.serve_process import free_port

MODES = ("inprocess", "process")
READY_WAIT = 60.0  # seconds for the process to answer /readyz
QUIET = 0.05  # seconds without server activity that count as idle (Served.settle)
STOP_WAIT = 20.0  # seconds for it to exit after SIGTERM before it is killed
# The bench passes these itself (the rest of the environment is inherited, as the in-process
# server reads it too): no objects URL, so the default holds (the store's own SQLite file).
OWN = (
    "SLACK_", "CHAT_APPROVALS_OBJECTS", "CHAT_APPROVALS_STORE", "CHAT_APPROVALS_HOST", "CHAT_APPROVALS_PORT",
    "CHAT_APPROVALS_CPUS",
)  # fmt: skip


def _sum(metrics: str, name: str) -> float:
    """The sum of every sample of `name` (all label sets) in Prometheus text."""
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def positive_int(text: str) -> int:
    """argparse type for --replicas."""
    n = int(text)
    if n < 1:
        raise ValueError(text)
    return n


def add_server_args(p: argparse.ArgumentParser) -> None:
    """--server, --replicas and --pin, as both load benches take them (check_replicas)."""
    p.add_argument(
        "--server",
        choices=MODES,
        default="inprocess",
        help="inprocess (default): the server in this process; process: `chat-approvals serve` as its own process",
    )
    p.add_argument(
        "--replicas",
        type=positive_int,
        default=1,
        help="with --server process: this many `chat-approvals serve` processes on one store (default 1)",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="with --server process: each replica pinned to one core, round the machine's (serve --cpus)",
    )


def pinned_cpus(index: int) -> str:
    """`--pin`: replica `index`'s core (`serve --cpus`), round the cores this process may use."""
    cores = sorted(os.sched_getaffinity(0))
    return str(cores[index % len(cores)])


def describe(mode: str, replicas: int = 1, pin: bool = False) -> str:
    if mode == "process":
        cores = "each pinned to one core, round the machine's (`serve --cpus`)" if pin else "not pinned (without --pin)"
        return (
            "server: its own OS process (`chat-approvals serve`); this process holds only the client and "
            "the platform stand-in (both processes share the machine's cores)\n"
            f"replicas: {replicas} (`chat-approvals serve` processes on one SQLite store; requests spread "
            "round-robin, each click to a replica other than the one that took its card's message when "
            f"there are several); {cores}"
        )
    return "server: in this process (one event loop with the client and the platform stand-in)"


def check_replicas(mode: str, replicas: int, pin: bool = False) -> None:
    """--replicas N > 1 and --pin need --server process (the in-process server is one app, and
    pinning it would pin the bench's client too)."""
    if replicas != 1 and mode != "process":
        raise SystemExit("--replicas needs --server process")
    if pin and mode != "process":
        raise SystemExit("--pin needs --server process")


def command() -> list[str]:
    """The console script a user runs; `python -m chat_approvals` where it is not installed."""
    script = Path(sys.executable).with_name("chat-approvals")
    return [str(script)] if script.exists() else [sys.executable, "-m", "chat_approvals"]


def _libc_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _libc_prctl()  # resolved here, so the forked child only makes the call


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the bench dies without its finally (SIGKILL, a timeout)."""
    _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


@dataclass(frozen=True)
class Served:
    base_url: str
    folder: Path  # the working directory shared by the replicas: approvals.db is here
    pid: int  # e.g. to read its CPU time from /proc
    log: Path  # this process's stdout and stderr

    async def settle(self, http: aiohttp.ClientSession, outside: Callable[[], int], timeout: float = 60) -> None:
        await settle((self,), http, outside, timeout)

    def cpus(self) -> str:
        """The CPUs its main thread may run on, as a CPU list (`0`, `0-1`)."""
        return format_cpu_list(frozenset(os.sched_getaffinity(self.pid)))

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-chars:]
        return ""


async def settle(
    members: Sequence[Served], http: aiohttp.ClientSession, outside: Callable[[], int], timeout: float = 60
) -> None:
    """Wait (bounded) until every replica is idle, seen from outside as a user could: no resume
    running or queued in any of them, and neither their store-call counts (/metrics) nor
    `outside()` (the stand-in's call count) moved over QUIET seconds. The in-process bench drains
    the front end instead; a process has no such hook, and a click's tail must not overlap the next
    click (a click's tail may run on a replica other than the one that took the click)."""
    last: tuple[float, ...] | None = None
    async with asyncio.timeout(timeout):
        while True:
            texts = [await metrics_text(http, m) for m in members]
            now = (*(_sum(t, "chat_approvals_store_seconds_count") for t in texts), float(outside()))
            busy = sum(_sum(t, f"chat_approvals_resume_queue_{g}") for t in texts for g in ("running", "depth"))
            if now == last and not busy:
                return
            last = now
            await asyncio.sleep(QUIET)


async def metrics_text(http: aiohttp.ClientSession, member: Served) -> str:
    async with http.get(f"{member.base_url}/metrics") as r:
        return await r.text()


class Balancer:
    """The client's load balancer over the replicas: `next()` round-robin for messages (and clicks
    racing on one card); `after(i)` for a click on a card whose message replica i took: the next
    replica round the ring, so with several replicas the click lands on one that did not pause the
    turn (it resumes from the stored snapshot), the usual case behind a real balancer. A plain
    shared rotation would instead send every click back to its card's replica whenever the number
    of messages is a multiple of the replica count."""

    def __init__(self, urls: Sequence[str]) -> None:
        self.urls = list(urls)
        self._turn = 0

    def next(self) -> int:
        i = self._turn % len(self.urls)
        self._turn += 1
        return i

    def after(self, i: int) -> int:
        return (i + 1) % len(self.urls)


COUNTED = {  # metric -> label whose values are tallied per replica
    "chat_approvals_resumes": "outcome",
    "chat_approvals_claims": "result",
    "chat_approvals_turns": "status",
}


async def tallies(http: aiohttp.ClientSession, members: Sequence[Served]) -> list[dict[str, Counter[str]]]:
    """Per replica, from its /metrics: clicks by outcome, claims won/lost, turns by status (what a
    double resume or a refused click would show)."""
    out = []
    for m in members:
        seen: dict[str, Counter[str]] = {name: Counter() for name in COUNTED}
        for family in text_string_to_metric_families(await metrics_text(http, m)):
            if family.name in COUNTED:
                for sample in family.samples:
                    if sample.name == family.name + "_total" and sample.value:
                        seen[family.name][sample.labels[COUNTED[family.name]]] += int(sample.value)
        out.append(seen)
    return out


def cpu_lines(members: Sequence[Served]) -> list[str]:
    """Where each replica runs, read from /proc (--pin or not)."""
    return [f"replica {i + 1} runs on CPUs {m.cpus()}" for i, m in enumerate(members)]


def tally_lines(counts: list[dict[str, Counter[str]]]) -> list[str]:
    def fmt(c: Counter[str]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"

    total: dict[str, Counter[str]] = {name: sum((c[name] for c in counts), Counter()) for name in COUNTED}
    rows = [(f"replica {i + 1}", c) for i, c in enumerate(counts)] + [("all replicas", total)]
    return [
        f"{who}: resumes {fmt(c['chat_approvals_resumes'])}; claims {fmt(c['chat_approvals_claims'])}; "
        f"turns {fmt(c['chat_approvals_turns'])}"
        for who, c in rows
    ]


async def _wait_ready(proc: subprocess.Popen[bytes], url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(url) as r:
                    if r.status == 200:
                        return
            if proc.poll() is not None:
                raise RuntimeError(f"the server process exited with {proc.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server process was not ready within {seconds:g} s")
            await asyncio.sleep(0.1)


async def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then a bounded wait that keeps this loop running (the stand-in answers the calls the
    server finishes while it shuts down); killed if it does not exit in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT
    while proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


Argv = Callable[[Path, int], list[str]]  # (the shared working directory, its port) -> the command


def serve_argv(*flags: str) -> Argv:
    """`chat-approvals serve` on 127.0.0.1:PORT with the store in the working directory, plus `flags`."""

    def argv(folder: Path, port: int) -> list[str]:
        store = f"sqlite:///{folder / 'approvals.db'}"
        return [*command(), "serve", "--host", "127.0.0.1", "--port", str(port), "--store", store, *flags]

    return argv


def _pinned(env: Mapping[str, str], index: int) -> dict[str, str]:
    return {**env, "CHAT_APPROVALS_CPUS": pinned_cpus(index)}


def _check_pinned(members: Sequence[Served]) -> None:
    """--pin: each replica runs on the core it was given, or the figures would describe another
    arrangement than the one printed."""
    for i, m in enumerate(members):
        if m.cpus() != pinned_cpus(i):
            raise RuntimeError(f"replica {i + 1} runs on CPUs {m.cpus()}, not {pinned_cpus(i)}: {m.log_tail()}")


def _start(folder: Path, index: int, env: Mapping[str, str], argv: Argv) -> tuple[subprocess.Popen[bytes], Served]:
    port = free_port()
    log_path = folder / ("serve.log" if index == 0 else f"serve-{index + 1}.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv(folder, port), cwd=folder, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent if _PRCTL is not None else None,
        )  # fmt: skip
    return proc, Served(f"http://127.0.0.1:{port}", folder, proc.pid, log_path)


async def _ready(proc: subprocess.Popen[bytes], served: Served) -> None:
    try:
        await _wait_ready(proc, f"{served.base_url}/readyz", READY_WAIT)
    except RuntimeError as e:
        raise RuntimeError(f"{e}; its log ends:\n{served.log_tail()}") from None


def serve_replicas(
    replicas: int, env: Mapping[str, str], *flags: str, drop: tuple[str, ...] = (), pin: bool = False
) -> contextlib.AbstractAsyncContextManager[list[Served]]:
    """Runs `replicas` x `chat-approvals serve --host 127.0.0.1 --port P --store
    sqlite:///TMP/approvals.db FLAGS`, one port each and the same store file (run_replicas)."""
    return run_replicas(replicas, env, serve_argv(*flags), drop=drop, pin=pin)


@contextlib.asynccontextmanager
async def run_replicas(
    replicas: int, env: Mapping[str, str], argv: Argv, *, drop: tuple[str, ...] = (), pin: bool = False
) -> AsyncIterator[list[Served]]:
    """Runs `replicas` x `argv(TMP, P)`, one free port P each, with the inherited environment (less
    the variables starting with OWN or `drop`) plus `env`, in one temporary working directory TMP
    (its var/notes), each ready on /readyz; all stopped and removed on the way out. The first is
    ready before the others start: it creates the store's file and its tables alone. `pin`: replica
    i runs on one core (CHAT_APPROVALS_CPUS, pinned_cpus)."""
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp)
        child = {k: v for k, v in os.environ.items() if not k.startswith((*OWN, *drop))}
        child.update(env)
        procs: list[subprocess.Popen[bytes]] = []
        members: list[Served] = []
        try:
            for batch in ([0], range(1, replicas)):
                started = [_start(folder, i, _pinned(child, i) if pin else child, argv) for i in batch]
                procs += [p for p, _ in started]
                members += [m for _, m in started]
                await asyncio.gather(*(_ready(p, m) for p, m in started))
            if pin:
                _check_pinned(members)
            yield members
        finally:
            await asyncio.gather(*(_stop(p) for p in procs))


@contextlib.asynccontextmanager
async def serve(env: Mapping[str, str], *flags: str, drop: tuple[str, ...] = ()) -> AsyncIterator[Served]:
    """One replica (serve_replicas)."""
    async with serve_replicas(1, env, *flags, drop=drop) as (served,):
        yield served
