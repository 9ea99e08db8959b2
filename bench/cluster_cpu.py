"""The CPU a local PostgreSQL cluster spends (the postmaster and all its processes), from /proc.

bench.bench_peers prints it per cycle of (e), (e') and (g): on a loaded machine it shows a change
to the store's statements when cycles/s cannot. A cluster that is not on this machine, or whose
data directory cannot be read, gives no figure (the bench says so).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, utime + stime in ticks) of a process, or None if it has gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "
    return int(fields[1]), int(fields[11]) + int(fields[12])


def cluster_cpu(postmaster: int) -> float:
    """Seconds of CPU the postmaster and its child processes have used so far (live ones only:
    a connection's backend that ended takes its figure with it, so keep connections open)."""
    ticks = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat(entry.name)
        if st is not None and (st[0] == postmaster or int(entry.name) == postmaster):
            ticks += st[1]
    return ticks * TICK_S


def cluster_probe(url: str) -> Callable[[], float] | str:
    """A function reading the cluster's CPU seconds, or why there is none."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        pid_file = Path(str(row[0] if row else "")) / "postmaster.pid"
        postmaster = int(pid_file.read_text().split("\n", 1)[0])
    except (psycopg.Error, OSError, ValueError) as e:
        return f"the cluster's CPU not read ({type(e).__name__}: {e})"
    if _stat(str(postmaster)) is None:
        return "the cluster's CPU not read (its postmaster is not a process on this machine)"
    return lambda: cluster_cpu(postmaster)
