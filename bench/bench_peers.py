"""One approval cycle here against its peers, interleaved in blocks in one process (issue 12).

    .venv/bin/python -m bench.bench_peers [--cycles 300] [--block 25] [--warmup 5]

Every variant runs the same shape offline, one new conversation per cycle: a user message, the
model calls one tool, the tool interrupts for a human answer, the answer {"approved": true}
resumes the run, the model replies with text.

  (a) Strands 1.62, the paused Agent kept in memory and resumed (the ceiling). No durability.
  (a') the same through the sync `agent(...)` call instead of `invoke_async` (a worker thread
      and an event loop per call): shown because it is what a sync caller pays; (d) is async.
  (b) Strands: `Agent.take_snapshot(preset="session")` as JSON to a new file, file and folder
      fsync'd, read back, `Snapshot.from_dict` -> `load_snapshot` into a new Agent, resumed.
  (c) LangGraph + `SqliteSaver` on a file, `durability="sync"`, `interrupt()` in the tool node,
      resumed with `Command(resume=...)`. Needs the `bench` extra (pip install -e '.[bench]');
      skipped with a note without it.
  (d) chat-approvals through its facade `core.approvals.Approvals`, in-process, on the embedded
      store (SQLite, the objects in the same file: `--objects sqlite:///...`), the offline
      scripted model: turn -> card -> resume with the secret -> answered. Its store round trips
      per cycle are counted and printed too.
      The click reaches the process that paused the turn, which resumes the Agent it holds.
  (d') the same, but every click resumes from the stored snapshot (a new Agent), as a click
      that reaches another process does.
  (d'') (d') with the objects in a folder (SQLite + files, each object file fsync'd).
  (h) the least durable cycle on Strands' snapshot API (bench/least_cycle.py): the Agent of (a),
      its session snapshot encoded and committed with the pointer, the turn lease's, the claim's
      and the finish's commits, each fsync'd through a thread, and nothing else: the most (d)
      could reach here. (h') the same without the lease's own commit. Both run after the
      others, in their own blocks with (a) and the bare commit again, and are judged against the
      floor measured there (their commits slow the bare commit in the same blocks).

With a PostgreSQL server (`--postgres URL`, default $CHAT_APPROVALS_TEST_PG, which
scripts/test.d/30-postgres.sh writes), on that same server in the same run (issue 30):
  (e) chat-approvals through its facade on the PostgreSQL store (rows and objects in one
      database, `--store postgresql://...`); the click reaches the replica that paused the turn.
  (e') the same, every click resumed from the stored snapshot (no Agent held), as a click that
      reaches another replica is: the like of (g), which always loads its checkpoint.
      Their database round trips per cycle: bench.bench_store (5). The cluster's CPU per
      cycle (its processes, from /proc) is printed for each when the cluster runs on this
      machine: on a loaded machine it shows a change to the statements when cycles/s cannot.
  (g) LangGraph + `PostgresSaver` (langgraph-checkpoint-postgres, the `bench` extra), the same
      graph as (c), `durability="sync"`. Skipped with a note without the extra.

The durability budget: one fsync'd SQLite commit (as the embedded store commits: WAL,
synchronous=FULL) is timed in the same blocks, and the bench prints what 0.8x of (a) leaves per
cycle against the protocol's least durable commits per cycle (pointer R7, claim R10, finish R12).

(a) and (b) use this project's offline `ScriptedModel` with a bare interrupting tool of the same
name, so the model's messages are the same as in (d). Each block runs `--block` cycles of each
variant back to back; the starting variant rotates per block, so drift on this shared machine
spreads over all of them. cycles/s is cycles over the summed wall time of the variant's
blocks; p50/p99 are per cycle. Compare ratios within one run only: absolute numbers on a shared
machine swing from run to run. Nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strands import Agent, Snapshot, ToolContext, tool
from strands.types.interrupt import InterruptResponseContent
from strands.types.session import decode_bytes_values, encode_bytes_values

from bench.cluster_cpu import cluster_probe
from bench.facade import TEXT, CycleFailed, FacadeCycle
from bench.least_cycle import LeastCycle
from chat_approvals.core.agent import APPROVAL_TOOL, SYSTEM_PROMPT, ScriptedModel
from chat_approvals.store.sqlite_writes import connect

APPROVED = {"approved": True}

Cycle = Callable[[int], Awaitable[None]]


@dataclass
class Variant:
    key: str
    label: str
    cycle: Cycle
    latencies_ms: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cluster_cpu_s: float = 0.0  # the PostgreSQL cluster's CPU during this variant's blocks


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# --- (a) and (b): plain Strands ----------------------------------------------------------


@tool(name=APPROVAL_TOOL, context=True)
async def ask_human(reason: str, tool_context: ToolContext, urls: list[str] | None = None) -> str:
    """Ask the user to approve downloads.

    Args:
        reason: why
        urls: what to download
    """
    answer = tool_context.interrupt("approval", reason={"reason": reason, "urls": urls or []})
    return "approved" if answer.get("approved") else "denied"


def new_agent() -> Agent:
    return Agent(model=ScriptedModel(), tools=[ask_human], system_prompt=SYSTEM_PROMPT, callback_handler=None)


def _text(result: Any) -> str:
    return "".join(b.get("text", "") for b in (result.message or {}).get("content", []))


def answer_of(interrupt_id: str) -> list[InterruptResponseContent]:
    return [{"interruptResponse": {"interruptId": interrupt_id, "response": APPROVED}}]


async def _pause(agent: Agent) -> str:
    r = await agent.invoke_async(TEXT)
    if r.stop_reason != "interrupt" or len(r.interrupts or []) != 1:
        raise CycleFailed(f"expected one interrupt, got {r.stop_reason}")
    return str(r.interrupts[0].id)  # type: ignore[index]


async def _resume(agent: Agent, interrupt_id: str) -> None:
    r = await agent.invoke_async(answer_of(interrupt_id))
    if r.stop_reason != "end_turn" or not _text(r).startswith("Approved"):
        raise CycleFailed(f"expected the approved reply, got {r.stop_reason}: {_text(r)!r}")


async def strands_in_memory(i: int) -> None:
    agent = new_agent()
    interrupt_id = await _pause(agent)
    await _resume(agent, interrupt_id)


async def strands_in_memory_sync_call(i: int) -> None:
    """(a) through the sync `agent(...)`, which starts a thread and an event loop per call."""
    agent = new_agent()
    r = agent(TEXT)
    if r.stop_reason != "interrupt" or len(r.interrupts or []) != 1:
        raise CycleFailed(f"expected one interrupt, got {r.stop_reason}")
    done = agent(answer_of(r.interrupts[0].id))  # type: ignore[index]
    if done.stop_reason != "end_turn" or not _text(done).startswith("Approved"):
        raise CycleFailed(f"expected the approved reply, got {done.stop_reason}")


def write_durably(path: Path, data: bytes) -> None:
    """A new file that survives a crash: its bytes and its folder entry fsync'd."""
    with open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def strands_snapshot(folder: Path) -> Cycle:
    async def cycle(i: int) -> None:
        agent = new_agent()
        interrupt_id = await _pause(agent)
        snap = agent.take_snapshot(preset="session")
        path = folder / f"{i}.json"
        write_durably(path, json.dumps(encode_bytes_values(snap.to_dict()), separators=(",", ":")).encode())
        del agent
        resumed = new_agent()
        resumed.load_snapshot(Snapshot.from_dict(decode_bytes_values(json.loads(path.read_bytes()))))
        await _resume(resumed, interrupt_id)

    return cycle


