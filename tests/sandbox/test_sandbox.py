"""The local sandbox and the run_script tool, with the real gate and real child processes."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from strands import Agent
from strands.models.model import Model
from strands.sandbox.errors import SandboxTimeoutError

from chat_approvals.core.agent.context import RequestContext, invocation_state
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.runner import Confinement, GatedLocalSandbox, detect_confinement
from chat_approvals.core.sandbox.tools import format_result, make_run_script
from tests.support.gate_support import FakeGrants, origin_app, start_site

USER, CHAT, TURN = "U1", "http:chat-9", "turn-9"
ISO = detect_confinement()


def need_netns() -> None:
    if not ISO.confined:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the sandbox cannot be confined here: {ISO.note}")
        pytest.skip(ISO.note)


@pytest.fixture
async def gate_and_origin() -> AsyncIterator[tuple[Gate, FakeGrants, int]]:
    runner, port = await start_site(origin_app("http"))
    grants = FakeGrants()
    gate = await Gate(
        GateConfig(resolve=[f"files.test=127.0.0.1:{port}", f"other.test=127.0.0.1:{port}"]),
        backend=grants,
        clock=ManualClock(),
    ).start()
    try:
        yield gate, grants, port
    finally:
        await gate.close()
        await runner.cleanup()


def fetch_script(*urls: str) -> str:
    return (
        "import urllib.request\n"
        f"for url in {list(urls)!r}:\n"
        "    try:\n"
        "        body = urllib.request.urlopen(url, timeout=10).read()\n"
        "        print(url, len(body), body.decode().splitlines()[0])\n"
        "    except Exception as e:\n"
        "        print(url, 'failed:', e)\n"
    )


async def test_netns_script_ignoring_the_proxy_cannot_connect(gate_and_origin: tuple[Gate, FakeGrants, int]) -> None:
    """A script that opens a socket directly fails, even to a server on the host's loopback."""
    need_netns()
    gate, grants, port = gate_and_origin
    grants.grant(USER, CHAT, "site", "files.test")
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=ISO)
    code = (
        "import socket, urllib.request\n"
        f"for addr in [('127.0.0.1', {port}), ('1.1.1.1', 80), ('8.8.8.8', 53)]:\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=3); print('direct', addr, 'CONNECTED')\n"
        "    except OSError as e:\n"
        "        print('direct', addr, 'failed', e.errno)\n"
        "print(urllib.request.urlopen('http://files.test/hello', timeout=10).read().decode().strip())\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    )
    with gate.run(user=USER, chat=CHAT, turn_id=TURN) as run:
        res = await box.execute_code(code, "python", timeout=30, env=gate.sandbox_env(run))
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert [ln.split(" failed ")[0] for ln in lines[:3]] == [
        f"direct ('127.0.0.1', {port})",
        "direct ('1.1.1.1', 80)",
        "direct ('8.8.8.8', 53)",
    ]
    assert "CONNECTED" not in res.stdout
    assert lines[3] == "hello from files.test over http"  # the proxy is the only way, and it works
    assert lines[4] == "0000000000000000"  # no capabilities left, even as root


async def test_time_limit_kills_the_script(gate_and_origin: tuple[Gate, FakeGrants, int]) -> None:
    gate, _, _ = gate_and_origin
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=ISO)
    with pytest.raises(SandboxTimeoutError) as e:
        await box.execute_code("import time\nprint('started', flush=True)\ntime.sleep(60)\n", "python", timeout=1.5)
    assert e.value.stdout == "started\n"


