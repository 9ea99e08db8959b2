"""What a workspace's token costs a Web API call when the app is installed in many workspaces by OAuth
(issue 31): every call reads the workspace's installation from the store and opens its sealed token.

    .venv/bin/python -m bench.bench_slack_tokens [--workspaces 200] [--lookups 2000]

Embedded store (SQLite, the server's default), the real `InstalledTokens` (bots/slack_oauth.py) on
it, the system clock; tokens that do not rotate, so no call leaves the process. Prints a table:
the time per lookup, and per click (a click makes about four Web API calls: "Resuming…", the
outcome, the reply, and the lookup that admits it).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from slack_sdk.oauth.installation_store import Installation

from chat_approvals.bots.slack_config import SlackConfig
from chat_approvals.bots.slack_install import TokenBox
from chat_approvals.bots.slack_oauth import installed_tokens
from chat_approvals.bots.slack_web import Workspace
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import SystemClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.open import open_objects, open_rows

CALLS_PER_CLICK = 4


async def run(workspaces: int, lookups: int) -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{Path(tmp) / 'rows.db'}"
        clock = SystemClock()
        root = bootstrap(StoreIO(open_rows(db), open_objects(db, clock)), clock=clock)
        try:
            cfg = SlackConfig(client_id="1.2", client_secret="s", signing_secret="x", token_key=TokenBox.new_key())
            tokens = installed_tokens(cfg, root.approvals.installations)
            teams = [f"T{n:08d}" for n in range(workspaces)]
            for team in teams:
                await tokens.store.async_save(Installation(user_id="U0ADMIN", team_id=team, bot_token=f"xoxb-{team}"))
            times: list[float] = []
            for i in range(lookups):
                team = teams[i % len(teams)]
                start = time.perf_counter()
                assert await tokens.bot_token(Workspace(team)) == f"xoxb-{team}"
                times.append(time.perf_counter() - start)
        finally:
            root.close()
    times.sort()
    p50, p99 = statistics.median(times), times[int(len(times) * 0.99) - 1]
    return [
        ("one token lookup", p50, p99),
        (f"a click's {CALLS_PER_CLICK} lookups", CALLS_PER_CLICK * p50, CALLS_PER_CLICK * p99),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workspaces", type=int, default=200)
    ap.add_argument("--lookups", type=int, default=2000)
    args = ap.parse_args()
    rows = asyncio.run(run(args.workspaces, args.lookups))
    print(f"{args.workspaces} workspaces installed, {args.lookups} lookups, SQLite")
    print("| what | p50 | p99 |")
    print("|---|---:|---:|")
    for what, p50, p99 in rows:
        print(f"| {what} | {p50 * 1e6:.0f} µs | {p99 * 1e6:.0f} µs |")


if __name__ == "__main__":
    main()
