"""bench/bench_slack_tokens.py still runs (issue 31): a real process with tiny counts, its table parsed.
No timing is asserted, only that every row is there and well-formed."""

from __future__ import annotations

from tests.test_bench_smoke import run_bench, table_rows


def test_bench_slack_tokens_prints_a_lookup_and_a_click() -> None:
    out = run_bench("bench.bench_slack_tokens", "--workspaces", "3", "--lookups", "30")
    rows = table_rows(out, "what")
    assert [r[0] for r in rows] == ["one token lookup", "a click's 4 lookups"]
    for _, p50, p99 in rows:
        assert p50.endswith(" µs") and p99.endswith(" µs")
        assert 0 <= float(p50.split()[0]) <= float(p99.split()[0])
