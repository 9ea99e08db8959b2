"""Pause -> resume latency on each store (issue 34, target 4), through the public facade. By hand:

    .venv/bin/python -m bench.bench_latency [--single 50] [--burst 50] [--only NAME,...]
                                            [--store NAME ROWS_URL OBJECTS_URL]...

One card at a time, each on its own chat (`--single`), then `--burst` chats at once:
  pause   `Approvals.run_turn` until the card is offered: the turn ran, its snapshot and pointer
          are durable (R7), the card may be posted
  resume  `Approvals.resume` with the card's secret until the resumed turn's answer is stored
          (claim R10, resumed run, answer and finish R12): what a click waits for beyond its ack
The stores: `sqlite` (the embedded default, objects in the same file), `sqlite+files` (objects in a
folder), and, when the emulators run (scripts/test.d/20-emulators.sh start; `set -a; . var/test-env`),
`dynamodb+s3` (moto's DynamoDB and S3, small objects in the table with `&table=`, as the stack
deploys it), and with a PostgreSQL server (`$CHAT_APPROVALS_TEST_PG`, which
scripts/test.d/30-postgres.sh start writes) `postgres`: rows and objects on a fresh schema of it,
migrated as `store init` does. `--store NAME ROWS_URL OBJECTS_URL` adds any store the server opens.
Each click reaches the process that paused its turn (the Agent it holds); moto's latencies say
nothing about AWS's.

Under the table, the same run's reference: Strands' own Agent paused and resumed in memory (no store).
Nothing here asserts a timing; the machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.bench_peers import _pause, _resume, new_agent, postgres_facade
from bench.facade import FacadeCycle

EMULATOR = "CHAT_APPROVALS_TEST_MOTO"  # written to var/test-env by scripts/test.d/20-emulators.sh
POSTGRES = "CHAT_APPROVALS_TEST_PG"  # written to var/test-env by scripts/test.d/30-postgres.sh
STORES = ("sqlite", "sqlite+files", "dynamodb+s3", "postgres")


@dataclass
class Timings:
    name: str
    pause_one: list[float] = field(default_factory=list)
    resume_one: list[float] = field(default_factory=list)
    pause_burst: list[float] = field(default_factory=list)
    resume_burst: list[float] = field(default_factory=list)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def timed(work: Awaitable[object]) -> tuple[float, object]:
    t = time.perf_counter()
    done = await work
    return (time.perf_counter() - t) * 1000, done


async def measure(name: str, facade: FacadeCycle, single: int, burst: int) -> Timings:
    out = Timings(name)
    tag = secrets.token_hex(3)
    for i in range(3):  # first table touch, first Agent: not counted
        await facade.cycle(f"warm-{tag}-{i}")
    for i in range(single):
        ms, offer = await timed(facade.pause(f"one-{tag}-{i}"))
        out.pause_one.append(ms)
        ms, _ = await timed(facade.click(offer))  # type: ignore[arg-type]
        out.resume_one.append(ms)
    paused = await asyncio.gather(*(timed(facade.pause(f"burst-{tag}-{i}")) for i in range(burst)))
    out.pause_burst = [ms for ms, _ in paused]
    clicked = await asyncio.gather(*(timed(facade.click(offer)) for _, offer in paused))  # type: ignore[arg-type]
    out.resume_burst = [ms for ms, _ in clicked]
    return out


@contextmanager
def moto_store(endpoint: str) -> Iterator[tuple[str, str]]:
    """A new table and bucket prefix on moto (DynamoDB and S3), small objects in the table."""
    from chat_approvals.store.dynamodb_rows import create_table, delete_table
    from chat_approvals.store.s3_objects import create_bucket

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    name = f"latency{secrets.token_hex(4)}"
    rows = f"dynamodb://{name}?region=us-east-1&endpoint_url={endpoint}"
    objects = f"s3://bench-latency/{name}?region=us-east-1&endpoint_url={endpoint}"
    create_table(rows)
    create_bucket(objects, 9)
    try:
        yield rows, f"{objects}&table={name}"
    finally:
        delete_table(rows)


async def in_memory(n: int) -> tuple[list[float], list[float]]:
    """Strands' own Agent paused and resumed in memory, `n` times: the reference."""
    pauses, resumes = [], []
    for _ in range(3 + n):
        agent = new_agent()
        ms_pause, interrupt_id = await timed(_pause(agent))
        ms_resume, _ = await timed(_resume(agent, str(interrupt_id)))
        pauses.append(ms_pause)
        resumes.append(ms_resume)
    return pauses[3:], resumes[3:]


