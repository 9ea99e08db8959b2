"""`serve --cpus` (bots/cpus.py): the CPU list it reads, the CPUs it refuses, and a real served
process whose every thread, the store's and the HTTP client's included, runs on the CPU it was
given after a full approval cycle. No rule of R1–R19 covers where the process runs (operating,
issue 12); the cycle it runs is the ordinary one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.bots.cpus import format_cpu_list, parse_cpu_list, pin_process
from tests.conftest import TOKEN, Api
from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

CLI = [sys.executable, "-m", "chat_approvals"]
ALLOWED = sorted(os.sched_getaffinity(0))
URL_TEXT = "please fetch https://data.example.org/table.csv"


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0", {0}), ("0-3", {0, 1, 2, 3}), ("0,2-3", {0, 2, 3}), (" 1 , 5 ", {1, 5}), ("2-2", {2}), ("", set())],
)
def test_a_cpu_list_reads_as_taskset_writes_it(text: str, cpus: set[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize("text", ["x", "1-", "-1", "0-x", "1.5", "0;1", "3-1", "+1", "²", "0-99999999999", "8192"])
def test_a_malformed_cpu_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--cpus"):
        parse_cpu_list(text)


def test_the_banner_names_the_cpus_in_the_shortest_list() -> None:
    assert format_cpu_list(frozenset({0, 1, 2, 5, 7, 8})) == "0-2,5,7-8"
    assert format_cpu_list(frozenset({3})) == "3"


def test_cpus_this_process_may_not_use_are_refused_and_nothing_changes() -> None:
    before = os.sched_getaffinity(0)
    beyond = max(ALLOWED) + 1
    with pytest.raises(ValueError, match=rf"CPU {beyond} is not available to this process"):
        pin_process(f"{ALLOWED[0]},{beyond}")  # one good CPU does not make the bad one acceptable
    with pytest.raises(ValueError, match="names no CPU"):
        pin_process(",")
    assert pin_process("") == "all available (--cpus not set)"
    assert os.sched_getaffinity(0) == before


def _cpus_of_every_thread(pid: int) -> set[str]:
    return {format_cpu_list(frozenset(os.sched_getaffinity(int(t.name)))) for t in Path(f"/proc/{pid}/task").iterdir()}


@pytest.mark.parametrize("how", ["flag", "environment"])
async def test_a_served_process_and_all_its_threads_run_on_the_cpu_it_was_given(tmp_path: Path, how: str) -> None:
    cpu = str(ALLOWED[-1])
    port = free_port()
    cmd = [*CLI, "serve", "--port", str(port), "--api-token", TOKEN, "--store", f"sqlite:///{tmp_path}/rows.db"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if how == "flag":
        cmd += ["--cpus", cpu]
    else:
        env["CHAT_APPROVALS_CPUS"] = cpu
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            await wait_healthy(proc, port)
            async with aiohttp.ClientSession() as session:
                api = Api(session, f"http://127.0.0.1:{port}")
                _, body = await api.turn("chat-1", "alice", URL_TEXT)  # a full cycle: the store's threads exist
                card = body["card"]
                code, answer = await api.resume(card["card_id"], "alice", card["secret"])
                assert code == 200 and answer["outcome"] == "resumed", answer
            threads = len(list(Path(f"/proc/{proc.pid}/task").iterdir()))
            assert threads > 1 and _cpus_of_every_thread(proc.pid) == {cpu}
        finally:
            await stop(proc)
    assert f"  CPUs: {cpu} (pinned)" in log.read_text()


def test_serve_refuses_a_cpu_it_may_not_use_before_it_opens_anything(tmp_path: Path) -> None:
    beyond = str(max(ALLOWED) + 1)
    cmd = [*CLI, "serve", "--port", str(free_port()), "--store", f"sqlite:///{tmp_path}/rows.db", "--cpus", beyond]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 2, done
    assert f"--cpus '{beyond}': CPU {beyond} is not available to this process" in done.stderr
    assert not (tmp_path / "rows.db").exists() and "serving" not in done.stdout
