"""`run_script`: the Strands tool that runs the agent's script in the sandbox, behind the gate.

Identity (user, chat, turn) comes from the request context the server put in
`invocation_state` (R4), never from the model's arguments. The result names what the gate
refused, in a fixed shape the offline model (core/agent/scripted_model.py) reads:

    exit code: 0
    limit hit: CPU time (60 s)                    <- only when a resource limit stopped the script
    blocked: other.test, package:requests        <- only when something was refused
    <one sentence: ask with request_approval, then run the same script again>
    sandbox confined ... / sandbox NOT confined ...  <- always: what the sandbox confines
    stderr:                                       <- only when there was any
    ...
    output:
    <the script's stdout, to the end>
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from pathlib import Path
from typing import Any

from strands import ToolContext, tool
from strands.sandbox import Sandbox
from strands.sandbox.errors import SandboxTimeoutError

from chat_approvals.core.agent.context import context_of, raw_access_of
from chat_approvals.core.sandbox.egress.backend import GrantsBackend
from chat_approvals.core.sandbox.egress.gate import Gate
from chat_approvals.core.sandbox.runner import LIMIT_MARK, GatedLocalSandbox, Limits, detect_confinement

log = logging.getLogger(__name__)

TOOL_NAME = "run_script"
LANGUAGES = ("python", "sh")


def format_result(
    *,
    exit_code: int | None,
    stdout: str,
    stderr: str,
    blocked: list[str],
    denied: list[str],
    isolation: str,
    timeout: float | None = None,
) -> str:
    lines = [f"timed out after {timeout:g} s (killed)" if exit_code is None else f"exit code: {exit_code}"]
    hits = [ln[len(LIMIT_MARK) : -1] for ln in stderr.splitlines() if ln.startswith(LIMIT_MARK) and ln.endswith("]")]
    if hits:
        lines.append("limit hit: " + ", ".join(hits) + " (the sandbox stopped the script)")
    if blocked:
        lines.append("blocked: " + ", ".join(blocked))
        lines.append(
            "The egress gate refused these because nobody has approved them for this chat. "
            "Call request_approval to ask the user for them, then run the same script again."
        )
    if denied:
        lines.append(
            "denied by the operator's policy (no approval can allow these; continue without them "
            "and say so): " + ", ".join(denied)
        )
    lines.append(isolation)
    if stderr.strip():
        lines += ["stderr:", stderr.rstrip("\n")]
    lines += ["output:", stdout.rstrip("\n")]
    return "\n".join(lines)


class NotConfined(ValueError):
    """The sandbox cannot be confined here and the operator did not accept running unconfined."""


def make_run_script(
    gate: Gate,
    sandbox: Sandbox | None = None,
    *,
    timeout: float | None = None,
    limits: Limits | None = None,
    allow_unconfined: bool = False,
    gate_host: str = "127.0.0.1",
    gate_port: int | None = None,
    isolation_note: str | None = None,
    results_dir: Path | None = None,
) -> Any:
    """Build the tool bound to one gate and one sandbox (the default: `GatedLocalSandbox`).

    The default sandbox must be confinable (bubblewrap); otherwise this raises `NotConfined`
    unless `allow_unconfined` (the operator's `--sandbox-unconfined`). For a Docker or remote
    sandbox pass it as `sandbox` with `gate_host`/`gate_port` set to where that sandbox reaches
    the gate, and `isolation_note` saying truthfully how it is confined.

    `results_dir`: where a run resumed from a card keeps its result, keyed by the card and the
    tool use id (issue 27.5). A worker killed after the fetch and before the resume is marked
    done leaves a lease that lapses; the next claim (`resume_attempt` 2, 3, ...) replays the same
    snapshot and so the same call with the same id, and reuses the stored result instead of
    fetching again (R11 made harmless, as save_note does for notes).
    """
    lim = limits or Limits()
    if timeout is not None:
        lim = Limits(**{**lim.__dict__, "wall": timeout})
    # Decided once, at start-up (logged there); the sandbox itself is built on first use because
    # the gate's port and socket exist only once the gate has started.
    confinement = detect_confinement() if sandbox is None else None
    if confinement is not None:  # said once at start-up, and again in every result
        if not confinement.confined and not allow_unconfined:
            raise NotConfined(
                f"--sandbox: {confinement.note}. Install bubblewrap (scripts/setup does), or start with "
                "--sandbox-unconfined to accept that"
            )
        level = logging.WARNING if not confinement.confined else logging.DEBUG  # the banner says it
        log.log(level, "run_script sandbox: %s", confinement.note)
    boxes: list[Sandbox] = [sandbox] if sandbox is not None else []

    def box_and_note() -> tuple[Sandbox, str]:
        if not boxes:
            boxes.append(
                GatedLocalSandbox(
                    gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=confinement, limits=lim
                )
            )
        conf = getattr(boxes[0], "confinement", None)
        return boxes[0], isolation_note or str(getattr(conf, "note", "sandbox confinement unknown"))

    @tool(name=TOOL_NAME, context=True)
    async def run_script(code: str, tool_context: ToolContext, language: str = "python") -> str:
        """Run a script in the sandbox and return its exit code and output. The sandbox reaches the
        network only through the egress gate: hosts and packages nobody approved for this chat are
        refused, and the result lists them on a `blocked:` line; call request_approval for them and
        then run the same script again. Python scripts can use urllib or `pip download`.

        Args:
            code: the whole script.
            language: "python" (default) or "sh".
        """
        state = tool_context.invocation_state
        ctx = context_of(state)
        if ctx is None:  # R4: no server-set identity, no run (fail closed)
            return "error: run_script has no request context, so it cannot tell whose run this is; not run."
        if language not in LANGUAGES:
            return f"error: unsupported language {language!r}; use one of: {', '.join(LANGUAGES)}."
        access = raw_access_of(state)
        backend: GrantsBackend | None = access if isinstance(access, GrantsBackend) else gate.backend
        if backend is None:
            return "error: run_script has no grants service; not run."
        if gate.port == 0:
            return "error: the egress gate is not running, so the sandbox has no way out; not run."
        tool_use_id = str(tool_context.tool_use["toolUseId"])
        card = ctx.resume_card.card_id if ctx.resume_card is not None else None
        kept = _kept_path(results_dir, card, tool_use_id, language, code)
        if kept is not None and (ctx.resume_attempt or 1) > 1:
            earlier = _read_kept(kept)
            if earlier is not None:  # an earlier attempt of this same call already fetched it
                log.info("run_script chat=%s turn=%s reused attempt 1's result", ctx.chat, ctx.turn_id)
                return earlier
        box, note = box_and_note()
        with gate.run(user=ctx.user, chat=ctx.chat, turn_id=ctx.turn_id, backend=backend) as run:
            env = gate.sandbox_env(run, gate_host, gate_port)
            exit_code: int | None
            try:
                res = await box.execute_code(code, language, timeout=lim.wall, env=env)
                exit_code, out, err = res.exit_code, res.stdout, res.stderr
            except SandboxTimeoutError as e:
                exit_code, out, err = None, e.stdout, e.stderr
            blocked, denied = run.blocked_subjects(), run.denied_subjects()
            result = format_result(
                exit_code=exit_code, stdout=out, stderr=err, blocked=blocked, denied=denied,
                isolation=note, timeout=lim.wall,
            )  # fmt: skip
            # Kept before anything else can fail: a blocked or timed-out run fetched nothing worth
            # keeping, so a later attempt runs it again.
            if kept is not None and exit_code is not None and not blocked:
                _keep(kept, result)
        log.info("run_script chat=%s turn=%s exit=%s blocked=%s", ctx.chat, ctx.turn_id, exit_code, blocked)
        return result

    return run_script


def _kept_path(root: Path | None, card_id: str | None, tool_use_id: str, language: str, code: str) -> Path | None:
    """Where this call's result is kept; None outside a resume (a first turn cannot be a repeat).
    The script is in the key too, so a different script under the same id never reuses it."""
    if root is None or card_id is None:
        return None
    key = hashlib.sha256("\0".join((card_id, tool_use_id, language, code)).encode("utf-8", "replace")).hexdigest()
    return root / key[:2] / key[2:34]  # no id reaches a path


def _read_kept(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _keep(path: Path, result: str) -> None:
    """Written whole or not at all (a temporary file renamed), so a kill mid-write leaves none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(result, encoding="utf-8", errors="replace")
        os.replace(tmp, path)
    except OSError as e:  # keeping it is a courtesy to a later attempt; the run itself succeeded
        log.warning("run_script: could not keep the result for a repeat attempt: %s", e)


def sweep_kept(root: Path, *, older_than: float) -> int:
    """Delete kept results written before `older_than` (seconds since the epoch, the file's mtime):
    a result is worth keeping only while its card can still be claimed again. File work: call it
    off the event loop (R21). Returns how many were removed."""
    removed = 0
    try:
        shards = [d for d in root.iterdir() if d.is_dir() and not d.is_symlink()]
    except OSError:
        return 0  # nothing kept yet (or unreadable: the next sweep tries again)
    for shard in shards:
        for f in shard.iterdir():
            try:
                if f.is_file() and not f.is_symlink() and f.stat().st_mtime < older_than:
                    f.unlink()
                    removed += 1
            except OSError as e:
                log.warning("run_script: could not sweep a kept result: %s", e)
        with contextlib.suppress(OSError):
            shard.rmdir()  # only when empty
    return removed
