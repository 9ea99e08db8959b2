"""A second bot process for tests: the real server (Teams mounted) over a given store folder, on an
ephemeral 127.0.0.1 port, with a manual clock set to the given time (the same time as the test's).
Prints `PORT <n>` once listening; stops on SIGTERM.

    python -m tests.teams.bot_process STORE_FOLDER CLOCK_START INVOKE_BUDGET
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.bots.teams_bot import TEAMS, TeamsConfig
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows


async def main(folder: Path, start: float, budget: float) -> None:
    clock = ManualClock(start)
    store = StoreIO(SqliteRows(folder / "rows.db"), FileObjects(folder / "objects", clock=clock))
    approvals = bootstrap(store, clock=clock).approvals
    app = build_app(approvals, ServerConfig(host="127.0.0.1"), sweep=False, teams=TeamsConfig(invoke_budget=budget))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(f"PORT {port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await app[TEAMS].bot.drain()
    await runner.cleanup()
    store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])))
