"""`serve --cpus LIST`: pin the server process to some of the machine's cores (Linux).

Why: a server's Python runs under one GIL, so one process uses about one core whatever it is given.
Left to the scheduler, its event loop and its store and HTTP threads move between cores and hand
the GIL across them, and two replicas on one machine keep landing on the same core. Pinned, one
replica per core, a 50-click Teams burst's median click came back about 10% sooner
(docs/benchmarks.md, "One replica per core").
"""

from __future__ import annotations

import os

MAX_CPUS = 8192  # Linux's largest NR_CPUS: a higher number is a typo, refused before a range is expanded


def parse_cpu_list(text: str) -> frozenset[int]:
    """Linux's CPU list syntax, as taskset -c and /sys use it: `0`, `0-3`, `0,2-3`. Empty: none."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        if not (_number(low) and (not dash or _number(high))):
            raise ValueError(f"--cpus {text!r}: expected a CPU list such as 0, 0-3 or 0,2-3")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"--cpus {text!r}: the range {part} runs backwards")
        if last >= MAX_CPUS:
            raise ValueError(f"--cpus {text!r}: CPU {last} is past Linux's largest ({MAX_CPUS - 1})")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()  # not "²", which isdigit() accepts and int() refuses


def format_cpu_list(cpus: frozenset[int]) -> str:
    """The shortest CPU list naming `cpus`: {0, 1, 2, 5} -> `0-2,5`."""
    parts: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c != run[-1] + 1:
            parts.append(_span(run))
            run = []
        run.append(c)
    if run:
        parts.append(_span(run))
    return ",".join(parts)


def _span(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def pin_process(text: str) -> str:
    """Restricts this process (and every thread it starts afterwards) to the CPUs `text` lists;
    call it before any thread starts. Returns the line for the start-up banner. Empty `text`
    changes nothing. A CPU this process may not use is refused, not silently dropped."""
    if not text.strip():
        return "all available (--cpus not set)"
    wanted = parse_cpu_list(text)
    if not wanted:
        raise ValueError(f"--cpus {text!r}: names no CPU")
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("--cpus needs Linux (sched_setaffinity)")
    allowed = frozenset(os.sched_getaffinity(0))
    if not wanted <= allowed:
        raise ValueError(
            f"--cpus {text!r}: CPU {format_cpu_list(wanted - allowed)} is not available to this process "
            f"(available: {format_cpu_list(allowed)})"
        )
    os.sched_setaffinity(0, wanted)
    return f"{format_cpu_list(wanted)} (pinned)"