async def test_output_limit_and_fresh_folder_and_clean_env(
    gate_and_origin: tuple[Gate, FakeGrants, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, _, _ = gate_and_origin
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-server-secret")
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=ISO, output_limit=1000)
    code = (
        "import os, json\n"
        "print(json.dumps({'cwd': os.getcwd(), 'files': sorted(os.listdir('.')), 'home': os.environ['HOME'],"
        " 'secret': 'SLACK_BOT_TOKEN' in os.environ}))\n"
        "open('junk', 'w').write('x')\n"
        "print('y' * 5000)\n"
    )
    res1 = await box.execute_code(code, "python")
    res2 = await box.execute_code(code, "python")
    info1, info2 = (json.loads(r.stdout.splitlines()[0]) for r in (res1, res2))
    assert info1["cwd"] != info2["cwd"] and info1["home"] == info1["cwd"]
    assert info2["files"] == ["main.py"]  # the first run's junk is not there
    assert not info1["secret"] and not Path(info1["cwd"]).exists()  # removed after the run
    total = len(res1.stdout.splitlines()[0]) + 1 + 5001  # the json line and the y line, newlines included
    assert res1.stdout.endswith(f"[output limit: {total - 1000} more bytes of stdout not shown]\n")
    assert len(res1.stdout.encode()) < 1100


def test_format_result_contract() -> None:
    """The lines the offline model reads: `blocked: ` then subjects, and stdout after `output:`."""
    text = format_result(
        exit_code=0, stdout="a 5 hi\n", stderr="warn\n", blocked=["other.test", "package:foo"], denied=[],
        isolation="network isolated",
    )  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == "exit code: 0" and lines[1] == "blocked: other.test, package:foo"
    assert "request_approval" in lines[2]
    assert lines[lines.index("output:") + 1 :] == ["a 5 hi"]
    assert "blocked:" not in format_result(exit_code=1, stdout="", stderr="", blocked=[], denied=[], isolation="x")


class ToolThenText(Model):
    """A tiny scripted model: first a run_script call with `code`, then a text quoting the result."""

    def __init__(self, code: str, extra_input: dict[str, Any] | None = None) -> None:
        self.code, self.extra = code, extra_input or {}
        self.config: dict[str, Any] = {}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    async def structured_output(self, *a: Any, **k: Any) -> Any:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kw: Any) -> Any:
        last = messages[-1]["content"]
        results = [b["toolResult"] for b in last if "toolResult" in b]
        yield {"messageStart": {"role": "assistant"}}
        if results:
            text = results[0]["content"][0]["text"]
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": "RESULT\n" + text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
        else:
            tu = {"toolUseId": f"t{len(messages)}", "name": "run_script"}
            yield {"contentBlockStart": {"start": {"toolUse": tu}}}
            args = {"code": self.code, **self.extra}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "tool_use"}}
        yield {
            "metadata": {
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                "metrics": {"latencyMs": 1},
            }
        }


async def agent_turn(tool: Any, model: Model, state: dict[str, Any] | None) -> str:
    agent = Agent(model=model, tools=[tool], callback_handler=None)
    result = await agent.invoke_async("go", invocation_state=state)
    return str(result)


def ctx(user: str = USER, chat: str = CHAT, turn: str = TURN) -> RequestContext:
    return RequestContext(user=user, chat=chat, platform="http", turn_id=turn, can_ask_human=True)


async def test_r4_tool_blocked_then_allowed_identity_from_context(
    gate_and_origin: tuple[Gate, FakeGrants, int],
) -> None:
    gate, _, _ = gate_and_origin
    services = FakeGrants()  # stands in for the facade: the tool takes it from invocation_state
    tool = make_run_script(gate, timeout=30)
    model: Callable[[], Model] = lambda: ToolThenText(fetch_script("http://files.test/hello"))  # noqa: E731
    text = await agent_turn(tool, model(), invocation_state(ctx(), services))
    lines = text.splitlines()
    assert "blocked: files.test" in lines
    assert lines[lines.index("output:") + 1].startswith("http://files.test/hello failed: HTTP Error 403")
    [ref] = services.refusals
    assert (ref.chat, ref.turn_id, ref.kind, ref.name) == (CHAT, TURN, "site", "files.test")
    services.grant(USER, CHAT, "site", "files.test")
    text = await agent_turn(tool, model(), invocation_state(ctx(), services))
    lines = text.splitlines()
    assert not any(ln.startswith("blocked: ") for ln in lines)
    assert lines[lines.index("output:") + 1] == "http://files.test/hello 32 hello from files.test over http"
    assert ISO.note in lines


