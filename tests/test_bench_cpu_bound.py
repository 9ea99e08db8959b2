"""bench/cpu_bound.py: the earliest a CPU-bound burst's median click can be done (issue 12's load
targets), from the CPU the burst used. The arithmetic with given readings, and the readings
themselves from this process's /proc entries. No timing is asserted."""

from __future__ import annotations

import os
import threading
import time

import pytest

from bench.cpu_bound import CpuMeter, bound_lines, least_median, main_thread_cpu, proc_cpu


class Readings:
    """CPU seconds per pid that the test moves forward: one reader for whole processes, one for loops."""

    def __init__(self) -> None:
        self.whole: dict[int, float] = {}
        self.loop: dict[int, float] = {}

    def spend(self, pid: int, loop: float, threads: float = 0.0) -> None:
        self.loop[pid] = self.loop.get(pid, 0.0) + loop
        self.whole[pid] = self.whole.get(pid, 0.0) + loop + threads

    def meter(self, servers: list[int], own: int) -> CpuMeter:
        return CpuMeter(servers, own, lambda p: self.whole.get(p, 0.0), lambda p: self.loop.get(p, 0.0))


def test_two_servers_on_two_cores_are_bound_by_all_the_cpu() -> None:
    cpu = Readings()
    m = cpu.meter([11, 12], own=10)
    cpu.spend(11, loop=5.0)  # before the burst: not counted
    for _ in range(2):  # two bursts of 50 clicks, 25 to each server
        with m.burst(50):
            cpu.spend(11, loop=0.100, threads=0.050)
            cpu.spend(12, loop=0.200, threads=0.050)
            cpu.spend(10, loop=0.100)  # the client and the platform stand-in
    b = least_median(m, 50, cores=2)
    assert m.clicks == 100
    assert b.loop_per_click == pytest.approx(0.200 / 50)  # the least loop: server 11's 0.2 s over its 50 clicks
    assert b.all_per_click == pytest.approx(1.0 / 100)
    # the median of 50 needs 25 clicks' CPU on 2 cores (125 ms) > 12.5 clicks on the lighter loop (50 ms)
    assert b.median_at == pytest.approx(0.125)
    assert b.ratio(0.010) == pytest.approx(12.5)


def test_one_loop_is_bound_by_its_own_cpu_however_many_cores() -> None:
    cpu = Readings()
    m = cpu.meter([20], own=20)  # the server in this process: counted once
    with m.burst(100):
        cpu.spend(20, loop=0.800, threads=0.400)
    b = least_median(m, 100, cores=8)
    assert b.all_per_click == pytest.approx(0.012)  # not 0.024: the process counted twice
    assert b.median_at == pytest.approx(50 * 0.008)  # 50 clicks on one loop, not 50 * 12 ms / 8 cores
    lines = bound_lines(b, 0.010, "p50 / 1 at a time", lambda x: "out of reach" if x > 15 else "within reach")
    assert lines[0] == "CPU per click in the burst: 8.0 ms on a server's event loop, 12.0 ms in all processes (8 cores)"
    assert lines[1].endswith("at least about 40.0x (the target is out of reach)"), lines


def test_no_burst_no_bound() -> None:
    with pytest.raises(ValueError):
        least_median(Readings().meter([1], own=1), 50)


def test_the_readings_come_from_proc_and_the_loop_is_the_first_thread() -> None:
    """The CPU of a busy other thread is in the process's reading and not in the main thread's."""
    pid = os.getpid()
    whole0, loop0 = proc_cpu(pid), main_thread_cpu(pid)
    stop = threading.Event()

    def spin() -> None:
        n = 0
        while not stop.is_set():
            n += 1

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        before, deadline = proc_cpu(pid, worker.native_id), time.monotonic() + 30
        while proc_cpu(pid, worker.native_id) - before < 0.05 and time.monotonic() < deadline:
            stop.wait(0.01)
    finally:
        stop.set()
        worker.join()
    spent = proc_cpu(pid) - whole0
    assert round(spent, 6) >= 0.05  # tick counts divided by 100: 0.05 can come out as 0.0499999...
    assert main_thread_cpu(pid) - loop0 < spent
