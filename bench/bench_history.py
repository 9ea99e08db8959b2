"""What a cycle costs in a chat that has a history, against a fresh chat.

    .venv/bin/python -m bench.bench_history [--cycles 200] [--block 20] [--grants 200]

The other benches run each cycle in a chat of its own. A real chat remembers: every turn loads
the chat's history (the agent's conversation, kept to Strands' window of 40 messages) and saves it
again when it ends. This runs full cycles through the facade (turn -> card -> approve -> answered,
bench/facade.py) on the embedded store, three ways, interleaved in blocks in one process so that
the machine's load falls on all three alike:

- fresh: each cycle in a new chat (what the other benches measure);
- history: every cycle in one chat whose history is already at the window, a different person's
  request each time (a team's channel), so no one's grants pile up;
- grants: every cycle in one chat, the same person each time, each approving a new site: their
  live grants in the chat grow by one a cycle, from `--grants` (a turn and a click read all of them).

Per cycle: the wall time (p50) and the CPU of this process's event-loop thread and of its other
threads (the store's): the loop's from its own thread clock, the others' from /proc in clock ticks
(10 ms: small --cycles give coarse figures).
Prints a table, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.cpu_bound import proc_cpu
from bench.facade import FacadeCycle

WINDOW_CYCLES = 12  # each cycle adds four messages: 12 fill Strands' 40-message window


@dataclass
class Variant:
    name: str
    what: str
    cycle: Callable[[int], tuple[str, str, str]]  # cycle number -> (chat, user, text)
    walls: list[float] = field(default_factory=list)
    loop_cpu: float = 0.0
    other_cpu: float = 0.0


def fetch(n: int) -> str:
    return f"please fetch https://site-{n}.example.org/table.csv"


def variants() -> list[Variant]:
    return [
        Variant("fresh", "a new chat each cycle", lambda n: (f"fresh-{n}", "bench-user", fetch(n))),
        Variant("history", "one chat at the window, a new person each cycle", lambda n: ("team", f"p-{n}", fetch(n))),
        Variant("grants", "one chat, one person, a new site each cycle", lambda n: ("mine", "me", fetch(n))),
    ]


def threads_cpu() -> tuple[float, float]:
    """(event-loop thread, every other thread) CPU seconds of this process so far. The loop's is
    this thread's own clock (to the nanosecond: a short run's fresh-chat baseline is never zero);
    the others' are read from /proc, in clock ticks."""
    pid = os.getpid()
    other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) == pid:
            continue
        try:
            other += proc_cpu(pid, int(tid))
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return time.thread_time(), other


async def measure(root: Path, cycles: int, block: int, grants: int) -> tuple[list[Variant], int]:
    fc = FacadeCycle(root)
    numbers = itertools.count()
    vs = variants()
    try:
        warm = {"fresh": 20, "history": WINDOW_CYCLES, "grants": grants}
        for v in vs:
            for _ in range(warm[v.name]):
                await fc.cycle(*v.cycle(next(numbers)))
        done = 0
        while done < cycles:
            n = min(block, cycles - done)
            for v in vs:
                loop0, other0 = threads_cpu()
                for _ in range(n):
                    start = time.perf_counter()
                    await fc.cycle(*v.cycle(next(numbers)))
                    v.walls.append(time.perf_counter() - start)
                loop1, other1 = threads_cpu()
                v.loop_cpu += loop1 - loop0
                v.other_cpu += other1 - other0
            done += n
        history = await history_bytes(fc, "team")
    finally:
        fc.close()
    return vs, history


async def history_bytes(fc: FacadeCycle, chat: str) -> int:
    """The size of the chat's saved history (0 if none)."""
    key = await fc.io.run(fc.io.rows.get_session, chat)
    if key is None:
        return 0
    data = await fc.io.run(fc.io.objects.get_key, key)
    return len(data or b"")


def report(vs: list[Variant], cycles: int, grants: int, history: int) -> list[str]:
    base = vs[0]
    lines = [
        "| chat | what | wall p50 ms | loop CPU ms | other threads CPU ms | CPU over a fresh chat |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for v in vs:
        cpu = (v.loop_cpu + v.other_cpu) / cycles
        over = cpu / max(1e-9, (base.loop_cpu + base.other_cpu) / cycles)
        lines.append(
            f"| {v.name} | {v.what} | {statistics.median(v.walls) * 1e3:.2f} | {v.loop_cpu / cycles * 1e3:.2f}"
            f" | {v.other_cpu / cycles * 1e3:.2f} | {over:.2f}x |"
        )
    lines.append("")
    lines.append(f"The history chat's saved history: {history:,} bytes. The grants chat's person held")
    lines.append(f"{grants} live grants in it at the start and {grants + cycles} at the end.")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=200, help="cycles per chat kind (default 200)")
    ap.add_argument("--block", type=int, default=20, help="cycles per block; the kinds alternate by block")
    ap.add_argument("--grants", type=int, default=200, help="the grants chat's live grants at the start")
    args = ap.parse_args(argv)
    if args.cycles < 1 or args.block < 1 or args.grants < 0:
        ap.error("need --cycles >= 1, --block >= 1 and --grants >= 0")
    with tempfile.TemporaryDirectory() as d:
        vs, history = asyncio.run(measure(Path(d), args.cycles, args.block, args.grants))
    load = os.getloadavg()[0]
    print(f"\nA cycle by chat kind, {args.cycles} cycles each in blocks of {args.block} (load {load:.1f})\n")
    print("\n".join(report(vs, args.cycles, args.grants, history)))
    print("\nThe other threads' CPU read from /proc in clock ticks (10 ms): small --cycles give coarse figures")


if __name__ == "__main__":
    main()