# --- the durability budget: one fsync'd commit, timed in the same blocks ------------------


def durable_commit(conn: sqlite3.Connection) -> Cycle:
    """One commit on a connection the embedded store opens (WAL, synchronous=FULL), BEGIN
    IMMEDIATE, of a 2 KB row, the size of (d)'s snapshot: what each of a cycle's durable
    writes costs at least."""
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")

    async def cycle(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (i, os.urandom(2048)))
        conn.execute("COMMIT")

    return cycle


def durable_commit_off_loop(path: Path) -> tuple[Cycle, Callable[[], None]]:
    """The same commit in a thread, awaited from the loop, as the store must make it (R21: an
    fsync never on the event loop): what each durable write costs the cycle at least. Its
    connection is opened in that thread. Returns the cycle and its closer."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-commit")
    held: list[sqlite3.Connection] = []

    def commit(i: int) -> None:
        if not held:
            held.append(connect(str(path)))
            held[0].execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v BLOB)")
        conn = held[0]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (i, os.urandom(2048)))
        conn.execute("COMMIT")

    async def cycle(i: int) -> None:
        await asyncio.get_running_loop().run_in_executor(pool, commit, i)

    def close() -> None:
        pool.submit(lambda: [c.close() for c in held]).result()
        pool.shutdown()

    return cycle, close


def floor_lines(variants: list[Variant], commit: Variant, hopped: Variant, target: float = 0.8) -> list[str]:
    """Issue 34's target 1: (d)'s rate against the durable floor's, (a) plus three commits."""
    a = next(v for v in variants if v.key == "a")
    d = next(v for v in variants if v.key == "d")
    a_ms = a.wall_s / len(a.latencies_ms) * 1000
    d_rate = len(d.latencies_ms) / d.wall_s
    lines = []
    for name, c in (
        ("(a) + 3 fsync'd commits", commit),
        ("(a) + 3 fsync'd commits each through a thread (R21)", hopped),
    ):
        floor = 1000 / (a_ms + MIN_COMMITS * pct(c.latencies_ms, 50))
        ratio = d_rate / floor
        verdict = "met" if ratio >= target else "not met"
        lines.append(
            f"floor {name}: {floor:.1f} cycles/s; (d) {d_rate:.1f} cycles/s = {ratio:.2f}x of it "
            f"(target >= {target}x: {verdict})"
        )
    # the bound the protocol sets: a new turn's lease is its own commit, durable before its agent
    # runs (one turn per chat across replicas), so (d) pays a fourth commit and its hop
    floor = 1000 / (a_ms + MIN_COMMITS * pct(commit.latencies_ms, 50))
    four = 1000 / (a_ms + (MIN_COMMITS + 1) * pct(hopped.latencies_ms, 50))
    lines.append(
        f"bound with the turn lease's own commit: (a) + {MIN_COMMITS + 1} fsync'd commits each through a thread = "
        f"{four:.1f} cycles/s = {four / floor:.2f}x of the floor: the most (d) reaches with nothing else added"
    )
    return lines


