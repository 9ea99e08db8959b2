"""Log output: plain text (the default) or one JSON object per line (`--log-format json`).

Either way every line is redacted as it is written: bearer tokens, Slack tokens, anything
shaped like a card secret, the values of a query string (`?user=[redacted]`), and every
configured secret value (API tokens, webhook and Slack signing secrets) never reach the log,
whatever a message or an exception happened to hold.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from aiohttp.web_log import AccessLogger, KeyMethod
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse
from pythonjsonlogger.json import JsonFormatter

REDACTED = "[redacted]"

# Each pattern with what it cannot match without, looked for in the lowered line (a line lacking
# it is left as it is, unsearched); None: always searched.
_PATTERNS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"(?i)(bearer\s+)[^\s\"',;]+"), "bearer"),
    (re.compile(r"xox[abposre]-[A-Za-z0-9-]+"), "xox"),  # Slack bot/user/app tokens
    (re.compile(r"xapp-[A-Za-z0-9-]+"), "xapp-"),
    # a card secret is token_urlsafe(32): 43 url-safe characters, standing alone
    (re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])"), None),
    # a query string's values (the access log's `?user=` ids of the grants routes): the names stay
    (re.compile(r"([?&][^=\s&#\"'?]{1,64}=)[^&\s#\"']+"), "="),
]

_HANDLER = "chat_approvals"
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# The start-up banner a person reads: on stdout, bare lines in text format (no timestamp or level),
# one JSON object per line like every other line with --log-format json.
BANNER = "chat_approvals.banner"
LEVELS = ("debug", "info", "warning", "error")


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Short values would redact ordinary words; a configured secret is never that short.
        self.secrets = sorted({s for s in secrets if len(s) >= 8}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self.secrets:
            text = text.replace(s, REDACTED)
        lowered = text.lower()  # a literal in the line is in its lowered form too
        for p, needs in _PATTERNS:
            if needs is None or needs in lowered:
                text = p.sub(_redacted, text)
        return text


def _redacted(m: re.Match[str]) -> str:
    return (m.group(1) if m.re.groups else "") + REDACTED


class SecondStamp:
    """`time.strftime(fmt, converter(second))` for whole seconds, made once a second and reused:
    a log line's time changes once a second, and formatting it was a fair part of each line's cost.
    Only the last second is kept, so a different second (or format) is always made afresh."""

    def __init__(self, converter: Any = time.localtime) -> None:
        self.converter = converter
        self._key: tuple[int, str] | None = None
        self._text = ""

    def __call__(self, second: int, fmt: str) -> str:
        key = (second, fmt)
        if key != self._key:
            self._text, self._key = time.strftime(fmt, self.converter(second)), key
        return self._text


def _format_time(
    formatter: logging.Formatter, stamp: SecondStamp, record: logging.LogRecord, datefmt: str | None
) -> str:
    """`logging.Formatter.formatTime`, the same text, its strftime made once a second (SecondStamp)."""
    second = math.floor(record.created)  # as localtime() and gmtime() take a float
    if datefmt:
        return stamp(second, datefmt)
    text = stamp(second, formatter.default_time_format)
    return formatter.default_msec_format % (text, record.msecs) if formatter.default_msec_format else text


class RedactingFormatter(logging.Formatter):
    def __init__(self, redact: Redactor, fmt: str = PLAIN_FORMAT) -> None:
        super().__init__(fmt)
        self.redact = redact
        self._stamp = SecondStamp(self.converter)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _format_time(self, self._stamp, record, datefmt)

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    """time, level, logger, message, and `chat`, `card_id`, `outcome`, `platform` (and any other
    `extra=`) where the call site knows them."""

    def __init__(self, redact: Redactor) -> None:
        super().__init__(
            ["asctime", "levelname", "name", "message"],
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            datefmt="%Y-%m-%dT%H:%M:%S%z",
        )
        self.redact = redact
        self._stamp = SecondStamp(self.converter)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return _format_time(self, self._stamp, record, datefmt)

    def add_fields(self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in [k for k, v in log_data.items() if v is None]:  # "where known": no nulls
            del log_data[key]

    def format(self, record: logging.LogRecord) -> str:
        return self.redact(super().format(record))


def setup_logging(fmt: str = "text", secrets: Iterable[str] = (), level: int | str = logging.INFO) -> None:
    """Configure the root logger once, for the CLI and the server (stderr), and the banner logger
    (stdout). Python's warnings go through logging too, so JSON output stays one object a line."""
    if fmt not in ("text", "json"):
        raise ValueError(f"--log-format must be text or json, not {fmt!r}")
    if isinstance(level, str):
        if level.lower() not in LEVELS:
            raise ValueError(f"--log-level must be one of {', '.join(LEVELS)}, not {level!r}")
        level = logging.getLevelName(level.upper())
    redact = Redactor(secrets)
    handler = logging.StreamHandler()
    handler.setFormatter(RedactingJsonFormatter(redact) if fmt == "json" else RedactingFormatter(redact))
    _install(logging.getLogger(), handler)
    logging.getLogger().setLevel(level)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(RedactingJsonFormatter(redact) if fmt == "json" else RedactingFormatter(redact, "%(message)s"))
    banner = logging.getLogger(BANNER)
    _install(banner, out)
    banner.propagate = False  # written once, on stdout
    banner.setLevel(logging.INFO)
    logging.captureWarnings(True)
    # Neither format shows where a line was logged from, nor its thread or process: logging then
    # need not find out for every record (the logging HOWTO's "Optimization": the caller's frame,
    # looked up through sys._getframe, was the dearest part of making a record).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False


def _install(logger: logging.Logger, handler: logging.Handler) -> None:
    handler.set_name(_HANDLER)
    for h in [h for h in logger.handlers if h.get_name() == _HANDLER]:  # ours from an earlier call only
        logger.removeHandler(h)
    logger.addHandler(handler)


_held: list[str] | None = None


def say(line: str) -> None:
    """One line of the start-up banner (stdout; a JSON object with --log-format json)."""
    if _held is not None:
        _held.append(line)
    else:
        logging.getLogger(BANNER).info(line)


@contextlib.contextmanager
def holding() -> Iterator[list[str]]:
    """Banner lines said inside are kept, not written: serve builds the app (its front ends say
    what they are) before it knows it can start, and writes them under its own header after."""
    global _held
    _held = []
    try:
        yield _held
    finally:
        _held = None


_ACCESS_TIME = "[%d/%b/%Y:%H:%M:%S %z]"  # aiohttp's `%t`


class AccessLog(AccessLogger):
    """aiohttp's access log (`web.run_app(access_log_class=...)`): the same line and the same
    fields, its `%t` (when the request started, to the second, in local time) made once a second."""

    def __init__(self, logger: logging.Logger, log_format: str = AccessLogger.LOG_FORMAT) -> None:
        super().__init__(logger, log_format)
        stamp = SecondStamp(time.localtime)  # its tm_gmtoff gives %z, as aiohttp's own offset does

        def start_time(request: BaseRequest, response: StreamResponse, taken: float) -> str:
            return stamp(math.floor(time.time() - taken), _ACCESS_TIME)

        self._methods = [
            KeyMethod(k, start_time) if m is AccessLogger._format_t else KeyMethod(k, m) for k, m in self._methods
        ]
