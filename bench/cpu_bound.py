"""How soon the median click of a CPU-bound burst can be done on this machine, from the CPU the
burst used (issue 12's load targets). An estimate, printed by bench_slack and bench_teams.

A burst of n clicks at once, served by r processes with one event loop each, on k cores. Its median
click is done only once n/2 clicks are, so by then
  - (loop) some server process has finished n/(2r) of its clicks, and its event loop (one thread:
    Python code runs under the GIL) has spent about their share of the loop CPU it spent in the burst;
  - (cores) all the processes together (the servers, and this one playing the client and the
    platform) have spent about half the burst's CPU, on at most k cores.
The larger of the two is about the earliest the median click can finish, however the server orders
its work; over the one-at-a-time p50 it is about the least p50 ratio this arrangement can show here.
It assumes every click costs the burst's average and that nothing else waits (no lock, no disk, no
queueing behind other processes' work), so the real least is higher, never lower: a ratio above the
target here means the target is out of reach in this arrangement on this machine, whatever the server
does; below it, not ruled out. CPU times are read from /proc (Linux), in clock ticks (10 ms): the
bench sums them over every burst it sends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int, thread: int | None = None) -> float:
    """CPU seconds (user + system) of process `pid`, or of its thread `thread`, so far."""
    path = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def main_thread_cpu(pid: int) -> float:
    """CPU seconds of the process's first thread: the one that runs its event loop."""
    return proc_cpu(pid, pid)


Reader = Callable[[int], float]


@dataclass
class CpuMeter:
    """CPU spent during the bursts by each server's event loop and by all processes. `servers` are
    the server processes' pids (this process's own when the server runs in it); this process (the
    client and the platform stand-in) is always counted in the total."""

    servers: Sequence[int]
    own: int = field(default_factory=os.getpid)
    whole: Reader = proc_cpu
    loop: Reader = main_thread_cpu
    loops: dict[int, float] = field(default_factory=dict)
    total: float = 0.0
    clicks: int = 0

    def _pids(self) -> list[int]:
        return list(dict.fromkeys([*self.servers, self.own]))  # this process once, even when it serves

    @contextlib.contextmanager
    def burst(self, clicks: int) -> Iterator[None]:
        """Counts the CPU spent inside the block, a burst of `clicks` clicks."""
        whole0 = {p: self.whole(p) for p in self._pids()}
        loop0 = {p: self.loop(p) for p in self.servers}
        yield
        for p in self.servers:
            self.loops[p] = self.loops.get(p, 0.0) + self.loop(p) - loop0[p]
        self.total += sum(self.whole(p) - whole0[p] for p in self._pids())
        self.clicks += clicks


@dataclass(frozen=True)
class Bound:
    loop_per_click: float  # seconds of the server loop's CPU per click (its share of the burst)
    all_per_click: float  # seconds of all processes' CPU per click
    median_at: float  # seconds: about the earliest the median click of one burst can be done
    cores: int

    def ratio(self, single_p50: float) -> float:
        return self.median_at / single_p50


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def least_median(meter: CpuMeter, burst: int, cores: int | None = None) -> Bound:
    """The earliest the median of `burst` clicks sent at once can be done, from what `meter` counted
    over all the bursts (each of `burst` clicks, spread evenly over the servers)."""
    if meter.clicks <= 0 or not meter.servers:
        raise ValueError("no burst was measured")
    k = cores or usable_cores()
    r = len(meter.servers)
    per_server = meter.clicks / r
    # Pigeonhole: when n/2 clicks are done, some server has done n/(2r): the least loop among them.
    loop = min(meter.loops[p] for p in meter.servers) / per_server
    every = meter.total / meter.clicks
    return Bound(loop, every, max(burst / (2 * r) * loop, burst / 2 * every / k), k)


WITHIN, OUT = "within reach here", "out of reach in this arrangement on this machine"  # the verdict's words


def reach(least: float, target: float = 15.0) -> str:
    """The verdict on a target of at most `target` times, given the least ratio the bound allows."""
    return WITHIN if least <= target else OUT


def bound_lines(bound: Bound, single_p50: float, what: str, verdict: Callable[[float], str]) -> list[str]:
    """The two lines the benches print under their ratios."""
    ratio = bound.ratio(single_p50)
    return [
        f"CPU per click in the burst: {bound.loop_per_click * 1000:.1f} ms on a server's event loop, "
        f"{bound.all_per_click * 1000:.1f} ms in all processes ({bound.cores} cores)",
        f"so its median click is done {bound.median_at * 1000:.0f} ms after it starts at the earliest: "
        f"{what} / 1 at a time at least about {ratio:.1f}x (the target is {verdict(ratio)})",
    ]
