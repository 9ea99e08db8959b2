"""R20 for the command line (issue 27.1, 27.4): arguments that are not UTF-8 (they reach Python
as lone surrogates), and users or chats with a control character, a bidi override or white space
around them, are refused in one line, exit 2, before the store is written; the audit stays readable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = os.path.join(os.path.dirname(sys.executable), "chat-approvals")


def _cli(tmp: Path, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env["CHAT_APPROVALS_STORE"] = f"sqlite:///{tmp}/rows.db"
    return subprocess.run([CLI, *args], cwd=tmp, env=env, capture_output=True, timeout=120, check=False)


@pytest.mark.parametrize(
    "args",
    [
        [b"run", b"--chat", b"c1", b"--user", b"al\xffice", b"hello"],
        [b"run", b"--chat", b"c\xed\xa0\x801", b"--user", b"alice", b"hello"],
        [b"run", b"--chat", b"c1", b"--user", b"alice", b"save a note: x\xffy"],
        ["run", "--chat", "c1", "--user", "al\u202eice", "hello"],
        ["run", "--chat", "c1", "--user", " alice", "hello"],
        ["run", "--chat", "c\x001"[:1] + "\x07", "--user", "alice", "hello"],
    ],
    ids=["user-not-utf8", "chat-surrogate-bytes", "text-not-utf8", "user-bidi", "user-space", "chat-control"],
)
def test_the_cli_refuses_text_that_may_not_cross_the_edge(tmp_path: Path, args: list[str | bytes]) -> None:
    done = _cli(tmp_path, *args)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2 and "Traceback" not in err, err
    assert err.startswith("chat-approvals: ") and len(err.splitlines()) == 1, err
    audit = _cli(tmp_path, "audit", "--all")
    assert audit.returncode == 0, audit.stderr
    assert json.loads(audit.stdout)["events"] == []  # nothing was written


def test_a_plain_run_still_works(tmp_path: Path) -> None:
    done = _cli(tmp_path, "run", "--chat", "c1", "--user", "alice", "hello there, é ✓")
    assert done.returncode == 0, done.stderr
