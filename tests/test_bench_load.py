"""The Slack and Teams load benches (issue 12) still run: each as a real process with tiny counts,
with the server in the bench's process (the default), as its own `chat-approvals serve` process, and
as two such processes (replicas) on one SQLite store, the clicks sent to the replica that did not
take the card's message (R10: each card resumes exactly once across the replicas).

Nothing here asserts a timing (the targets are ratios a person reads in bench/'s output): only that
each bench finishes, every click was acknowledged and resumed, and the ratio lines are printed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bench.ack_floor import floor_app
from tests.support import slack_payloads as P
from tests.test_bench_smoke import ROOT, run_bench, table_rows

MS = re.compile(r"^\d+(\.\d+)? ms$")
MODE_LINE = {
    "inprocess": "server: in this process",
    "process": "server: its own OS process (`chat-approvals serve`)",
}
MODES = [[], ["--server", "process"], ["--server", "process", "--replicas", "2"]]


def mode_of(args: list[str]) -> str:
    return args[1] if args else "inprocess"


def replicas_of(args: list[str]) -> int:
    return int(args[3]) if len(args) > 3 else 1


def case_id(args: list[str]) -> str:
    return f"{mode_of(args)}-{replicas_of(args)}" if args else "inprocess"


def assert_replica_lines(out: str, server: list[str]) -> None:
    """With --server process: the replica count above the table; each replica's tallies and the
    exactly-once check (the bench exits non-zero when it fails) below it (R10)."""
    if not server:
        assert "replicas:" not in out and "exactly once" not in out, out
        return
    n = replicas_of(server)
    assert out.find(f"replicas: {n} ") in range(out.find("scenario")), out
    for i in range(1, n + 1):
        assert re.search(rf"^replica {i}: resumes .*resumed \d+", out, re.M), out
        assert re.search(rf"^replica {i} runs on CPUs [0-9,-]+$", out, re.M), out
    assert re.search(r"^exactly once: (\d+) resumed.* for \1 cards clicked.*: ok$", out, re.M), out


def assert_cpu_bound(out: str, what: str, verdict: str) -> None:
    """The burst's CPU per click and the least ratio it allows (bench/cpu_bound.py), read from /proc."""
    cores = len(os.sched_getaffinity(0))
    per_click = (
        r"CPU per click in the burst: \d+\.\d ms on a server's event loop, "
        rf"\d+\.\d ms in all processes \({cores} cores\)"
    )
    assert re.search(rf"^{per_click}$", out, re.M), out
    least = rf"at the earliest: {re.escape(what)} / 1 at a time at least about \d+\.\dx \(the target is {verdict}\)$"
    assert re.search(least, out, re.M), out


@pytest.mark.parametrize("server", MODES, ids=case_id)
@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_bench_slack_prints_both_rows_and_the_ratios(server: list[str]) -> None:
    out = run_bench("bench.bench_slack", "--single", "3", "--concurrent", "5", *server)
    assert out.find(MODE_LINE[mode_of(server)]) in range(out.find("| scenario")), out  # said above the table
    rows = table_rows(out, "scenario")
    assert [(r[0], r[1]) for r in rows] == [
        ("1 click at a time", "3"),
        ("5 concurrent clicks", "5"),
        ("ack floor, 1 at a time", "3"),  # bench/ack_floor.py: the same clicks, signature check and 200 only
        ("ack floor, 5 concurrent", "5"),
    ]
    assert all(MS.match(cell) for r in rows[:2] for cell in r[2:]), rows
    assert all(MS.match(cell) for r in rows[2:] for cell in r[2:4]) and {c for r in rows[2:] for c in r[4:]} == {"-"}
    assert re.search(r"click->card updated p50, 5 concurrent clicks / 1 at a time: \d+\.\dx", out), out
    assert re.search(r"click->ack p99, 5 concurrent clicks / ack p50 1 at a time: \d+\.\dx", out), out
    assert re.search(r"ack floor: click->ack p99, 5 concurrent clicks / its own ack p50 1 at a time: \d+\.\dx", out)
    assert re.search(r"ack floor: its click->ack p99, .* / this server's ack p50 1 at a time: \d+\.\dx", out), out
    assert_cpu_bound(out, "click->card updated p50, 5 concurrent clicks", "set for 100 concurrent clicks")
    assert_replica_lines(out, server)


