"""Card ids and secrets: minted by the server, never derived from anything the SDK or model sees."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

# What mint_card_id() produces: "c_" + token_urlsafe(16) (22 url-safe base64 characters).
_CARD_ID = re.compile(r"c_[A-Za-z0-9_-]{22}")


def mint_card_id() -> str:
    return "c_" + secrets.token_urlsafe(16)  # 128 random bits: opaque and unguessable


def is_card_id(value: object) -> bool:
    """True only for a string of the minted shape: checked before a card id is used anywhere
    (an object key, a lookup, a log line), so `/`, `..`, NUL or 5,000 characters never get that far."""
    return isinstance(value, str) and _CARD_ID.fullmatch(value) is not None


def mint_secret() -> str:
    return secrets.token_urlsafe(32)  # 256 random bits


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_secret(secret), stored_hash)  # constant time (R9)
