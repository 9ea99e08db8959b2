"""What one turn may carry (issue 27.2, R20's "within a stated size"): checked at the edge, before
the turn takes its lease, so a 1 MB message of 35,000 URLs is refused in microseconds instead of
holding the event loop for seconds while its card is built.

The text limit is Slack's own for a message (40,000 characters); a person asking for approval
names a handful of sites, so URLs and hosts are capped well above any real request.
"""

from __future__ import annotations

import re

MAX_TURN_TEXT = 40_000  # characters
MAX_TURN_BODY = 512 * 1024  # bytes of a /v1/turns body: the text at its limit, JSON-escaped, fits
MAX_URLS = 100  # per turn
MAX_HOSTS = 25  # distinct hosts per turn
_URL_HOST = re.compile(r"https?://([^/\s<>\"'|)\]?#]*)", re.IGNORECASE)


def turn_text_problem(text: str) -> str | None:
    """Why this turn's text is more than a turn may carry, or None."""
    if len(text) > MAX_TURN_TEXT:
        return f"the text is longer than {MAX_TURN_TEXT:,} characters"
    hosts: set[str] = set()
    for n, m in enumerate(_URL_HOST.finditer(text), start=1):
        if n > MAX_URLS:
            return f"the text names more than {MAX_URLS} URLs; ask about fewer at a time"
        hosts.add(m.group(1).lower())
        if len(hosts) > MAX_HOSTS:
            return f"the text names more than {MAX_HOSTS} hosts; ask about fewer at a time"
    return None


def turn_refusal(text: str) -> str | None:
    """What a chat front end (Slack, Teams) replies instead of starting a turn that carries too
    much, or None; the HTTP edge answers 413/422 with the same reasons."""
    problem = turn_text_problem(text)
    return None if problem is None else f"Not started: {problem}. Nothing was asked or run."