async def test_r4_tool_without_context_refuses_and_ignores_model_identity(
    gate_and_origin: tuple[Gate, FakeGrants, int],
) -> None:
    gate, grants, _ = gate_and_origin
    tool = make_run_script(gate, timeout=30)
    text = await agent_turn(tool, ToolThenText("print('ran')"), None)
    assert "no request context" in text and "\nran" not in text
    # a model that invents identity arguments gets a validation error, never another user's grants
    grants.grant("U-admin", CHAT, "site", "files.test")
    text = await agent_turn(
        tool, ToolThenText(fetch_script("http://files.test/hello"), {"user": "U-admin"}),
        invocation_state(ctx(), grants),
    )  # fmt: skip
    assert "hello from files.test" not in text


def test_confinement_off_says_so() -> None:
    iso = detect_confinement(allow=False)
    assert iso.mode == "none" and "NOT confined" in iso.note
    box = GatedLocalSandbox(gate_unix_socket=None, gate_port=1, confinement=Confinement("bwrap", "x", "/usr/bin/bwrap"))
    assert box.confinement.mode == "none" and "no unix socket" in box.confinement.note


async def test_pip_inside_the_namespace_goes_through_the_package_view() -> None:
    """`pip download` in the sandbox sees only the gate's index; a name nobody granted is
    reported on the `blocked:` line as package:NAME and recorded for the turn."""
    need_netns()
    from tests.support.gate_support import index_app

    idx, idx_port = await start_site(index_app({"demo-pkg": ("1.0", [])}))
    gate = await Gate(GateConfig(package_index=f"http://127.0.0.1:{idx_port}/simple/"), clock=ManualClock()).start()
    services = FakeGrants()
    code = (
        "import subprocess, sys, os\n"
        "p = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps', '-d', 'dl', 'demo-pkg'],"
        " capture_output=True, text=True)\n"
        "print('pip exit', p.returncode)\n"
        "print(sorted(os.listdir('dl')) if os.path.isdir('dl') else [])\n"
    )
    try:
        tool = make_run_script(gate, timeout=90)
        text = await agent_turn(tool, ToolThenText(code), invocation_state(ctx(), services))
        lines = text.splitlines()
        assert "blocked: package:demo-pkg" in lines
        assert lines[lines.index("output:") + 1 :] == ["pip exit 1", "[]"]
        assert [(r.kind, r.name) for r in services.refusals] == [("package", "demo-pkg")]
        services.grant(USER, CHAT, "package", "demo-pkg")
        text = await agent_turn(tool, ToolThenText(code), invocation_state(ctx(), services))
        lines = text.splitlines()
        assert lines[lines.index("output:") + 1 :] == ["pip exit 0", "['demo_pkg-1.0-py3-none-any.whl']"]
    finally:
        await gate.close()
        await idx.cleanup()


async def test_tool_result_says_not_isolated_and_timed_out(gate_and_origin: tuple[Gate, FakeGrants, int]) -> None:
    """Without a namespace the tool says so in its result; a run past its limit is reported killed."""
    gate, grants, _ = gate_and_origin
    off = detect_confinement(allow=False)
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=off)
    tool = make_run_script(gate, box, timeout=1.5)
    code = "import time\nprint('working', flush=True)\ntime.sleep(30)\n"
    text = await agent_turn(tool, ToolThenText(code), invocation_state(ctx(), grants))
    lines = text.splitlines()
    assert lines[1] == "timed out after 1.5 s (killed)"
    assert off.note in lines and lines[lines.index("output:") + 1 :] == ["working"]
