"""A resumed run whose answer cannot be stored (R11, R20): release the claim as a failure the
protocol already knows, never leave it held.

Every string a model holds is valid by construction (core/text.py), so this is the last line:
should building or writing the answer still fail on its content (an encoder's ValueError, not a
store outage, which stays a 503 and keeps R11's re-run), the card is denied and expired under the
claim's own fence. A held claim would let the next click, after the lease, run the same call
again; an expired card only replays "expired".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from chat_approvals.core.models import Answer, AuditKind, Fence, Pointer
from chat_approvals.core.ports import Rows
from chat_approvals.core.protocol.grants import GrantBook

log = logging.getLogger(__name__)

# What a content failure looks like: pydantic's ValidationError, UnicodeEncodeError and json's
# errors are all ValueErrors; TypeError is an unencodable value.
UNSTORABLE: tuple[type[Exception], ...] = (ValueError, TypeError)
NOT_STORED = "This approval ran, but its answer could not be stored; the card is closed. Ask the agent again."

Audit = Callable[[Pointer, AuditKind, str, float, dict[str, Any]], Awaitable[None]]


async def release_unstorable(
    p: Pointer, fence: Fence, error: Exception, *, rows: Rows, grants: GrantBook, audit: Audit, at: float
) -> None:
    """Deny (its grants taken back) and finish the claimed card with no answer, then audit why."""
    log.error("the answer of card %s could not be stored: %s; the card is expired", p.card_id, type(error).__name__)
    await grants.apply(p, "system", Answer(approved=False), at)
    await rows.finish(fence, answer_key="")
    await audit(p, "expired", "system", at, {"why": "the answer could not be stored"})
