"""R20 at the aiohttp edge: what a request line may carry before any handler reads it.

yarl turns percent-encoded bytes that are not UTF-8 into U+FFFD, silently: `?user=al%FFice`
would name a user nobody stated. The raw request target is checked instead, and refused.
"""

from __future__ import annotations

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
