"""What the egress gate allows (the policy side of the gate; the connections are
`core/sandbox/egress/proxy.py`): one request's host, port or package against the operator's
lists, what no approval can allow, and the run's grants."""

from __future__ import annotations

import logging

from chat_approvals.core.clock import Clock
from chat_approvals.core.models import Refusal, SubjectKind
from chat_approvals.core.protocol.subjects import never_allowable_reason
from chat_approvals.core.sandbox.egress.policy import Rules
from chat_approvals.core.sandbox.egress.runs import Blocked, Run

log = logging.getLogger(__name__)


async def decide_request(
    run: Run,
    kind: SubjectKind,
    name: str,
    port: int | None,
    url: str | None,
    *,
    rules: Rules,
    grant_ports: tuple[int, ...],
    clock: Clock,
) -> str | None:
    """None when allowed; otherwise the sentence the client is refused with. In this order: the
    deny list (wins), the allow list, what no approval can allow, the ports a grant covers, then
    the run's grants, asked at request time (a revoke bites on the next connection)."""
    label = name if kind == "site" else f"package {name}"
    if rules.denied(kind, name, port):
        run._note_denied(name if kind == "site" else f"package:{name}")
        return f"{label} is denied by the operator's policy; no approval can allow it."
    if rules.allowed(kind, name, port):
        return None
    never = never_allowable_reason(name) if kind == "site" else None
    if never:  # refused as such: no approval can allow it, so it is never recorded for a card
        run._note_denied(name)
        return never + "."
    if kind == "site" and port not in grant_ports:
        run._note_denied(f"{name}:{port}")
        return f"port {port} of {name} is not open to approvals (only {grant_ports})."
    try:
        if await run.backend.is_allowed(user=run.user, chat=run.chat, kind=kind, name=name, turn_id=run.turn_id):
            return None
    except Exception:  # fail closed: a store error is a refusal, and is not recorded as one
        log.exception("grant check failed for %s %s", kind, name)
        return f"the gate could not check the grants for {label}; try again."
    b = Blocked(kind, name, port, url)
    if run._note_refused(b):
        refusal = Refusal(
            chat=run.chat,
            turn_id=run.turn_id,
            kind=kind,
            name=name,
            port=port,
            url=url,
            at=clock.now(),
        )
        try:
            await run.backend.record_refusal(refusal)
        except Exception:
            log.exception("could not record refusal of %s %s", kind, name)
    return (
        f"{label} is not approved for this chat. The egress gate refused it; the agent can ask for it "
        "with request_approval."
    )


async def still_granted(run: Run, kind: SubjectKind, name: str) -> bool:
    try:
        return await run.backend.is_allowed(user=run.user, chat=run.chat, kind=kind, name=name, turn_id=run.turn_id)
    except Exception:  # a store hiccup does not cut a live download; the next check decides
        log.warning("grant re-check for %s failed; keeping the connection until the next check", name,
                    exc_info=True)  # fmt: skip
        return True
