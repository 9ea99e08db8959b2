"""What the offline scripted model says to people, so its replies read like a helpful agent's.

The model is told a deny with its instruction (core/protocol/wording.py: "Do not try … another
way"); the person reads "Not downloaded: you denied it (reason)". A download reports what it found
(rows counted) or what failed, in plain words, naming the URL once.
"""

from __future__ import annotations

import re

DEMO_URL = "http://data.example.test/data.csv"
HELLO = (
    "Hello! I can download a file for you once you approve the site, or save a note once you approve it. "
    f'Try "please fetch {DEMO_URL}" or "save a note: call Alex at 3".'
)
_GREETING = re.compile(r"^\s*(hi|hello|hey|help|what can you do|who are you)\b", re.IGNORECASE)
_REASON = re.compile(r'(?:The approver said|Their reason): "(.*)"\.', re.DOTALL)
_DENIED = ("Access denied: the user did not approve", "The user did not approve")
_FETCHED = re.compile(r"^(?P<url>\S+): (?P<bytes>\d+) bytes; (?P<rows>\d+) rows; first line: (?P<first>.*)$")
_FAILED = re.compile(r"^(?P<url>\S+): failed: (?P<why>.*)$")


def chat_reply(prompt: str, notes: bool) -> str:
    """A message with nothing to fetch or save: what I can do, with examples."""
    if _GREETING.search(prompt) or "what can you do" in prompt.lower():
        return (
            HELLO
            if notes
            else f'Hello! I can download a file for you once you approve the site. Try "please fetch {DEMO_URL}".'
        )
    return f'I found no URL to fetch in that. Send me one, for example "please fetch {DEMO_URL}".'


def denied_reason(model_text: str) -> str | None:
    m = _REASON.search(model_text)
    return m.group(1) if m else None


def not_done(head: str, thing: str, model_text: str) -> str:
    """ "Not downloaded: you denied https://… (too big)." from the text the model was given; any
    other refusal is quoted as it was written (e.g. an unattended run's, read by a program)."""
    text = model_text.strip()
    if any(d in text for d in _DENIED):  # the SDK may prefix the result ("DENIED: …")
        reason = denied_reason(text)
        return f"{head}: you denied {thing}" + (f" ({reason})." if reason else ".")
    return f"{head}, {thing}: {text}"


def download_line(line: str) -> str:
    """One line of the download script's output, for a person."""
    m = _FETCHED.match(line.strip())
    if m:
        rows = int(m["rows"])
        first = m["first"].strip()
        if rows:
            what = f"{rows} row{'s' if rows != 1 else ''} under the header “{first}”"
        else:
            what = f"one line, “{first}”" if first else "an empty file"
        return f"Downloaded {m['url']}: {what} ({int(m['bytes']):,} bytes)."
    m = _FAILED.match(line.strip())
    if m:
        return f"Could not download {m['url']}: {m['why']}."
    return line
