"""`chat-approvals serve` as its own OS process for the load benches (`--server process`): started
exactly as a user starts it (the installed console script, flags and environment only, the
default objects in the store's SQLite file), a bounded wait for /readyz, SIGTERM at the end.

The bench process keeps only the client and the platform stand-in (Slack's Web API or Teams' Bot
Connector), so their CPU is no longer in the server's event loop, as in production where Slack
and Teams are other machines. The two processes still share this machine's cores.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from tests.serve_process import free_port

MODES = ("inprocess", "process")
READY_WAIT = 60.0  # seconds for the process to answer /readyz
QUIET = 0.05  # seconds without server activity that count as idle (Served.settle)
STOP_WAIT = 20.0  # seconds for it to exit after SIGTERM before it is killed
# The bench passes these itself (the rest of the environment is inherited, as the in-process
# server reads it too): no objects URL, so the default holds (the store's own SQLite file).
OWN = ("SLACK_", "CHAT_APPROVALS_OBJECTS", "CHAT_APPROVALS_STORE", "CHAT_APPROVALS_HOST", "CHAT_APPROVALS_PORT")


def _sum(metrics: str, name: str) -> float:
    """The sum of every sample of `name` (all label sets) in Prometheus text."""
    total = 0.0
    for line in metrics.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
    return total


def describe(mode: str) -> str:
    if mode == "process":
        return (
            "server: its own OS process (`chat-approvals serve`); this process holds only the client and "
            "the platform stand-in (both processes share the machine's cores)"
        )
    return "server: in this process (one event loop with the client and the platform stand-in)"


def command() -> list[str]:
    """The console script a user runs; `python -m bots.cli` where it is not installed."""
    script = Path(sys.executable).with_name("chat-approvals")
    return [str(script)] if script.exists() else [sys.executable, "-m", "bots.cli"]


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
    folder: Path  # the server's working directory: approvals.db and its log are here
    pid: int  # e.g. to read its CPU time from /proc

    async def settle(self, http: aiohttp.ClientSession, outside: Callable[[], int], timeout: float = 60) -> None:
        """Wait (bounded) until the server is idle, seen from outside as a user could: no resume
        running or queued, and neither its store-call count (/metrics) nor `outside()` (the
        stand-in's call count) moved over QUIET seconds. The in-process bench drains the front end
        instead; a process has no such hook, and a click's tail must not overlap the next click."""
        last: tuple[float, int] | None = None
        async with asyncio.timeout(timeout):
            while True:
                async with http.get(f"{self.base_url}/metrics") as r:
                    text = await r.text()
                now = (_sum(text, "chat_approvals_store_seconds_count"), outside())
                busy = sum(_sum(text, f"chat_approvals_resume_queue_{g}") for g in ("running", "depth"))
                if now == last and not busy:
                    return
                last = now
                await asyncio.sleep(QUIET)

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return (self.folder / "serve.log").read_text(errors="replace")[-chars:]
        return ""


async def _wait_ready(proc: subprocess.Popen[bytes], url: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        while True:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with http.get(url) as r:
                    if r.status == 200:
                        return
            if proc.poll() is not None:
                raise RuntimeError(f"chat-approvals serve exited with {proc.returncode} before it was ready")
            if time.monotonic() > deadline:
                raise RuntimeError(f"chat-approvals serve was not ready within {seconds:g} s")
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


@contextlib.asynccontextmanager
async def serve(env: Mapping[str, str], *flags: str, drop: tuple[str, ...] = ()) -> AsyncIterator[Served]:
    """Runs `chat-approvals serve --host 127.0.0.1 --port P --store sqlite:///TMP/approvals.db FLAGS`
    with the inherited environment (less the variables starting with OWN or `drop`) plus `env`, in
    a temporary working directory (its var/notes), ready on /readyz; always stopped and removed on
    the way out."""
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        folder = Path(tmp)
        port = free_port()
        child = {k: v for k, v in os.environ.items() if not k.startswith((*OWN, *drop))}
        child.update(env)
        args = [*command(), "serve", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--store", f"sqlite:///{folder / 'approvals.db'}", *flags]
        with open(folder / "serve.log", "wb") as log:
            proc = subprocess.Popen(
                args, cwd=folder, env=child, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if _PRCTL is not None else None,
            )  # fmt: skip
        served = Served(f"http://127.0.0.1:{port}", folder, proc.pid)
        try:
            try:
                await _wait_ready(proc, f"{served.base_url}/readyz", READY_WAIT)
            except RuntimeError as e:
                raise RuntimeError(f"{e}; its log ends:\n{served.log_tail()}") from None
            yield served
        finally:
            await _stop(proc)
