"""The offline model ("scripted"): a deterministic Strands `Model`, so the main job and the tests
run with no network.

Its replies depend only on the conversation, never on memory, which is what lets a turn paused
in one process resume in another. Behaviour, for the last user message of the conversation:
- no URLs: a plain reply;
- URLs: one step asking approval for their hosts; `download URL1 then URL2`: one step per URL,
  each its own approval (a chained card when the first is approved and the second is asked);
- when the `run_script` tool is registered, each step first runs a download script, asks for
  approval only for what the sandbox reports blocked, and after an approval runs it again;
- `save a note: TEXT` (when the `save_note` tool is registered): one call of save_note(TEXT), then
  a reply that says whether it was saved (quoting the tool's refusal when it was not);
- `save two notes: A | B` (or more, split on `|`): one call of save_note per note, all in one
  step (parallel calls), then a reply with one line per note.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator
from typing import Any

from strands.models.model import Model

import chat_approvals.core.agent.replies as people
import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL

RUN_SCRIPT = "run_script"
SAVE_NOTE = "save_note"
_NOTES = re.compile(r"^\s*save (?:two|several|\d+) notes:\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_NOTE = re.compile(r"^\s*save a note:\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)
_URL = re.compile(r"https?://[^\s<>\"')\]]+")
_CHAIN = re.compile(r"^\s*download\s+(\S+)\s+then\s+(\S+)\s*$", re.IGNORECASE)


def steps_of(prompt: str) -> list[list[str]]:
    chained = _CHAIN.match(prompt)
    if chained and all(_URL.fullmatch(u) for u in chained.groups()):
        return [[chained.group(1)], [chained.group(2)]]
    urls = list(dict.fromkeys(_URL.findall(prompt)))
    return [urls] if urls else []


def download_script(urls: list[str]) -> str:
    """The script the model writes: fetch each URL; print its size, its rows (a CSV's data lines)
    and its first line, or what failed in plain words (site unreachable, refused, too big)."""
    return (
        "import urllib.error, urllib.request\n"
        "LIMIT = 20_000_000\n"
        f"for url in {urls!r}:\n"
        "    try:\n"
        "        with urllib.request.urlopen(url, timeout=20) as r:\n"
        "            body = r.read(LIMIT + 1)\n"
        "        if len(body) > LIMIT:\n"
        "            print(f'{url}: failed: too big (over {LIMIT // 1_000_000} MB)')\n"
        "            continue\n"
        "        lines = [x for x in body.decode('utf-8', 'replace').splitlines() if x.strip()]\n"
        "        first = lines[0][:120] if lines else ''\n"
        "        print(f'{url}: {len(body)} bytes; {max(0, len(lines) - 1)} rows; first line: {first}')\n"
        "    except urllib.error.HTTPError as e:\n"
        "        print(f'{url}: failed: the site answered {e.code} {e.reason}')\n"
        "    except Exception as e:\n"
        "        why = str(getattr(e, 'reason', e))\n"
        "        if '403' in why:\n"
        "            why = 'refused by the sandbox gate'\n"
        "        elif '502' in why or 'Name or service' in why or 'refused' in why:\n"
        "            why = 'the site could not be reached'\n"
        "        elif 'timed out' in why:\n"
        "            why = 'the site did not answer in time'\n"
        "        print(f'{url}: failed: {why}')\n"
    )


def _text_of(block: dict[str, Any]) -> str:
    return "\n".join(c.get("text", "") for c in block.get("content", []) if isinstance(c, dict))


def _saved_text(block: dict[str, Any]) -> str:
    """A successful result for the person: the gate's note to the model about an edit is not
    repeated (R22), only that the approver edited the call."""
    texts = [c.get("text", "") for c in block.get("content", []) if isinstance(c, dict)]
    kept = [t for t in texts if not t.startswith(wording.EDITED_PREFIX)]
    return "\n".join(kept) + (" (the approver edited it before it ran)" if len(kept) < len(texts) else "")


class ScriptedModel(Model):
    def __init__(self) -> None:
        self.config: dict[str, Any] = {"model_id": "scripted"}
        self._lock = threading.Lock()
        self.calls = 0

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the scripted model has no structured output")

    # --- the policy ------------------------------------------------------------------
    def decide(self, messages: list[dict[str, Any]], tool_names: set[str]) -> tuple[str, list[dict[str, Any]]]:
        """(text, tool uses) for the next assistant message."""
        start = max(
            (i for i, m in enumerate(messages) if m["role"] == "user" and any("text" in b for b in m["content"])),
            default=-1,
        )
        if start < 0:
            return people.HELLO, []
        prompt = " ".join(b["text"] for b in messages[start]["content"] if "text" in b)
        notes = _NOTES.match(prompt)
        if notes and SAVE_NOTE in tool_names:
            return self._notes([n.strip() for n in notes.group(1).split("|") if n.strip()], messages[start + 1 :])
        note = _NOTE.match(prompt)
        if note and SAVE_NOTE in tool_names:
            return self._note(note.group(1), messages[start + 1 :])
        steps = steps_of(prompt)
        if not steps:
            return people.chat_reply(prompt, SAVE_NOTE in tool_names), []

        # The turn so far: every tool call after the prompt with its result, in order.
        names: dict[str, tuple[str, dict[str, Any]]] = {}
        results: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        for m in messages[start + 1 :]:
            for b in m["content"]:
                if "toolUse" in b:
                    names[b["toolUse"]["toolUseId"]] = (b["toolUse"]["name"], b["toolUse"].get("input", {}))
                if "toolResult" in b:
                    name, inp = names.get(b["toolResult"]["toolUseId"], ("?", {}))
                    results.append((name, inp, b["toolResult"]))

        sandbox = RUN_SCRIPT in tool_names
        report: list[str] = []
        cursor = 0
        for urls in steps:
            line, cursor, ask = self._step(urls, results, cursor, sandbox)
            if ask is not None:
                return "", [ask]
            report.append(line)
        return "\n".join(report), []

    def _step(
        self, urls: list[str], results: list[tuple[str, dict[str, Any], dict[str, Any]]], cursor: int, sandbox: bool
    ) -> tuple[str, int, dict[str, Any] | None]:
        reason = "to download " + ", ".join(urls)
        approval = {"name": APPROVAL_TOOL, "input": {"reason": reason, "urls": urls}}
        run = {"name": RUN_SCRIPT, "input": {"code": download_script(urls), "language": "python"}}
        pending = results[cursor:]

        def take(n: int) -> int:
            return cursor + n

        if not sandbox:
            if not pending:
                return "", cursor, approval
            name, _, res = pending[0]
            if name != APPROVAL_TOOL:
                return f"Something unexpected ran: {name}.", take(1), None
            if res.get("status") == "success":
                return f"Approved: I may now fetch {', '.join(urls)}.", take(1), None  # no sandbox: nothing fetched
            return self._without(urls, _text_of(res)), take(1), None

        # With a sandbox: run -> (blocked? ask -> run again) -> report the output.
        if not pending:
            return "", cursor, run
        first = _text_of(pending[0][2])
        if "\nblocked: " not in "\n" + first:
            return self._output(urls, first), take(1), None
        if len(pending) < 2:
            return "", cursor, approval  # the blocked hosts are merged in by the tool (R3)
        verdict = pending[1][2]
        if verdict.get("status") != "success":
            return self._without(urls, _text_of(verdict)), take(2), None
        if len(pending) < 3:
            return "", cursor, run
        return self._output(urls, _text_of(pending[2][2])), take(3), None

    @staticmethod
    def _note(text: str, turn: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = [b["toolResult"] for m in turn for b in m["content"] if "toolResult" in b]
        if not results:
            return "", [{"name": SAVE_NOTE, "input": {"text": text}}]
        last = results[-1]
        if last.get("status") == "success":
            return _saved_text(last), []
        return people.not_done("Not saved", "the note", _text_of(last)), []

    @staticmethod
    def _notes(texts: list[str], turn: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """Every note in one step; then one line per note, in the order asked."""
        results = {
            b["toolResult"]["toolUseId"]: b["toolResult"] for m in turn for b in m["content"] if "toolResult" in b
        }
        uses = [b["toolUse"] for m in turn for b in m["content"] if "toolUse" in b]
        if not uses:
            return "", [{"name": SAVE_NOTE, "input": {"text": t}} for t in texts]
        lines = []
        for use in uses:
            res = results.get(use["toolUseId"], {})
            if res.get("status") == "success":
                lines.append(_saved_text(res))
            else:
                lines.append(people.not_done("Not saved", "the note", _text_of(res)))
        return "\n".join(lines), []

    @staticmethod
    def _without(urls: list[str], why: str) -> str:
        return people.not_done("Not downloaded", ", ".join(urls), why)

    @staticmethod
    def _output(urls: list[str], result: str) -> str:
        out = result.split("output:", 1)[1].strip() if "output:" in result else result.strip()
        return "\n".join(people.download_line(line) for line in out.splitlines() if line.strip()) or out

    # --- the Model contract ----------------------------------------------------------
    async def stream(
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        with self._lock:
            self.calls += 1
        tool_names = {s["name"] for s in (tool_specs or [])}
        text, uses = self.decide(list(messages), tool_names)
        yield {"messageStart": {"role": "assistant"}}
        if text:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
        for i, use in enumerate(uses):
            tool_use_id = f"tooluse_{len(messages)}_{i}"  # unique in the conversation, deterministic
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id, "name": use["name"]}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(use["input"])}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if uses else "end_turn"}}
        yield {
            "metadata": {"usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}, "metrics": {"latencyMs": 0}}
        }
