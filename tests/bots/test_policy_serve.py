"""`chat-approvals serve --policy FILE` (and CHAT_APPROVALS_POLICY) as a real process (issue 13): a
bad policy file stops the server with a message naming the file, the line and the problem; a good
one is in force over HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

GOOD = """\
[defaults]
durations = ["once", "1h"]
default_duration = "1h"

[approvers]
http = ["sec-alice"]

[[rule]]
match = "*.example.org"
approvers = "approvers"
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env.update(extra)
    return env


def _cmd(tmp: Path, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "chat_approvals", "serve", "--port", str(port), "--api-token", "t",
            "--store", f"sqlite:///{tmp}/rows.db", "--objects", str(tmp / "objects"), *extra]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("[defaults]\nquorum = 1\nquorom = 2\n", 3, "unknown key 'quorom'"),
        ('[defaults]\ndurations = ["once", "90x"]\n', 2, "'90x' is not a duration"),
        ('[approvers]\nhttp = ["a"]\n\n[[rule]]\nmatch = "https://x.org/a"\n', 5, "looks like a URL"),
        ("[defaults\n", 1, "not valid TOML"),
    ],
)
def test_a_bad_policy_file_stops_the_server_naming_the_line(tmp_path: Path, text: str, line: int, words: str) -> None:
    f = tmp_path / "approvals.toml"
    f.write_text(text)
    proc = subprocess.run(
        _cmd(tmp_path, free_port(), "--policy", str(f)),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"{f}:{line}:" in proc.stderr and words in proc.stderr, proc.stderr
    assert "serving on" not in proc.stdout


def test_a_missing_policy_file_from_the_environment_stops_the_server(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    proc = subprocess.run(
        _cmd(tmp_path, free_port()),
        cwd=ROOT,
        env=_env(CHAT_APPROVALS_POLICY=str(missing)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "cannot read the policy file" in proc.stderr and str(missing) in proc.stderr


async def test_a_good_policy_from_the_environment_is_in_force(tmp_path: Path) -> None:
    f = tmp_path / "approvals.toml"
    f.write_text(GOOD)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            _cmd(tmp_path, port), cwd=ROOT, env=_env(CHAT_APPROVALS_POLICY=str(f)), stdout=out, stderr=subprocess.STDOUT
        )
        try:
            await wait_healthy(proc, port)
            base, headers = f"http://127.0.0.1:{port}", {"Authorization": "Bearer t"}
            async with aiohttp.ClientSession(headers=headers) as s:
                turn = {"chat": "c1", "user": "bob", "text": "fetch https://files.example.org/a.csv"}
                async with s.post(f"{base}/v1/turns", json=turn) as r:
                    card = (await r.json())["card"]
                assert (card["approvers"], card["durations"]) == ("approvers", ["once", "1h"])
                body = {
                    "user": "bob",
                    "secret": card["secret"],
                    "responses": [
                        {"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}
                    ],
                }
                async with s.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=body) as r:
                    assert r.status == 403  # the requester may not approve
                body["user"] = "sec-alice"
                async with s.post(f"{base}/v1/interrupts/{card['card_id']}/resume", json=body) as r:
                    assert r.status == 200 and (await r.json())["outcome"] == "resumed"
        finally:
            await stop(proc)
    assert "approval policy: 1 rule(s)" in log.read_text()


def test_the_cli_takes_the_policy_a_duration_and_a_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from chat_approvals.bots.cli import main

    f = tmp_path / "approvals.toml"
    f.write_text(GOOD)
    store = ["--store", f"sqlite:///{tmp_path}/rows.db", "--objects", str(tmp_path / "objects"), "--policy", str(f)]
    assert main(["run", *store, "--chat", "c1", "--user", "bob", "fetch https://example.com/a.csv"]) == 0
    card = json.loads(capsys.readouterr().out)["card"]
    assert card["durations"] == ["once", "1h"] and card["approvers"] == "owner"
    base = ["resume", card["card_id"], *store, "--user", "bob", f"--secret={card['secret']}"]
    assert main([*base, "--approve", "--duration", "2h"]) == 1  # not offered: invalid, nothing changed
    assert json.loads(capsys.readouterr().out)["outcome"] == "invalid"
    assert main([*base, "--deny", "--duration", "1h"]) == 2  # a duration goes only with an approval
    assert "only with an approval" in capsys.readouterr().err
    assert main([*base, "--deny", "--reason", "not\ttoday"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["answer"] == {"approved": False, "reason": "not today"}
    assert body["result"]["text"] == "Not downloaded: you denied https://example.com/a.csv (not today)."
