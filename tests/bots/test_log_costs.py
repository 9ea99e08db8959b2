"""Log lines made cheaper (issue 34) keep their text: the time formatted once a second
(bots/logs.SecondStamp) is what logging and aiohttp would write for every line, a later second
is never shown from the earlier one, and the redaction's quick checks skip only lines a pattern
cannot match. The redaction is R19's (no usable secret in logs); no rule covers the time's
formatting: those tests check the text the change keeps."""

from __future__ import annotations

import json
import logging
import time

from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from aiohttp.web_log import AccessLogger

from chat_approvals.bots.logs import (
    REDACTED,
    AccessLog,
    RedactingFormatter,
    RedactingJsonFormatter,
    Redactor,
    SecondStamp,
)


def _record(created: float) -> logging.LogRecord:
    rec = logging.LogRecord("chat_approvals.x", logging.INFO, __file__, 1, "resumed %s", ("c_1",), None)
    rec.created, rec.msecs = created, (created - int(created)) * 1000
    return rec


def test_a_second_stamp_is_made_again_for_another_second_or_format() -> None:
    stamp = SecondStamp(time.gmtime)
    assert stamp(0, "%H:%M:%S") == "00:00:00"
    assert stamp(0, "%H:%M:%S") == "00:00:00"
    assert stamp(1, "%H:%M:%S") == "00:00:01"  # never the second before
    assert stamp(1, "%Y") == "1970"  # nor another format's text
    assert stamp(61, "%H:%M:%S") == "00:01:01"


def test_plain_and_json_lines_carry_the_time_logging_itself_would_write() -> None:
    plain, js = RedactingFormatter(Redactor()), RedactingJsonFormatter(Redactor())
    own, own_js = logging.Formatter(plain._fmt), logging.Formatter(datefmt=js.datefmt)
    start = 1_796_446_239.25
    # within one second, across the next ones, and back: every line its own time, to the millisecond
    for created in (start, start + 0.5, start + 0.75, start + 1.0, start + 1.999, start + 63.1, start):
        rec = _record(created)
        assert plain.format(rec) == own.format(_record(created))
        assert json.loads(js.format(_record(created)))["time"] == own_js.formatTime(rec, js.datefmt)


def test_the_access_log_line_and_its_fields_are_aiohttps_own() -> None:
    request = make_mocked_request("POST", "/slack/events", headers={"User-Agent": "Slackbot 1.0"})
    response = web.Response(status=200, text="ok")
    ours, theirs = AccessLog(logging.getLogger("x")), AccessLogger(logging.getLogger("x"))
    for taken in (0.0, 0.002, 5.0, 3600.0):  # the start: now less the time taken, a second or an hour ago
        for _ in range(3):  # the two clocks may be read either side of a second's turn: read again
            line, want = ours._format_line(request, response, taken), theirs._format_line(request, response, taken)
            if line == want:
                break
        assert line == want


def test_r19_bearer_is_redacted_in_any_case_and_every_pattern_still_applies() -> None:
    redact = Redactor()
    assert redact("authorization: BEARER abc.def") == f"authorization: BEARER {REDACTED}"
    assert redact("auth bEaReR abc") == f"auth bEaReR {REDACTED}"
    assert redact("token xapp-1-A1-abc") == f"token {REDACTED}"
    assert redact("token xoxb-1-abc") == f"token {REDACTED}"
    assert redact(f"card {'s3cr-t_' * 6}x shown") == f"card {REDACTED} shown"  # 43 url-safe characters
    assert (
        redact("GET /v1/grants?user=U1&chat=c HTTP/1.1") == f"GET /v1/grants?user={REDACTED}&chat={REDACTED} HTTP/1.1"
    )
    assert redact("nothing to hide here") == "nothing to hide here"
