"""The mistakes a newcomer makes, each run through the real `chat-approvals` process (and
`scripts/run`): one clear line on stderr, exit 2, never a traceback. And a paused turn resumes
only on the agent factory that paused it (the CLI used to resume it silently on the default)."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.support.serve_process import ROOT, free_port, stop, wait_healthy

CLI = str(Path(sys.executable).parent / "chat-approvals")  # the installed console script


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "CHAT_APPROVALS_"))}
    env["CHAT_APPROVALS_STORE"] = f"sqlite:///{tmp}/rows.db"
    env["PYTHONPATH"] = str(tmp)  # the user's own modules (--agent) live there
    env.update(extra)
    return env


def _cli(tmp: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args], cwd=tmp, env=_env(tmp, **env), capture_output=True, text=True, timeout=120, check=False
    )


def assert_one_line(done: subprocess.CompletedProcess[str], *phrases: str, code: int = 2) -> str:
    """Exit `code`, no traceback, exactly one line on stderr holding every phrase."""
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.splitlines()
    assert done.returncode == code, (done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("chat-approvals: "), done.stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    assert "serving on" not in done.stdout and "Ready" not in done.stdout
    return lines[0]


@pytest.fixture
def listener() -> Iterator[int]:
    """A port something else already listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


# --- the port ------------------------------------------------------------------------------------


def test_a_port_in_use_is_one_line_and_no_banner(tmp_path: Path, listener: int) -> None:
    done = _cli(tmp_path, "serve", "--port", str(listener))
    assert_one_line(done, f"port {listener} is already in use (another chat-approvals? stop it, or pass --port)")
    assert done.stdout == ""  # the banner comes only once the port is bound


