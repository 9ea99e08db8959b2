"""The approval tool: `request_approval(reason, urls=None, packages=None)`.

On the first call it raises an SDK interrupt carrying a draft card; the turn runner turns that
draft into a stored, posted card. On the resume the SDK runs this body again from the top, so
it must recognise its own answered interrupt and answer ONLY from the stored card (R2).
"""

from __future__ import annotations

import logging
from typing import Any

from strands import ToolContext, tool

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.batch_rule import APPROVAL_TOOL
from chat_approvals.core.agent.context import RequestContext, context_of, tool_access_of
from chat_approvals.core.agent.strands_compat import answered_response
from chat_approvals.core.models import ApprovalCard, parse_answer
from chat_approvals.core.protocol.subjects import host_of, normalize_package, unique

INTERRUPT_NAME = "chat-approvals:approval"

log = logging.getLogger(__name__)


def _result(tool_context: ToolContext, status: str, text: str) -> dict[str, Any]:
    return {"toolUseId": tool_context.tool_use["toolUseId"], "status": status, "content": [{"text": text}]}


def own_interrupt_answered(tool_context: ToolContext) -> bool:
    """Has THIS call's interrupt been answered? Reads the SDK's interrupt state, which has no
    public accessor in 1.62 (core/agent/strands_compat.py, 1). If it cannot be read, assume yes: never
    merging again is the safe mistake (R2)."""
    try:
        answered, _ = answered_response(tool_context, INTERRUPT_NAME)
    except Exception as e:
        log.warning("interrupt state unreadable, treating the interrupt as answered: %s", e)
        return True
    return answered


def outcome_text(card: ApprovalCard, response: Any) -> tuple[str, str]:
    """The tool's answer from the stored card and the user's response alone (R2, R15, R16)."""
    answer = parse_answer("resolved", response)  # the resume service sends a parsed Answer; fail closed anyway
    if not answer.approved:
        return "error", wording.user_denied(card.sites, card.packages, answer.reason)
    chosen, left_out = card.chosen_packages(answer), card.left_out_packages(answer)
    return "success", wording.user_approved(card.sites, chosen, left_out, answer.duration)


def _resume_branch(ctx: RequestContext, tool_context: ToolContext) -> dict[str, Any] | None:
    card = ctx.resume_card
    if card is None or not own_interrupt_answered(tool_context):
        return None
    response = tool_context.interrupt(INTERRUPT_NAME)  # answered: returns the response, raises nothing
    status, text = outcome_text(card, response)
    return _result(tool_context, status, text)


@tool(name=APPROVAL_TOOL, context=True)
async def request_approval(
    reason: str,
    tool_context: ToolContext,
    urls: list[str] | None = None,
    packages: list[str] | None = None,
) -> dict[str, Any]:
    """Ask the user to approve downloads the sandbox refused or will need: sites (from URLs) and
    packages. Call this tool ON ITS OWN in a step, never next to other tools. If you just ran a
    script that was blocked, you may call it with only a reason: the blocked sites are merged in.

    Args:
        reason: Why the data or package is needed, in one sentence the user will read.
        urls: Full http(s) URLs you need to download.
        packages: Package names you need to install.
    """
    ctx = context_of(tool_context.invocation_state)
    access = tool_access_of(tool_context.invocation_state)
    if ctx is None or access is None:
        return _result(tool_context, "error", wording.NO_CONTEXT)  # R4: no server context, no approval

    resumed = _resume_branch(ctx, tool_context)
    if resumed is not None:
        return resumed

    # First call (R3): validate, merge what the sandbox refused this turn, drop what is approved.
    try:
        named_urls = [u.strip() for u in (urls or [])]
        url_hosts = [host_of(u) for u in named_urls]
        named_packages = [normalize_package(p) for p in (packages or [])]
    except ValueError as e:
        return _result(tool_context, "error", wording.invalid_input(str(e)))
    if not isinstance(reason, str) or not reason.strip():
        return _result(tool_context, "error", wording.invalid_input("the reason is empty"))

    refused = await access.refusals(ctx.chat, ctx.turn_id)
    sites = unique(url_hosts + [r.name for r in refused if r.kind == "site"])
    pkgs = unique(named_packages + [r.name for r in refused if r.kind == "package"])
    if not sites and not pkgs:
        return _result(tool_context, "error", wording.NOTHING_NAMED)

    open_sites = [s for s in sites if s not in ctx.approved_sites]
    open_packages = [p for p in pkgs if p not in ctx.approved_packages]
    if not open_sites and not open_packages:
        return _result(tool_context, "success", wording.already_approved(sites, pkgs))
    if not ctx.can_ask_human:
        return _result(tool_context, "error", wording.unattended_deny(open_sites, open_packages))  # R6

    # only URLs of sites still asked for: a refusal earlier in the turn may be approved by now (R13)
    # A refused URL shows what the sandbox really reached (a redirect, a mirror); where the model
    # named a URL on that host, the named one says more (an HTTPS refusal only shows the host).
    named_hosts = set(url_hosts)
    refused_urls = [
        r.url for r in refused if r.url and r.kind == "site" and r.name in open_sites and r.name not in named_hosts
    ]
    card_urls = unique([u for u, h in zip(named_urls, url_hosts, strict=True) if h in open_sites] + refused_urls)
    draft: dict[str, Any] = {
        "reason": reason.strip(),
        "sites": open_sites,
        "urls": card_urls,
        "packages": open_packages,
        "tool_use_id": tool_context.tool_use["toolUseId"],
    }
    response = tool_context.interrupt(INTERRUPT_NAME, reason=draft)  # raises until answered (R1)
    # Reached only with a preset response; the turn runner never presets one.
    placeholder = ApprovalCard(
        card_id="",
        chat=ctx.chat,
        owner=ctx.user,
        platform=ctx.platform,
        reason=reason.strip(),
        sites=open_sites,
        urls=card_urls,
        packages=open_packages,
        created_at=0.0,
        expires_at=0.0,
    )
    status, text = outcome_text(placeholder, response)
    return _result(tool_context, status, text)
