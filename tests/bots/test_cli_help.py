"""The CLI's surface: each subcommand's --help lists only its own options, with each option's
default and CHAT_APPROVALS_* variable and examples; --version; and serve's start-up output (the
banner after the bind, the Ready line last, every line one JSON object with --log-format json)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

import chat_approvals
from chat_approvals.bots.cli import parser
from chat_approvals.bots.config import ServerConfig
from tests.support.serve_process import free_port, stop, wait_healthy

CLI = str(Path(sys.executable).parent / "chat-approvals")


def _leaves(p: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every runnable subcommand (`serve`, `grants list`, ...) and its parser."""
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {path: p}
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for name, child in subs[0].choices.items():
        found |= _leaves(child, (*path, name))
    return found


LEAVES = _leaves(parser())
ALL_OPTIONS = {o for p in LEAVES.values() for a in p._actions for o in a.option_strings if o.startswith("--")}


def _help(words: tuple[str, ...]) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHAT_APPROVALS_")}
    done = subprocess.run([CLI, *words, "--help"], capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_subcommand_is_covered() -> None:
    assert {" ".join(w) for w in LEAVES} == {
        "serve", "run", "resume", "grants list", "grants revoke", "store init", "teams-package", "sandbox run", "audit"
    }  # fmt: skip


@pytest.mark.parametrize("words", sorted(LEAVES), ids=" ".join)
def test_help_names_its_own_options_their_variables_and_defaults_and_has_examples(words: tuple[str, ...]) -> None:
    text = _help(words)
    flat = " ".join(text.split())  # argparse wraps lines anywhere
    own = {o for a in LEAVES[words]._actions for o in a.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text))
    # no option of another subcommand, and none that does not exist (the banner's old --grant-ttl)
    assert named <= own, named - own
    assert ALL_OPTIONS - own & named == set()
    for action in LEAVES[words]._actions:
        field = ServerConfig.model_fields.get(action.dest)
        if field is None or not action.option_strings:
            continue
        assert f"env CHAT_APPROVALS_{action.dest.upper()}" in flat, action.dest
        default = field.get_default(call_default_factory=True)
        if default not in ("", None, [], False, True):
            assert f"default: {default}" in flat, (action.dest, default)
    assert "examples:" in text and f"chat-approvals {' '.join(words)}" in text


def test_serve_help_shows_defaults_of_what_matters_first() -> None:
    flat = " ".join(_help(("serve",)).split())
    for shown in ("default: 3978", "default: 127.0.0.1", "default: sqlite:///var/approvals.db", "default: scripted"):
        assert shown in flat
    assert "--grant-ttl" not in flat


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_version() -> None:
    done = subprocess.run([CLI, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"chat-approvals {chat_approvals.__version__}"
    module = subprocess.run([sys.executable, "-m", "chat_approvals", "--version"], capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert module.stdout == done.stdout


# --- start-up output -----------------------------------------------------------------------------


async def _serve_output(tmp: Path, *extra: str, **env: str) -> tuple[str, str]:
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    cmd = [CLI, "serve", "--port", str(port), "--store", f"sqlite:///{tmp}/rows.db", "--api-token", "tok-12345678",
           *extra]  # fmt: skip
    out, err = tmp / "out.log", tmp / "err.log"
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(cmd, cwd=tmp, stdout=o, stderr=e, env={**base, **env})
        try:
            await wait_healthy(proc, port)
            async with aiohttp.ClientSession() as session:  # a full HTTP cycle, so the log has requests in it
                headers = {"Authorization": "Bearer tok-12345678"}
                turn = {"chat": f"c-{port}", "user": "u", "text": "fetch https://example.com/a.csv"}  # a new chat
                async with session.post(f"http://127.0.0.1:{port}/v1/turns", json=turn, headers=headers) as r:
                    card = (await r.json())["card"]
                reply = {"interruptId": card["card_id"], "status": "resolved", "payload": {"approved": True}}
                answer = {"user": "u", "secret": card["secret"], "responses": [reply]}
                url = f"http://127.0.0.1:{port}/v1/interrupts/{card['card_id']}/resume"
                async with session.post(url, json=answer, headers=headers) as r:
                    assert (await r.json())["outcome"] == "resumed"
        finally:
            await stop(proc)
    return out.read_text(), err.read_text()


@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_the_last_start_up_line_is_ready_and_internal_lines_are_debug(tmp_path: Path) -> None:
    out, err = await _serve_output(tmp_path)
    lines = out.splitlines()
    assert lines[0].startswith("chat-approvals ") and " serving on http://127.0.0.1:" in lines[0]
    port = lines[0].split("127.0.0.1:")[1].split("/")[0]
    assert lines[-1] == f"Ready: http://127.0.0.1:{port}/ ; Ctrl-C to stop"
    assert "heap frozen" not in out + err and "Traceback" not in err
    assert "--grant-ttl" not in out and "CHAT_APPROVALS_GRANT_TTL" in out
    # scripts/run tells serve where the Playground is: the last line points there
    out, _ = await _serve_output(tmp_path, CHAT_APPROVALS_PLAYGROUND_URL="http://127.0.0.1:56150/")
    assert out.splitlines()[-1] == "Ready: open http://127.0.0.1:56150/ (Teams Playground); Ctrl-C to stop"
    out, err = await _serve_output(tmp_path, "--log-level", "debug")
    assert "heap frozen at start-up" in err


async def test_with_json_logs_every_line_on_stdout_and_stderr_is_one_json_object(tmp_path: Path) -> None:
    out, err = await _serve_output(tmp_path, "--log-format", "json", "--log-level", "debug")
    docs = []
    for line in [*out.splitlines(), *err.splitlines()]:
        doc = json.loads(line)  # every line, the banner included
        assert isinstance(doc, dict) and {"time", "level", "message"} <= doc.keys(), line
        docs.append(doc)
    messages = [d["message"] for d in docs]
    assert any(" serving on http://127.0.0.1:" in m for m in messages)
    assert json.loads(out.splitlines()[-1])["message"].startswith("Ready: http://127.0.0.1:")
    assert any(m.startswith("resume resumed") for m in messages)
    assert "tok-12345678" not in out + err
