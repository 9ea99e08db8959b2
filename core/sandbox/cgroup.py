"""A cgroup v2 leaf per sandbox run, where the host delegates one: the run as a whole gets
`memory.max` (shared memory and its tmpfs pages counted, no swap) and `pids.max`, which per-process
rlimits cannot give. Where the host has no cgroup v2 with the memory and pids controllers for us
(cgroup v1, or no delegation), `detect()` says why and the sandbox runs without one; the banner
says which regime is in force.

The layout, under the server's own cgroup D (from /proc/self/cgroup):
D/sandbox-runs/run-<token>/ per run, with D's and sandbox-runs' subtree_control enabling memory
and pids. A cgroup cannot both hold processes and hand controllers to children, so when D holds
the server itself, the server first moves into D/server (nothing else may be in D).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
NEEDED = ("memory", "pids")


@dataclass(frozen=True)
class RunCgroups:
    base: Path  # its children are the runs' leaves

    def leaf(self, memory: int, pids: int) -> Path:
        p = self.base / f"run-{secrets.token_hex(8)}"
        p.mkdir(mode=0o755)
        try:
            (p / "memory.max").write_text(str(memory))
            with contextlib.suppress(OSError):  # no swap configured: nothing to cap
                (p / "memory.swap.max").write_text("0")
            (p / "pids.max").write_text(str(pids))
        except OSError:
            self.remove(p)
            raise
        return p

    @staticmethod
    def hits(leaf: Path) -> list[str]:
        """Which of the leaf's limits stopped something: `run_memory` (the OOM killer ran) or `nproc`."""
        out: list[str] = []
        for name, key, hit in (("memory.events", "oom_kill", "run_memory"), ("pids.events", "max", "nproc")):
            with contextlib.suppress(OSError, ValueError):
                for line in (leaf / name).read_text().splitlines():
                    k, _, v = line.partition(" ")
                    if k == key and int(v) > 0:
                        out.append(hit)
        return out

    @staticmethod
    def remove(leaf: Path) -> None:
        """Kill whatever is left in the leaf, then remove it (bounded: a few tries)."""
        with contextlib.suppress(OSError):
            (leaf / "cgroup.kill").write_text("1")
        for _ in range(50):
            try:
                leaf.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def _enable(d: Path) -> None:
    (d / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in NEEDED))


def detect() -> tuple[RunCgroups | None, str]:
    """The per-run cgroup parent, or None and why not. Creates D/sandbox-runs (and may move this
    process into D/server) and tries one leaf with both limits written."""
    if not (ROOT / "cgroup.controllers").is_file():
        return None, "no cgroup v2 at /sys/fs/cgroup (cgroup v1 or hybrid)"
    try:
        own = next(
            line[3:].strip() for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")
        )
        d = ROOT / own.lstrip("/")
        have = (d / "cgroup.controllers").read_text().split()
        if not all(c in have for c in NEEDED):
            return None, f"the server's cgroup {own} has no {'/'.join(NEEDED)} controllers delegated"
        base = d / "sandbox-runs"
        base.mkdir(mode=0o755, exist_ok=True)
        try:
            _enable(d)
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            srv = d / "server"  # D holds processes: move the server into a leaf of its own
            srv.mkdir(mode=0o755, exist_ok=True)
            (srv / "cgroup.procs").write_text(str(os.getpid()))
            _enable(d)
        _enable(base)
        cg = RunCgroups(base)
        RunCgroups.remove(cg.leaf(64 << 20, 8))  # both limits can really be written
        return cg, f"cgroup v2 leaf per run under {base}"
    except (OSError, StopIteration) as e:
        return None, f"cannot make a cgroup v2 leaf per run here: {e}"


def join(leaf: Path) -> None:
    """In the child between fork and exec: move itself into the run's leaf before bubblewrap."""
    with open(leaf / "cgroup.procs", "w") as f:
        f.write("0")
