"""R20 at the aiohttp edge: what a request line may carry before any handler reads it.

yarl turns percent-encoded bytes that are not UTF-8 into U+FFFD, silently: `?user=al%FFice`
would name a user nobody stated. The raw request target is checked instead, and refused.
"""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import unquote_to_bytes

from aiohttp import web

from chat_approvals.core.text import display_problem

NOT_UTF8_TARGET = "the request path or query is not UTF-8 once percent-decoded"


def target_problem(request: web.Request) -> str | None:
    """Why this request's path and query are not acceptable text, or None."""
    raw = request.raw_path
    try:
        unquote_to_bytes(raw.replace("+", " ")).decode("utf-8")
    except UnicodeError:  # not UTF-8 once decoded, or raw bytes aiohttp kept as surrogates
        return NOT_UTF8_TARGET
    for name, value in request.match_info.items():
        problem = display_problem(value, name)
        if problem is not None:
            return problem
    return None


def may_see_details(request: web.Request, tokens: list[str]) -> bool:
    """A loopback client, or one with a configured API token: may read what an operator reads
    (the store's path on /healthz)."""
    try:
        if request.remote is not None and ipaddress.ip_address(request.remote).is_loopback:
            return True
    except ValueError:
        pass
    header = request.headers.get("Authorization", "")
    given = (header[7:].strip() if header.startswith("Bearer ") else "").encode("utf-8", "surrogateescape")
    return bool(given) and any(hmac.compare_digest(given, t.encode("utf-8", "surrogateescape")) for t in tokens)
