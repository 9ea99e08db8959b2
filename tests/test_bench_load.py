"""The Slack and Teams load benches (issue 12) still run: each as a real process with tiny counts,
with the server in the bench's process (the default) and as its own `chat-approvals serve` process.

Nothing here asserts a timing (the targets are ratios a person reads in bench/'s output): only that
each bench finishes, every click was acknowledged and resumed, and the ratio lines are printed.
"""

from __future__ import annotations

import re

import pytest

from tests.test_bench_smoke import run_bench, table_rows

MS = re.compile(r"^\d+(\.\d+)? ms$")
MODE_LINE = {
    "inprocess": "server: in this process",
    "process": "server: its own OS process (`chat-approvals serve`)",
}
MODES = [[], ["--server", "process"]]


def mode_of(args: list[str]) -> str:
    return args[-1] if args else "inprocess"


@pytest.mark.parametrize("server", MODES, ids=mode_of)
def test_bench_slack_prints_both_rows_and_the_ratios(server: list[str]) -> None:
    out = run_bench("bench.bench_slack", "--single", "3", "--concurrent", "5", *server)
    assert out.find(MODE_LINE[mode_of(server)]) in range(out.find("| scenario")), out  # said above the table
    rows = table_rows(out, "scenario")
    assert [(r[0], r[1]) for r in rows] == [("1 click at a time", "3"), ("5 concurrent clicks", "5")]
    assert all(MS.match(cell) for r in rows for cell in r[2:]), rows
    assert re.search(r"click->card updated p50, 5 concurrent clicks / 1 at a time: \d+\.\dx", out), out
    assert re.search(r"click->ack p99, 5 concurrent clicks / ack p50 1 at a time: \d+\.\dx", out), out


@pytest.mark.parametrize("server", MODES, ids=mode_of)
def test_bench_teams_prints_every_row_all_approved_and_the_ratio(server: list[str]) -> None:
    out = run_bench("bench.bench_teams", "--samples", "3", "--rounds", "1", *server)
    assert out.find(MODE_LINE[mode_of(server)]) in range(out.find("scenario")), out  # said above the table
    lines = {line.split("  ")[0].strip(): line for line in out.splitlines()}
    assert "Approved: 3" in lines["1 click at a time"]
    assert "Approved: 50" in lines["50 concurrent, 50 cards"]
    assert re.search(r"Approved: 1(,|$)", lines["50 concurrent, 1 card"])  # one of 50 racing clicks resumes (R10)
    assert re.search(r"p50, 50 concurrent on 50 cards / 1 at a time: \d+\.\dx", out), out
