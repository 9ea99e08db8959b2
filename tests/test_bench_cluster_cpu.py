"""bench/cluster_cpu.py: the PostgreSQL cluster's CPU that bench.bench_peers prints per cycle.

Against the test cluster (scripts/test.d/30-postgres.sh): the probe finds the postmaster and its
processes, and the work a statement makes the server do shows in its reading. Nothing here
asserts a timing: only that the figure is the cluster's and grows with its work. No rule covers
it: it is a benchmark's instrument (issue 34).
"""

from __future__ import annotations

import os

import psycopg

from bench.cluster_cpu import cluster_cpu, cluster_probe
from tests.support.store_backends import PG, require_env


def test_the_probe_reads_the_clusters_processes_and_grows_with_its_work() -> None:
    url = require_env(PG)[PG]
    probe = cluster_probe(url)
    assert callable(probe), probe
    with psycopg.connect(url, autocommit=True) as conn:
        backend = conn.info.backend_pid
        before = probe()
        # about a second of the server's CPU, in this connection's backend (a child of the postmaster)
        conn.execute("SELECT count(*) FROM generate_series(1, 20000000)")
        after = probe()
    assert after - before >= 0.2, (before, after, backend)


def test_a_process_that_is_not_a_postmaster_counts_only_itself() -> None:
    # this test's own process has no children here: its reading is its own CPU, not the machine's
    mine = cluster_cpu(os.getpid())
    times = os.times()
    assert 0 <= mine <= times.user + times.system + 0.05


def test_a_cluster_it_cannot_reach_gives_a_reason_not_a_figure() -> None:
    probe = cluster_probe("postgresql://postgres@127.0.0.1:1/postgres?connect_timeout=2")
    assert isinstance(probe, str)
    assert probe.startswith("the cluster's CPU not read (OperationalError")