# The protocol's durable commits per cycle, each fsync'd before the step that relies on it:
# the pointer before the card is posted (R7), the claim before the resumed run (R10), the
# finish (R12); the turn lease makes a fourth.
MIN_COMMITS = 3


async def least_phase(root: Path, cycles: int, block: int, warmup: int, target: float = 0.8) -> list[str]:
    """Target 1's bound run for real (bench/least_cycle.py), in its own blocks after the others:
    its commits make the bare commit's p50 in the same blocks higher (0.31 -> 0.38-0.41 ms here),
    which would lower the floor (d) is judged against. So (h) and (h') are judged against a floor
    measured beside them: (a) and the bare commit again, in the same blocks."""
    conn = connect(str(root / "least-commits.db"))
    least = LeastCycle(root / "least.db", new_agent, _pause, _resume, lease=True)
    folded = LeastCycle(root / "least-folded.db", new_agent, _pause, _resume, lease=False)
    a = Variant("a", "(a) Strands, same Agent kept in memory, again", strands_in_memory)
    commit = Variant("f", "one fsync'd SQLite commit, again", durable_commit(conn))
    phase = [
        a,
        Variant("h", "(h) the least durable cycle on Strands' snapshot API (4 commits)", least.cycle),
        Variant("h2", "(h') the same without the turn lease's own commit (3 commits)", folded.cycle),
        commit,
    ]
    try:
        await run_blocks(phase, 0, block, warmup)
        await run_blocks(phase, cycles, block, 0)
    finally:
        least.close()
        folded.close()
        conn.close()
    a_ms = a.wall_s / len(a.latencies_ms) * 1000
    c = pct(commit.latencies_ms, 50)
    floor = 1000 / (a_ms + MIN_COMMITS * c)
    lines = [
        "| the least durable cycle, in its own blocks | cycles | cycles/s | p50 ms | p99 ms | ratio to the floor |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    verdicts = []
    for v in phase[:3]:
        rate = len(v.latencies_ms) / v.wall_s
        lines.append(
            f"| {v.label} | {len(v.latencies_ms)} | {rate:.1f} | {pct(v.latencies_ms, 50):.2f} | "
            f"{pct(v.latencies_ms, 99):.2f} | {rate / floor:.2f} |"
        )
        if v.key != "a":
            reach = "out of reach here" if rate / floor < target else "not ruled out"
            name = "(h), with the turn lease's own commit" if v.key == "h" else "(h'), the lease folded into the pause"
            verdicts.append(
                f"least durable cycle on Strands' snapshot API {name}: {rate / floor:.2f}x of the floor: "
                f"the most (d) reaches (target {target}x: {reach})"
            )
    return [
        *lines,
        "",
        f"floor in these blocks: (a) + {MIN_COMMITS} fsync'd commits (p50 {c:.2f} ms) = {floor:.1f} cycles/s; "
        f"the snapshot (h) stores: {least.snapshot_bytes:,} bytes",
        *verdicts,
    ]


def budget(variants: list[Variant], commit: Variant, target: float = 0.8) -> list[str]:
    """What `target` x (a) leaves for durability, against what a commit costs in this run."""
    per_cycle = pct(variants[0].latencies_ms, 50)
    allowed = per_cycle / target - per_cycle
    c = pct(commit.latencies_ms, 50)
    best = per_cycle / (per_cycle + MIN_COMMITS * c)
    return [
        f"(a) p50 {per_cycle:.2f} ms: {target}x of (a) leaves {allowed:.2f} ms per cycle for all (a) does not do",
        f"one fsync'd SQLite commit (WAL, synchronous=FULL, 2 KB) p50 here: {c:.2f} ms; "
        f"{MIN_COMMITS} per cycle at least (pointer R7, claim R10, finish R12) = {MIN_COMMITS * c:.2f} ms",
        f"=> a durable cycle on this disk reaches at most {best:.2f}x of (a) "
        f"with nothing else added ({'below' if best < target else 'above'} the {target}x target)",
    ]


# --- (c) LangGraph: bench/peer_langgraph.py, only with the bench extra --------------------


def langgraph_postgres_cycle(url: str) -> Any:
    """A LangGraphPostgresCycle on `url`, or why (g) is skipped."""
    try:
        from bench.peer_langgraph_postgres import LangGraphPostgresCycle
    except ImportError as e:
        return f"LangGraph's PostgresSaver not installed ({e.name}); install the bench extra: pip install -e '.[bench]'"
    return LangGraphPostgresCycle(url)


def postgres_facade(url: str, root: Path, held_agents: bool) -> tuple[FacadeCycle, Callable[[], None]]:
    """(e): the facade on a fresh schema of `url`, migrated as `store init` does; and its cleanup."""
    import secrets

    import psycopg

    from chat_approvals.store.postgres_init import init_postgres

    schema = f"peers{secrets.token_hex(4)}"
    schema_url = f"{url}{'&' if '?' in url else '?'}schema={schema}"
    init_postgres(schema_url)
    facade = FacadeCycle(root, held_agents=held_agents, store_url=schema_url)

    def close() -> None:
        facade.close()
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE".encode())

    return facade, close


def langgraph_cycle(db: Path) -> Any:
    """A LangGraphCycle, or why (c) is skipped."""
    try:
        from bench.peer_langgraph import LangGraphCycle
    except ImportError as e:
        return f"LangGraph not installed ({e.name}); install the bench extra: pip install -e '.[bench]'"
    return LangGraphCycle(db)


# --- the run -----------------------------------------------------------------------------


async def run_blocks(
    variants: list[Variant], cycles: int, block: int, warmup: int, cluster: Callable[[], float] | None = None
) -> None:
    for v in variants:  # imports, first table touch, first Agent
        for i in range(warmup):
            await v.cycle(-1 - i)
    done, b = 0, 0
    while done < cycles:
        n = min(block, cycles - done)
        for k in range(len(variants)):
            v = variants[(b + k) % len(variants)]
            cpu = cluster() if cluster else 0.0  # read outside the timed span
            start = time.perf_counter()
            for i in range(done, done + n):
                t = time.perf_counter()
                await v.cycle(i)
                v.latencies_ms.append((time.perf_counter() - t) * 1000)
            v.wall_s += time.perf_counter() - start
            if cluster:
                v.cluster_cpu_s += cluster() - cpu
        done += n
        b += 1


def table(variants: list[Variant]) -> list[str]:
    ceiling = len(variants[0].latencies_ms) / variants[0].wall_s
    sync = len(variants[1].latencies_ms) / variants[1].wall_s  # (a'): the issue's 175/s matched this one
    lines = [
        "| variant | cycles | cycles/s | p50 ms | p99 ms | ratio to (a) | ratio to (a') |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for v in variants:
        rate = len(v.latencies_ms) / v.wall_s
        lines.append(
            f"| {v.label} | {len(v.latencies_ms)} | {rate:.1f} | {pct(v.latencies_ms, 50):.2f} | "
            f"{pct(v.latencies_ms, 99):.2f} | {rate / ceiling:.2f} | {rate / sync:.2f} |"
        )
    return lines


def cluster_table(variants: list[Variant]) -> list[str]:
    """The PostgreSQL cluster's CPU per cycle of each variant that uses it (all its processes:
    the backends serving the cycles and its writers; clock ticks of 10 ms summed over the blocks)."""
    lines = ["| variant | the PostgreSQL cluster's CPU per cycle ms |", "|---|---:|"]
    for v in variants:
        lines.append(f"| {v.label.split(' ', 1)[0]} | {v.cluster_cpu_s * 1000 / len(v.latencies_ms):.2f} |")
    return lines


def round_trip_table(calls: Counter[str], cycles: int) -> list[str]:
    rows = sum(v for k, v in calls.items() if k.startswith("rows."))
    objects = sum(v for k, v in calls.items() if k.startswith("objects."))
    hops = calls["executor hops"]
    lines = [
        "| (d) store round trips per cycle | per cycle | in all cycles |",
        "|---|---:|---:|",
        f"| rows calls | {rows / cycles:.1f} | {rows} |",
        f"| object calls | {objects / cycles:.1f} | {objects} |",
        f"| total | {(rows + objects) / cycles:.1f} | {rows + objects} |",
        f"| executor hops (StoreIO.run) | {hops / cycles:.1f} | {hops} |",
    ]
    for name in sorted(k for k in calls if k != "executor hops"):
        lines.append(f"| {name} | {calls[name] / cycles:.2f} | {calls[name]} |")  # a lease renewal is rare
    return lines


async def main_async(cycles: int, block: int, warmup: int, postgres: str | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as d:
        root = Path(d)
        (root / "snapshots").mkdir()
        (root / "facade").mkdir()
        variants = [
            Variant("a", "(a) Strands, same Agent kept in memory (the ceiling)", strands_in_memory),
            Variant("a2", "(a') the same through the sync agent() call", strands_in_memory_sync_call),
            Variant("b", "(b) Strands snapshot -> file + fsync -> new Agent", strands_snapshot(root / "snapshots")),
        ]
        notes: list[str] = []
        closers: list[Callable[[], None]] = []
        cluster: Callable[[], float] | None = None
        lg = langgraph_cycle(root / "langgraph.db")
        if isinstance(lg, str):
            notes.append(f"(c) skipped: {lg}")
        else:
            variants.append(Variant("c", lg.label, lg.cycle))
            notes.append(f"(c) LangGraph's SQLite: {lg.durability()}")
            closers.append(lg.close)
        (root / "facade-files").mkdir()
        (root / "facade-store").mkdir()
        facade = FacadeCycle(root / "facade", objects="sqlite")
        cold = FacadeCycle(root / "facade-store", objects="sqlite", held_agents=False)
        folder = FacadeCycle(root / "facade-files", objects="files", held_agents=False)
        variants += [
            Variant(
                "d",
                "(d) chat-approvals facade, SQLite (objects in the same file), in-process",
                lambda i: facade.cycle(f"peers-{i}"),
            ),
            Variant(
                "d2",
                "(d') the same, every click resumed from the stored snapshot (no Agent held)",
                lambda i: cold.cycle(f"c-{i}"),
            ),
            Variant(
                "d3",
                "(d'') the same as (d'), the objects in a folder (SQLite + files)",
                lambda i: folder.cycle(f"f-{i}"),
            ),
        ]
        closers += [cold.close, folder.close]
        if postgres:
            pg, pg_close = postgres_facade(postgres, root / "facade-pg", held_agents=True)
            pg_cold, pg_cold_close = postgres_facade(postgres, root / "facade-pg-cold", held_agents=False)
            variants += [
                Variant(
                    "e",
                    "(e) chat-approvals facade, PostgreSQL (rows and objects in one database), in-process",
                    lambda i: pg.cycle(f"pg-{i}"),
                ),
                Variant(
                    "e2",
                    "(e') the same, every click resumed from the stored snapshot (no Agent held)",
                    lambda i: pg_cold.cycle(f"pgc-{i}"),
                ),
            ]
            closers += [pg_close, pg_cold_close]
            lgp = langgraph_postgres_cycle(postgres)
            if isinstance(lgp, str):
                notes.append(f"(g) skipped: {lgp}")
            else:
                variants.append(Variant("g", lgp.label, lgp.cycle))
                closers.append(lgp.close)
            probe = cluster_probe(postgres)
            if isinstance(probe, str):
                notes.append(probe)
            else:
                cluster = probe
        else:
            notes.append("(e), (g) skipped: no PostgreSQL (--postgres URL or CHAT_APPROVALS_TEST_PG)")
        commits = connect(str(root / "commits.db"))
        closers.append(commits.close)
        commit = Variant("f", "one fsync'd SQLite commit", durable_commit(commits))
        off_loop, close_off_loop = durable_commit_off_loop(root / "commits-hop.db")
        closers.append(close_off_loop)
        hopped = Variant("f2", "the same through a thread", off_loop)
        try:
            await run_blocks([*variants, commit, hopped], 0, block, warmup)
            facade.tally.clear()  # count the measured cycles only
            await run_blocks([*variants, commit, hopped], cycles, block, 0, cluster)
            calls = Counter(facade.round_trips())
            notes.append(f"(d) store's SQLite: {await facade.sqlite_durability()}")
            least = await least_phase(root, cycles, block, warmup)
        finally:
            facade.close()
            for close in closers:
                close()
    print(f"\nOne approval cycle, {cycles} per variant, interleaved in blocks of {block} (warm-up {warmup})\n")
    print("\n".join(table(variants)))
    print()
    print("\n".join(round_trip_table(calls, cycles)))
    print()
    print("\n".join(budget(variants, commit)))
    print("\n".join(floor_lines(variants, commit, hopped)))
    print()
    print("\n".join(least))
    print()
    by_key = {v.key: v for v in variants}
    if "g" in by_key:
        g = by_key["g"]
        for key, name in (("e", "(e)"), ("e2", "(e')")):
            e = by_key[key]
            ratio = (len(e.latencies_ms) / e.wall_s) / (len(g.latencies_ms) / g.wall_s)
            print(f"{name} / (g), on the same PostgreSQL server: {ratio:.2f}x the cycles/s (target: at least 1.5x)")
        print()
    if cluster is not None:
        print("\n".join(cluster_table([by_key[k] for k in ("e", "e2", "g") if k in by_key])))
        print()
    for note in notes:
        print(f"note: {note}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=300, help="measured cycles per variant (default 300)")
    ap.add_argument("--block", type=int, default=25, help="cycles per variant per block (default 25)")
    ap.add_argument("--warmup", type=int, default=5, help="unmeasured cycles per variant first (default 5)")
    ap.add_argument(
        "--postgres",
        default=os.environ.get("CHAT_APPROVALS_TEST_PG"),
        help="a PostgreSQL server URL for (e) and (g) (default $CHAT_APPROVALS_TEST_PG; none: skipped)",
    )
    args = ap.parse_args(argv)
    if args.cycles < 1 or args.block < 1 or args.warmup < 0:
        ap.error("--cycles and --block must be at least 1, --warmup at least 0")
    asyncio.run(main_async(args.cycles, args.block, args.warmup, args.postgres))


if __name__ == "__main__":
    main()
