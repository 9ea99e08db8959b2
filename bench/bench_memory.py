"""Does anything grow per chat forever? RSS after N1 vs after N2 approval cycles (issue 12).

    .venv/bin/python -m bench.bench_memory [--first 1000] [--total 10000] [--warmup 50]

Runs full cycles (turn -> card -> resume with the secret -> answered) through the facade
`core.approvals.Approvals` on the embedded store (SQLite, the objects in the same file), each on
a chat of its own, one after another in one process, and reads this process's resident set size
after `--first` cycles and again after `--total`. Both readings follow a full garbage
collection. Issue 12's
memory target is a difference within 20 MB between 1,000 and 10,000 cycles; this prints the
numbers and asserts nothing. Smaller counts (`--first 10 --total 100`) only check the bench runs.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path

from bench.facade import FacadeCycle, rss_bytes

MB = 1024 * 1024


async def measure(root: Path, first: int, total: int, warmup: int) -> list[tuple[str, int, float, int]]:
    """(label, cycles, seconds, RSS bytes) after the warm-up, after `first` and after `total` cycles;
    the warm-up's chats are not counted in `first` or `total`."""
    facade = FacadeCycle(root)
    readings: list[tuple[str, int, float, int]] = []
    try:
        for i in range(warmup):  # imports and first allocations are not per-chat growth
            await facade.cycle(f"warm-{i}")
        gc.collect()
        readings.append((f"after warm-up ({warmup} cycles, not counted)", 0, 0.0, rss_bytes()))
        start = time.perf_counter()
        done = 0
        for target in (first, total):
            for i in range(done, target):
                await facade.cycle(f"chat-{i}")
            done = target
            gc.collect()
            readings.append((f"after {done} cycles", done, time.perf_counter() - start, rss_bytes()))
    finally:
        facade.close()
    return readings


def report(readings: list[tuple[str, int, float, int]]) -> list[str]:
    lines = ["| reading | cycles (distinct chats) | elapsed s | RSS MB |", "|---|---:|---:|---:|"]
    for label, cycles, seconds, rss in readings:
        lines.append(f"| {label} | {cycles} | {seconds:.1f} | {rss / MB:.1f} |")
    (_, n1, _, r1), (_, n2, _, r2) = readings[-2], readings[-1]
    lines.append(f"| difference ({n2} - {n1} cycles) | {n2 - n1} | | {(r2 - r1) / MB:+.1f} |")
    lines.append(f"| per cycle after the first {n1} | | | {(r2 - r1) / max(1, n2 - n1) / 1024:+.2f} KB |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--first", type=int, default=1000, help="cycles before the first reading (default 1000)")
    ap.add_argument("--total", type=int, default=10000, help="cycles before the second reading (default 10000)")
    ap.add_argument("--warmup", type=int, default=50, help="cycles before the baseline reading (default 50)")
    args = ap.parse_args(argv)
    if not 1 <= args.first < args.total or args.warmup < 0:
        ap.error("need 1 <= --first < --total and --warmup >= 0")
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as d:
        readings = asyncio.run(measure(Path(d), args.first, args.total, args.warmup))
    print(f"\nRSS through the facade on the embedded store, one chat per cycle ({args.total} cycles)\n")
    print("\n".join(report(readings)))
    print("\nnote: issue 12's target is a difference within 20 MB between 1,000 and 10,000 cycles")


if __name__ == "__main__":
    main()
