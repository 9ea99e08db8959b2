"""`chat-approvals serve` as a real OS process, for tests that need one: a free port, a bounded
wait until it answers /healthz, and a clean stop."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_healthy(proc: subprocess.Popen[bytes], port: int, seconds: float = 60) -> None:
    """A real process: a bounded wait for it to listen (the loop keeps running meanwhile)."""
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.get(f"http://127.0.0.1:{port}/healthz") as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"chat-approvals serve did not start (exit {proc.poll()})")
            await asyncio.sleep(0.1)


async def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT, then a bounded wait that keeps this loop (and any stand-in on it) running, since the
    server finishes its in-flight calls before it exits."""
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 20
    while proc.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)
