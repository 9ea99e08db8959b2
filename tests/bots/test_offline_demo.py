"""Issue 28: the offline demo succeeds. The demo origin scripts/run starts (scripts/demo_origin.py,
a real process) stands in for data.example.test behind the real egress gate (`resolve`, as
`--gate-resolve` does): fetch -> a card -> approve -> the agent reports the rows it found; deny ->
the person reads "Not downloaded: you denied it (reason)", not the model's instruction."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from chat_approvals.bots.config import ServerConfig
from chat_approvals.bots.server import build_app
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.tools import make_run_script
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from tests.conftest import TOKEN, Api

ROOT = Path(__file__).resolve().parents[2]
URL = "http://data.example.test/data.csv"


@pytest.fixture
def origin_port(tmp_path: Path) -> Iterator[int]:
    port_file = tmp_path / "origin.port"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "demo_origin.py"), str(port_file)])
    try:
        for _ in range(200):
            if port_file.exists():
                break
            time.sleep(0.02)
        yield int(port_file.read_text())
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
async def api(store: StoreIO, clock: ManualClock, origin_port: int) -> AsyncIterator[Api]:
    gate = Gate(GateConfig(resolve=[f"data.example.test=127.0.0.1:{origin_port}"]), clock=clock)
    factory = default_factory("scripted", [make_run_script(gate, timeout=30)])
    approvals = bootstrap(store, settings=Settings(), clock=clock, agent_factory=factory).approvals
    runner = web.AppRunner(build_app(approvals, ServerConfig(api_token=TOKEN), sweep=False, gate=gate))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(session, base)
    finally:
        await runner.cleanup()


def test_the_origin_serves_the_sample_and_a_wheel(origin_port: int) -> None:
    base = f"http://127.0.0.1:{origin_port}"
    with urllib.request.urlopen(f"{base}/data.csv", timeout=5) as r:
        assert r.read().decode().splitlines()[0] == "month,visitors,signups"
    with urllib.request.urlopen(f"{base}/simple/demo-rows/", timeout=5) as r:
        assert b"demo_rows-1.0-py3-none-any.whl#sha256=" in r.read()


async def test_fetch_approve_and_the_agent_reports_the_rows(api: Api) -> None:
    code, body = await api.turn("demo", "me", f"please fetch {URL}")
    assert code == 200 and body["status"] == "awaiting_approval", body
    card = body["card"]
    assert card["sites"] == ["data.example.test"]  # the gate refused it first (R3): nothing before approval
    assert "Allow data.example.test in this chat for 8 h" in card["text"]["choices"][0]["does"]
    code, res = await api.resume(card["card_id"], "me", card["secret"])
    assert code == 200 and res["outcome"] == "resumed", res
    assert res["result"]["text"] == (
        f"Downloaded {URL}: 12 rows under the header “month,visitors,signups” (215 bytes)."
    )
    assert res["answered_text"]["answered"].startswith("Approved by me at ")


async def test_deny_with_a_reason_shows_the_reason_not_the_models_instruction(api: Api) -> None:
    code, body = await api.turn("demo-deny", "me", f"please fetch {URL}")
    card = body["card"]
    code, res = await api.resume(card["card_id"], "me", card["secret"], approved=False, reason="not today")
    assert code == 200 and res["result"]["text"] == f"Not downloaded: you denied {URL} (not today)."
    assert "Continue without" not in res["result"]["text"]


async def test_typed_yes_while_the_card_is_open_gets_a_hint_not_the_card_again(api: Api) -> None:
    from chat_approvals.core.protocol.wording import USE_THE_BUTTONS

    code, body = await api.turn("demo-yes", "me", f"please fetch {URL}")
    assert body["status"] == "awaiting_approval"
    code, again = await api.turn("demo-yes", "me", "yes")
    assert code == 200 and again == {"status": "waiting", "text": USE_THE_BUTTONS}  # no card in it
    code, res = await api.resume(body["card"]["card_id"], "me", body["card"]["secret"])
    assert res["outcome"] == "resumed"  # the card's secret still works: it was not shown again


def test_the_package_index_path_installs_the_demo_package_through_the_gate(origin_port: int, tmp_path: Path) -> None:
    """The flags scripts/run passes: `--package-index` at the demo origin; pip in the sandbox
    installs demo-rows through the gate's index view (allowed here by the launch-time list)."""
    job = tmp_path / "job.sh"
    job.write_text(
        "python3 -m pip install --no-cache-dir --target /tmp/t demo-rows >/dev/null 2>&1\n"
        'PYTHONPATH=/tmp/t python3 -c \'import demo_rows; print("rows:", demo_rows.count("a\\n1\\n2\\n"))\'\n'
    )
    args = ["sandbox", "run", "--store", f"sqlite:///{tmp_path / 's.db'}", "--chat", "demo", "--user", "me"]
    args += ["--gate-allow", "package:demo-rows", "--package-index", f"http://127.0.0.1:{origin_port}/simple/"]
    out = subprocess.run(
        [sys.executable, "-m", "chat_approvals", *args, str(job)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert "rows: 2" in out.stdout, out.stdout + out.stderr
