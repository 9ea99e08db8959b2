"""bench/profile_cycle.py still runs (issue 34): a real process with a few cycles, its tables read.
Nothing here asserts a timing: only that every table is printed and its figures are well-formed."""

from __future__ import annotations

import pytest

from tests.test_bench_smoke import NUMBER, run_bench, table_rows


@pytest.mark.parametrize("args", [(), ("--from-store",)], ids=["held", "from-store"])
def test_profile_cycle_prints_the_cycle_the_owners_and_the_functions(args: tuple[str, ...]) -> None:
    out = run_bench("bench.profile_cycle", "--cycles", "3", "--top", "4", *args)
    measures = {r[0]: r[1] for r in table_rows(out, "measure")}
    assert set(measures) == {"wall", "the loop thread's CPU"}
    assert all(NUMBER.match(v.removesuffix(" ms")) for v in measures.values())
    owners = {r[0]: float(r[1].removesuffix("%")) for r in table_rows(out, "owner")}
    assert "Strands" in owners and "this project: core" in owners
    assert 99.0 <= sum(owners.values()) <= 101.0  # every bit of the loop's busy time has one owner
    functions = table_rows(out, "function")
    assert len(functions) == 4 and all(NUMBER.match(r[1]) and r[2].endswith("%") for r in functions)