@pytest.mark.parametrize("server", MODES, ids=case_id)
@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_bench_teams_prints_every_row_all_approved_and_the_ratio(server: list[str]) -> None:
    out = run_bench("bench.bench_teams", "--samples", "3", "--rounds", "1", *server)
    assert out.find(MODE_LINE[mode_of(server)]) in range(out.find("scenario")), out  # said above the table
    lines = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert "Approved: 3" in lines["1 click at a time"]
    assert "Approved: 50" in lines["50 concurrent, 50 cards"]
    assert re.search(r"Approved: 1(,|$)", lines["50 concurrent, 1 card"])  # one of 50 racing clicks resumes (R10)
    assert re.search(r"p50, 50 concurrent on 50 cards / 1 at a time: \d+\.\dx", out), out
    assert_cpu_bound(out, "p50, 50 concurrent on 50 cards", "(within reach here|out of reach in this arrangement.*)")
    assert_replica_lines(out, server)


@pytest.mark.parametrize("module", ["bench.bench_slack", "bench.bench_teams"])
@pytest.mark.parametrize("replicas", ["2", "0"])
def test_bench_refuses_replicas_without_a_process_server_or_below_one(module: str, replicas: str) -> None:
    """--replicas 2 without --server process (the in-process server is one app), or --replicas 0:
    refused before anything starts."""
    server = ["--server", "process"] if replicas == "0" else []
    done = subprocess.run(
        [sys.executable, "-m", module, "--replicas", replicas, *server],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0 and done.stdout == "", done
    assert ("--replicas needs --server process" if replicas == "2" else "invalid positive_int value") in done.stderr


@pytest.mark.parametrize("module", ["bench.bench_slack", "bench.bench_teams"])
def test_bench_refuses_pin_without_a_process_server(module: str) -> None:
    """--pin without --server process would pin the bench's own client with the server: refused."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--pin"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0 and done.stdout == "", done
    assert "--pin needs --server process" in done.stderr


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_bench_teams_pins_each_replica_to_its_own_core() -> None:
    """--pin: replica i is served with --cpus on core i (round the cores); the bench checks each
    replica's /proc before it measures (bench/server_process.py) and says so above the table."""
    server = ["--server", "process", "--replicas", "2"]
    out = run_bench("bench.bench_teams", "--samples", "3", "--rounds", "1", *server, "--pin")
    assert out.find("each pinned to one core") in range(out.find("scenario")), out
    cores = sorted(os.sched_getaffinity(0))
    for i in range(2):
        assert re.search(rf"^replica {i + 1} runs on CPUs {cores[i % len(cores)]}$", out, re.M), out
    assert "Approved: 50" in out
    assert_replica_lines(out, server)


async def test_the_ack_floor_checks_the_signature_as_the_server_does() -> None:
    """The floor (bench/ack_floor.py) must do the one thing every ack must: a click whose signature
    does not verify gets the server's own 401, a signed one its 200 (else the floor is too cheap)."""
    body, ctype = P.interactive_body({"type": "block_actions", "actions": [{"action_id": "approvals.approve"}]})
    async with TestClient(TestServer(floor_app())) as client:
        signed = await client.post("/slack/events", data=body, headers=P.signed_headers(body, ctype))
        forged = await client.post("/slack/events", data=body, headers=P.signed_headers(body, ctype, secret="wrong"))
        unsigned = await client.post("/slack/events", data=body, headers={"Content-Type": ctype})
        assert (signed.status, forged.status, unsigned.status) == (200, 401, 401)
