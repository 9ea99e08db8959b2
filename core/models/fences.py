"""Who may write a claimed card: what a claim was read as, and the fence a claim holds (R10-R13)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClaimRead:
    """What a claim was read as (R10): the claim applies only if the row still has this card,
    this secret hash and this claim count."""

    chat: str
    card_id: str
    secret_hash: str
    claim_count: int


@dataclass(frozen=True)
class Fence:
    """Who holds a claimed card (R10-R13): the claim's worker and fencing token. Every write
    made under a claim (renew, finish, chain) applies only while this fence still holds."""

    chat: str
    card_id: str
    worker: str
    token: int
