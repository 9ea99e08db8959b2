"""Card ids and secrets: minted by the server, never derived from anything the SDK or model sees."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from chat_approvals.core.models import is_card_id

__all__ = ["hash_secret", "is_card_id", "mint_card_id", "mint_secret", "secret_matches"]


def mint_card_id() -> str:
    return "c_" + secrets.token_urlsafe(16)  # 128 random bits: opaque and unguessable


def mint_secret() -> str:
    return secrets.token_urlsafe(32)  # 256 random bits


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)  # constant time (R9)
