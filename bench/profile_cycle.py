"""Where the facade cycle's Python on the event loop goes (issue 34, targets 1 and 2). By hand:

    .venv/bin/python -m bench.profile_cycle [--cycles 300] [--from-store] [--top 25]

First the cycle (bench/facade.py: a turn paused on a card, the click, the resumed turn's answer, on
the embedded SQLite store) runs `--cycles` times without a profiler: the loop thread's CPU per
cycle (its own thread time, not the store's threads) and the wall time per cycle. Then the same
count under cProfile (which slows Python several-fold: read its shares, not its milliseconds): the
loop thread's time by owner (Strands, this project's core, the store, the rest) and the functions
with the most time of their own. `--from-store`: no paused Agent kept, each click resumes from
the stored snapshot, as a click that reaches another process does. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

from bench.facade import FacadeCycle

WARMUP = 30
REST = "the rest (the bench, the event loop's own)"
OWNERS = (  # (label, path fragment): the first that matches a function's file owns it
    ("Strands", "/strands/"),
    ("this project: core", "/core/"),
    ("this project: store", "/store/"),
    ("pydantic", "/pydantic"),
    ("OpenTelemetry", "/opentelemetry/"),
)


def owner_of(filename: str) -> str:
    for label, part in OWNERS:
        if part in filename:
            return label
    return REST


async def cycles(fc: FacadeCycle, n: int, tag: str, profile: cProfile.Profile | None = None) -> tuple[float, float]:
    """(wall ms, loop-thread CPU ms) per cycle over `n` cycles."""
    started, cpu = time.perf_counter(), time.thread_time()
    if profile is not None:
        profile.enable()
    for i in range(n):
        await fc.cycle(f"{tag}{i}")
    if profile is not None:
        profile.disable()
    return (time.perf_counter() - started) / n * 1000, (time.thread_time() - cpu) / n * 1000


HANDOFF = "the hops to the store's threads (queue, wake-up; GIL waits land here)"
_HANDOFFS = ("<method 'put' of '_queue.SimpleQueue' objects>", "<method 'recv' of '_socket.socket' objects>")


def _waiting(filename: str, name: str) -> bool:
    return filename == "~" and "poll" in name  # the loop idle in epoll, waiting on the store's threads


def by_owner(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Own time (tottime) by owner, largest first, as shares of the loop's busy time. The time of a
    C call or of a stdlib function goes to its callers (in proportion, up to an owner), so the deep
    copies Strands asks for count as Strands'; the store hops' hand-offs are their own line."""
    raw = stats.stats  # type: ignore[attr-defined]
    owned: dict[str, float] = {}
    pending: dict[tuple[str, int, str], float] = {}
    for key, (_cc, _nc, tottime, _ct, _callers) in raw.items():
        filename, _line, name = key
        if _waiting(filename, name):
            continue
        if filename == "~" and name in _HANDOFFS:
            owned[HANDOFF] = owned.get(HANDOFF, 0.0) + tottime
        else:
            pending[key] = pending.get(key, 0.0) + tottime
    for _ in range(50):  # pass time up the call graph until an owner takes it
        passed: dict[tuple[str, int, str], float] = {}
        for key, t in pending.items():
            label = owner_of(key[0]) if key[0] != "~" else None
            callers = raw[key][4] if key in raw else {}
            if (label is not None and label != REST) or not callers:
                owned[label or REST] = owned.get(label or REST, 0.0) + t
                continue
            total = sum(c[2] for c in callers.values()) or float(len(callers))
            for caller, c in callers.items():
                share = (c[2] / total) if total else 1.0 / len(callers)
                passed[caller] = passed.get(caller, 0.0) + t * share
        if not passed:
            break
        pending = passed
    else:
        for t in pending.values():
            owned[REST] = owned.get(REST, 0.0) + t
    total = sum(owned.values()) or 1.0
    return sorted(((k, v / total) for k, v in owned.items()), key=lambda kv: -kv[1])


def top_functions(stats: pstats.Stats, top: int) -> list[tuple[str, int, float]]:
    raw = stats.stats  # type: ignore[attr-defined]
    rows = [
        (f"{Path(f).name}:{line} {name}", nc, tottime)
        for (f, line, name), (_cc, nc, tottime, _ct, _callers) in raw.items()
        if not _waiting(f, name)
    ]
    total = sum(r[2] for r in rows) or 1.0
    return [(n, c, t / total) for n, c, t in sorted(rows, key=lambda r: -r[2])[:top]]


async def main_async(n: int, from_store: bool, top: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        fc = FacadeCycle(Path(d), held_agents=not from_store)
        try:
            await cycles(fc, WARMUP, "w")
            wall, cpu = await cycles(fc, n, "t")
            profile = cProfile.Profile()
            await cycles(fc, n, "p", profile)
        finally:
            fc.close()
    stats = pstats.Stats(profile)
    held = "resumed from the stored snapshot" if from_store else "the paused Agent held"
    print(f"facade cycle, {n} cycles, {held}")
    print()
    print("| measure (no profiler) | per cycle |")
    print("|---|---:|")
    print(f"| wall | {wall:.2f} ms |")
    print(f"| the loop thread's CPU | {cpu:.2f} ms |")
    print()
    print("| owner (cProfile: own time, a C or stdlib call with its caller; the epoll wait left out) | share |")
    print("|---|---:|")
    for label, share in by_owner(stats):
        print(f"| {label} | {share * 100:.1f}% |")
    print()
    print(f"| function (the {top} with the most own time) | calls per cycle | share |")
    print("|---|---:|---:|")
    for name, calls, share in top_functions(stats, top):
        print(f"| {name} | {calls / n:.1f} | {share * 100:.1f}% |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=300, help="cycles measured, then profiled (default 300)")
    ap.add_argument("--from-store", action="store_true", help="no paused Agent kept: resume from the snapshot")
    ap.add_argument("--top", type=int, default=25, help="functions listed (default 25)")
    args = ap.parse_args(argv)
    asyncio.run(main_async(args.cycles, args.from_store, args.top))


if __name__ == "__main__":
    main()