def test_scripts_run_refuses_a_busy_port_before_it_starts_anything(tmp_path: Path, listener: int) -> None:
    env = _env(tmp_path, CHAT_APPROVALS_PORT=str(listener), CHAT_APPROVALS_PLAYGROUND="0")
    done = subprocess.run([str(ROOT / "scripts" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert f"already running at http://127.0.0.1:{listener}/" in done.stderr
    assert done.stdout == ""  # refused before setup, the token line and the Playground
    # serve's own --port is the one checked when given
    args = [str(ROOT / "scripts" / "run"), "--port", str(listener)]
    done = subprocess.run(args, env={**env, "CHAT_APPROVALS_PORT": str(free_port())}, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and f"already running at http://127.0.0.1:{listener}/" in done.stderr


def test_scripts_run_refuses_a_busy_playground_port(tmp_path: Path, listener: int) -> None:
    env = _env(tmp_path, CHAT_APPROVALS_PORT=str(free_port()), CHAT_APPROVALS_PLAYGROUND_PORT=str(listener))
    done = subprocess.run([str(ROOT / "scripts" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert f"already running at http://127.0.0.1:{listener}/" in done.stderr and "Playground" in done.stderr


# --- the model and the agent ---------------------------------------------------------------------


def test_a_model_provider_without_its_extra_names_the_package_to_install(tmp_path: Path) -> None:
    missing = [p for p in ("openai", "anthropic", "ollama", "litellm") if importlib.util.find_spec(p) is None]
    if not missing:
        pytest.skip("every provider SDK is installed here")
    provider = missing[0]
    done = _cli(tmp_path, "run", "--chat", "c", "--user", "u", "--model", f"{provider}:some-model", "hi")
    assert_one_line(done, f"pip install 'strands-agents[{provider}]'", f"--model '{provider}:some-model'")


@pytest.mark.parametrize(
    ("spec", "phrases"),
    [
        ("nosuchmodule_xyz:build", ["no module named 'nosuchmodule_xyz'", "PYTHONPATH"]),
        ("useragent:nothing", ["has no 'nothing'"]),
        ("useragent:NOT_CALLABLE", ["is not callable"]),
        ("useragent", ["use module:function"]),
        ("useragent:build:x", ["use module:function"]),
        ("brokenagent:build", ["importing 'brokenagent' failed", "no_such_dependency_xyz"]),
    ],
)
def test_an_agent_that_cannot_be_loaded_says_why(tmp_path: Path, spec: str, phrases: list[str]) -> None:
    _user_agent(tmp_path)
    (tmp_path / "brokenagent.py").write_text("import no_such_dependency_xyz\n")
    done = _cli(tmp_path, "run", "--chat", "c", "--user", "u", "--agent", spec, "hi")
    assert_one_line(done, f"--agent '{spec}'", *phrases)


# --- Slack and Teams, half-configured ------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "phrase"),
    [
        ({"SLACK_SIGNING_SECRET": "0123456789abcdef"}, "SLACK_SIGNING_SECRET is set but SLACK_BOT_TOKEN is not"),
        ({"SLACK_APP_TOKEN": "xapp-1-abc"}, "SLACK_APP_TOKEN is set but SLACK_BOT_TOKEN is not"),
        ({"SLACK_BOT_TOKEN": "xoxb-1-abc"}, "neither SLACK_SIGNING_SECRET (HTTP events) nor SLACK_APP_TOKEN"),
        ({"SLACK_BOT_TOKEN": "abc", "SLACK_SIGNING_SECRET": "0123456789abcdef"}, "should start with xoxb-"),
        ({"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_APP_TOKEN": "xoxb-2"}, "SLACK_APP_TOKEN does not look like"),
        ({"CHAT_APPROVALS_TEAMS_APP_ID": "0000"}, "CHAT_APPROVALS_TEAMS_APP_ID is set but neither"),
        (
            {"CHAT_APPROVALS_TEAMS_APP_PASSWORD": "pw"},
            "CHAT_APPROVALS_TEAMS_APP_ID (the bot's Microsoft App id) is not",
        ),
        (
            {"CHAT_APPROVALS_TEAMS_APP_ID": "0000", "CHAT_APPROVALS_TEAMS_CERT_THUMBPRINT": "AB"},
            "CHAT_APPROVALS_TEAMS_CERT_THUMBPRINT is set but neither",
        ),
        ({"CHAT_APPROVALS_TEAMS_INVOKE_BUDGET": "soon"}, "CHAT_APPROVALS_TEAMS_INVOKE_BUDGET must be a number"),
    ],
)
def test_a_half_configured_front_end_names_the_variable(tmp_path: Path, env: dict[str, str], phrase: str) -> None:
    done = _cli(tmp_path, "serve", "--port", str(free_port()), **env)
    assert_one_line(done, phrase)
    assert not (tmp_path / "rows.db").exists()  # refused before the store opened


# --- the store, the tokens, the policy -----------------------------------------------------------


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_a_store_path_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    for url in (f"sqlite:///{tmp_path}/a-folder", f"sqlite:///{tmp_path}/a-file/rows.db"):
        done = _cli(tmp_path, "run", "--chat", "c", "--user", "u", "--store", url, "hi")
        assert_one_line(done, f"--store {url}: cannot open it")
    done = _cli(tmp_path, "audit", "c", "--objects", f"sqlite:///{tmp_path}/a-folder")
    assert_one_line(done, "--objects")


@pytest.mark.parametrize("value", [",", " , ,", "good-token,with space"])
def test_a_malformed_token_variable_is_refused(tmp_path: Path, value: str) -> None:
    done = _cli(tmp_path, "serve", "--port", str(free_port()), CHAT_APPROVALS_API_TOKEN=value)
    assert_one_line(done, "--api-token / CHAT_APPROVALS_API_TOKEN")
    assert "with space" not in done.stderr  # a token is never echoed


def test_a_malformed_number_variable_names_it(tmp_path: Path) -> None:
    done = _cli(tmp_path, "serve", CHAT_APPROVALS_PORT="eighty")
    assert_one_line(done, "--port / CHAT_APPROVALS_PORT")


def test_a_policy_file_that_does_not_exist(tmp_path: Path) -> None:
    done = _cli(tmp_path, "serve", "--port", str(free_port()), "--policy", str(tmp_path / "nope.toml"))
    assert_one_line(done, "nope.toml", "No such file")


# --- resume with the agent that paused the turn (R8: the pointer records it) ----------------------

USER_AGENT = """\
from strands import Agent

from chat_approvals.core.agent.scripted_model import ScriptedModel

NOT_CALLABLE = 3


def build() -> Agent:
    return Agent(model=ScriptedModel(), tools=[], callback_handler=None)
"""


def _user_agent(tmp: Path) -> None:
    (tmp / "useragent.py").write_text(USER_AGENT)


def _paused(tmp: Path, *agent: str) -> tuple[str, str, str]:
    """A turn paused on a card through `run`; its card id, secret and the printed hint."""
    done = _cli(tmp, "run", "--chat", "c1", "--user", "alice", *agent, "fetch https://example.com/data.csv")
    assert done.returncode == 0, done.stderr
    hint = done.stderr.strip().splitlines()[-1]
    m = re.search(r"resume (\S+) --user alice --secret=(\S+)", hint)
    assert m, hint
    return m.group(1), m.group(2), hint


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_a_resume_by_another_agent_is_refused_and_the_card_stays_answerable(tmp_path: Path) -> None:
    _user_agent(tmp_path)
    card, secret, hint = _paused(tmp_path, "--agent", "useragent:build")
    assert "--agent useragent:build" in hint  # the hint names the agent to resume with
    wrong = _cli(tmp_path, "resume", card, "--user", "alice", f"--secret={secret}", "--approve")
    assert wrong.returncode == 1, wrong
    assert "paused by --agent useragent:build, but this process runs the built-in agent" in wrong.stderr
    assert "resume it with --agent useragent:build" in wrong.stderr and "Traceback" not in wrong.stderr
    right = _cli(tmp_path, "resume", card, "--user", "alice", f"--secret={secret}", "--agent", "useragent:build",
                 "--approve")  # fmt: skip
    assert right.returncode == 0, right.stderr
    assert '"outcome": "resumed"' in right.stdout


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_a_turn_paused_by_the_built_in_agent_is_not_resumed_by_a_user_agent(tmp_path: Path) -> None:
    _user_agent(tmp_path)
    card, secret, hint = _paused(tmp_path)
    assert "--agent" not in hint
    wrong = _cli(tmp_path, "resume", card, "--user", "alice", f"--secret={secret}", "--agent", "useragent:build",
                 "--approve")  # fmt: skip
    assert wrong.returncode == 1, wrong.stderr
    assert "paused by the built-in agent (no --agent), but this process runs --agent useragent:build" in wrong.stderr
    assert "resume it with no --agent" in wrong.stderr
    right = _cli(tmp_path, "resume", card, "--user", "alice", f"--secret={secret}", "--approve")
    assert right.returncode == 0 and '"outcome": "resumed"' in right.stdout, right.stderr


@pytest.mark.slow  # over 2 s in scripts/test's --durations
async def test_the_server_refuses_a_card_paused_by_another_agent_the_same_way(tmp_path: Path) -> None:
    """Paused from the shell with --agent; a server without it refuses the click (the card stays
    open), a server with it resumes the turn."""
    _user_agent(tmp_path)
    card, secret, _ = _paused(tmp_path, "--agent", "useragent:build")
    reply = {"interruptId": card, "status": "resolved", "payload": {"approved": True}}
    body = {"user": "alice", "secret": secret, "responses": [reply]}
    for agent, outcome in (([], "invalid"), (["--agent", "useragent:build"], "resumed")):
        port = free_port()
        cmd = [CLI, "serve", "--port", str(port), "--api-token", "tok-12345678", *agent]
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            await wait_healthy(proc, port)
            async with aiohttp.ClientSession(headers={"Authorization": "Bearer tok-12345678"}) as session:
                url = f"http://127.0.0.1:{port}/v1/interrupts/{card}/resume"
                async with session.post(url, json=body) as r:
                    got = await r.json()
        finally:
            await stop(proc)
        assert got["outcome"] == outcome, got
        if outcome == "invalid":
            assert "paused by --agent useragent:build, but this process runs the built-in agent" in got["message"]
