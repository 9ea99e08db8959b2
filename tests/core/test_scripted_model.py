"""The offline model's policy: a pure function of the conversation (what makes a cross-process resume work)."""

from __future__ import annotations

from typing import Any

from chat_approvals.core.agent.scripted_model import RUN_SCRIPT, ScriptedModel, steps_of

URL = "https://files.example/a.csv"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def call(tool_use_id: str, name: str, inp: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"toolUse": {"toolUseId": tool_use_id, "name": name, "input": inp}}]}


def result(tool_use_id: str, text: str, status: str = "success") -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"toolResult": {"toolUseId": tool_use_id, "status": status, "content": [{"text": text}]}}],
    }


def test_steps_of_plain_and_chained_messages() -> None:
    assert steps_of("hello there") == []
    assert steps_of(f"get {URL} and {URL} please") == [[URL]]
    assert steps_of("download https://a.example/x then https://b.example/y") == [
        ["https://a.example/x"],
        ["https://b.example/y"],
    ]


def test_sandbox_flow_runs_asks_reruns_and_reports_honestly() -> None:
    model = ScriptedModel()
    tools = {RUN_SCRIPT, "request_approval"}
    convo = [user(f"fetch {URL}")]
    text, uses = model.decide(convo, tools)
    assert text == "" and uses[0]["name"] == RUN_SCRIPT
    convo += [call("t1", RUN_SCRIPT, uses[0]["input"]), result("t1", "exit code: 1\nblocked: files.example\noutput:\n")]
    text, uses = model.decide(convo, tools)
    assert uses == [{"name": "request_approval", "input": {"reason": f"to download {URL}", "urls": [URL]}}]
    convo += [call("t2", "request_approval", uses[0]["input"]), result("t2", "Approved: …")]
    text, uses = model.decide(convo, tools)
    assert uses[0]["name"] == RUN_SCRIPT
    convo += [call("t3", RUN_SCRIPT, uses[0]["input"]), result("t3", f"exit code: 0\noutput:\n{URL}: failed: 502")]
    text, uses = model.decide(convo, tools)
    assert uses == [] and text == f"Could not download {URL}: 502."
    # The same conversation gives the same answer to a fresh model (another process).
    assert ScriptedModel().decide(convo, tools) == (text, uses)


def test_denied_approval_continues_without_the_data() -> None:
    convo = [user(f"fetch {URL}"), call("t1", "request_approval", {}), result("t1", "Access denied: …", status="error")]
    text, uses = ScriptedModel().decide(convo, {"request_approval"})
    assert uses == [] and text.startswith(f"Not downloaded, {URL}: Access denied")