Opener = Callable[[ExitStack, Path], FacadeCycle]  # registers on the stack all that closes what it opened


def closed(stack: ExitStack, facade: FacadeCycle) -> FacadeCycle:
    stack.callback(facade.close)
    return facade


def openers(only: list[str], custom: list[list[str]]) -> tuple[list[tuple[str, Opener]], list[str]]:
    """The stores to run, and a note for each one skipped."""
    chosen: list[tuple[str, Opener]] = []
    notes = []
    for name in only:
        if name == "sqlite":
            chosen.append((name, lambda stack, root: closed(stack, FacadeCycle(root, objects="sqlite"))))
        elif name == "sqlite+files":
            chosen.append((name, lambda stack, root: closed(stack, FacadeCycle(root, objects="files"))))
        elif name == "dynamodb+s3":
            endpoint = os.environ.get(EMULATOR)
            if not endpoint:
                notes.append(f"dynamodb+s3 skipped: {EMULATOR} not set (start the emulators, then `. var/test-env`)")
                continue

            def aws(stack: ExitStack, root: Path, endpoint: str = endpoint) -> FacadeCycle:
                return closed(stack, FacadeCycle(root, urls=stack.enter_context(moto_store(endpoint))))

            chosen.append((f"{name} (moto)", aws))
        elif name == "postgres":
            url = os.environ.get(POSTGRES)
            if not url:
                notes.append(f"postgres skipped: {POSTGRES} not set (scripts/test.d/30-postgres.sh start)")
                continue

            def pg(stack: ExitStack, root: Path, url: str = url) -> FacadeCycle:
                facade, close = postgres_facade(url, root, held_agents=True)
                stack.callback(close)  # the facade, then its schema
                return facade

            chosen.append((name, pg))
    for name, rows_url, objects_url in custom:

        def given(stack: ExitStack, root: Path, urls: tuple[str, str] = (rows_url, objects_url)) -> FacadeCycle:
            return closed(stack, FacadeCycle(root, urls=urls))

        chosen.append((name, given))
    return chosen, notes


def table(rows: list[Timings]) -> list[str]:
    lines = [
        "| store | pause p50 ms | pause p99 ms | resume p50 ms | resume p99 ms | burst: pause p50 ms | "
        "burst: pause p99 ms | burst: resume p50 ms | burst: resume p99 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in rows:
        cells = [t.pause_one, t.resume_one, t.pause_burst, t.resume_burst]
        shown = " | ".join(f"{pct(c, 50):.2f} | {pct(c, 99):.2f}" for c in cells)
        lines.append(f"| {t.name} | {shown} |")
    return lines


async def main_async(single: int, burst: int, only: list[str], custom: list[list[str]]) -> int:
    chosen, notes = openers(only, custom)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-latency-") as d:
        for i, (name, opener) in enumerate(chosen):
            root = Path(d) / str(i)
            root.mkdir()
            with ExitStack() as stack:
                results.append(await measure(name, opener(stack, root), single, burst))
    pauses, resumes = await in_memory(single)
    load = os.getloadavg()
    print(f"\nPause -> resume latency, {single} cards one at a time, then {burst} at once (load {load[0]:.1f})\n")
    print("\n".join(table(results)))
    print()
    print(
        f"reference, same run: Strands' Agent in memory (no store), {single} one at a time: "
        f"pause p50 {pct(pauses, 50):.2f} ms, resume p50 {pct(resumes, 50):.2f} ms"
    )
    print("target (issue 34): published per store, dated, with this command (no ratio is set)")
    for note in notes:
        print(f"note: {note}")
    return 0 if results else 1


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--single", type=int, default=50, help="cards paused and resumed one at a time (default 50)")
    ap.add_argument("--burst", type=int, default=50, help="cards paused, then resumed, all at once (default 50)")
    ap.add_argument("--only", default=",".join(STORES), help=f"stores to run, of {', '.join(STORES)} (default all)")
    ap.add_argument(
        "--store",
        nargs=3,
        action="append",
        default=[],
        metavar=("NAME", "ROWS_URL", "OBJECTS_URL"),
        help="one more store, opened as `chat-approvals serve --store ROWS_URL --objects OBJECTS_URL` opens it",
    )
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(STORES))
    if unknown or args.single < 1 or args.burst < 1:
        ap.error(f"--only takes {', '.join(STORES)}; --single and --burst at least 1")
    sys.exit(asyncio.run(main_async(args.single, args.burst, only, args.store)))


if __name__ == "__main__":
    main()
