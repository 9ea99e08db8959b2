"""The little HTTP/1.1 the gate speaks: read a request or response head, write a short response,
copy bytes. A request's body is framed (Content-Length or chunked) so that exactly one request
goes on per connection; response bodies are copied as they come."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Literal

MAX_HEAD = 64 * 1024  # the gate's own StreamReader limit (GateConfig.head_limit) is lower still
CHUNK = 64 * 1024  # the StreamReader's default 64 KiB limit bounds each connection's buffer

# RFC 9110 7.6.1 connection-specific fields, plus the proxy's own. Transfer-Encoding stays:
# bodies are copied as they are, framing included.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "proxy-authenticate",
        "te",
        "trailer",
        "upgrade",
    }
)


class WireError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Head:
    """A request line (method, target, version) or status line (version, status, reason) plus headers."""

    first: tuple[str, str, str]
    headers: list[tuple[str, str]]

    def get(self, name: str) -> str | None:
        n = name.lower()
        for k, v in self.headers:
            if k.lower() == n:
                return v
        return None

    def without_hop_by_hop(self) -> list[tuple[str, str]]:
        listed = {t.strip().lower() for k, v in self.headers if k.lower() == "connection" for t in v.split(",")}
        return [(k, v) for k, v in self.headers if k.lower() not in HOP_BY_HOP and k.lower() not in listed]


_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


async def read_head(reader: asyncio.StreamReader, *, strict: bool = True, prefix: bytes = b"") -> Head | None:
    """None on a clean EOF before any byte; WireError on anything malformed. `strict` (every
    request from a script) refuses what lets one request read as two to the next parser: a bare CR
    or LF, a folded line, a header name that is not a token, a control byte in a value."""
    try:
        raw = prefix + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial and not prefix:
            return None
        raise WireError(400, "incomplete request head") from e
    except asyncio.LimitOverrunError as e:
        raise WireError(431, "request head too large") from e
    if len(raw) > MAX_HEAD:
        raise WireError(431, "request head too large")
    lines = raw[:-4].decode("latin-1").split("\r\n")
    if strict and any("\r" in line or "\n" in line or "\0" in line for line in lines):
        raise WireError(400, "bare CR, LF or NUL in the request head")
    parts = lines[0].split(" ", 2)
    if len(parts) != 3 or (strict and (not parts[0] or not set(parts[0]) <= _TOKEN or " " in parts[2])):
        raise WireError(400, "malformed first line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or (strict and not set(name) <= _TOKEN):
            raise WireError(400, "malformed header line")
        if strict and any((ord(ch) < 32 and ch != "\t") or ord(ch) == 127 for ch in value):
            raise WireError(400, "control character in a header value")
        headers.append((name, value.strip()))
    return Head((parts[0], parts[1], parts[2]), headers)


Framing = int | Literal["chunked"]  # a Content-Length, or chunked


def request_framing(head: Head) -> Framing:
    """How long the request's body is, refusing every ambiguity a smuggled second request hides
    in (RFC 9112 6.3): both Content-Length and Transfer-Encoding, two lengths, a coding other than
    chunked, a second Host."""
    names = [k.lower() for k, _ in head.headers]
    if names.count("host") > 1:
        raise WireError(400, "more than one Host header")
    te = [v for k, v in head.headers if k.lower() == "transfer-encoding"]
    cl = [v for k, v in head.headers if k.lower() == "content-length"]
    if te and cl:
        raise WireError(400, "both Content-Length and Transfer-Encoding")
    if te:
        if len(te) != 1 or te[0].strip().lower() != "chunked":
            raise WireError(400, "only Transfer-Encoding: chunked is accepted")
        return "chunked"
    if len(cl) > 1:
        raise WireError(400, "more than one Content-Length")
    if cl:
        if not cl[0].isdigit() or not cl[0].isascii() or len(cl[0]) > 15:
            raise WireError(400, "malformed Content-Length")
        return int(cl[0])
    return 0


async def copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, framing: Framing, idle: float) -> None:
    """Copy exactly one request's body and not a byte more: whatever follows (a pipelined second
    request) is never sent on. A chunked body is re-framed from the parsed chunks."""

    async def exactly(n: int) -> None:
        while n > 0:
            data = await asyncio.wait_for(reader.read(min(n, CHUNK)), idle)
            if not data:
                raise WireError(400, "request body ended early")
            writer.write(data)
            await writer.drain()
            n -= len(data)

    if framing != "chunked":
        await exactly(framing)
        return
    while True:
        line = await asyncio.wait_for(reader.readuntil(b"\r\n"), idle)
        size_s = line[:-2].split(b";", 1)[0]
        if not size_s or len(size_s) > 15 or not all(c in b"0123456789abcdefABCDEF" for c in size_s):
            raise WireError(400, "malformed chunk size")
        size = int(size_s, 16)
        writer.write(b"%x\r\n" % size)
        if size == 0:
            while (await asyncio.wait_for(reader.readuntil(b"\r\n"), idle)) != b"\r\n":
                pass  # trailers are dropped
            writer.write(b"\r\n")
            await writer.drain()
            return
        await exactly(size)
        if await asyncio.wait_for(reader.readexactly(2), idle) != b"\r\n":
            raise WireError(400, "malformed chunk")
        writer.write(b"\r\n")


def encode_head(first: str, headers: list[tuple[str, str]]) -> bytes:
    return (first + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode("latin-1")


async def respond(
    writer: asyncio.StreamWriter,
    status: int,
    reason: str,
    body: bytes | str = b"",
    *,
    content_type: str = "text/plain; charset=utf-8",
    extra: list[tuple[str, str]] | None = None,
) -> None:
    data = body.encode("utf-8") if isinstance(body, str) else body
    headers = [("Content-Type", content_type), ("Content-Length", str(len(data))), ("Connection", "close")]
    writer.write(encode_head(f"HTTP/1.1 {status} {reason}", headers + (extra or [])) + data)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, idle: float) -> int:
    """Copy until EOF (then half-close the far side) or until `idle` seconds pass without a byte."""
    total = 0
    try:
        while True:
            data = await asyncio.wait_for(reader.read(CHUNK), idle)
            if not data:
                break
            total += len(data)
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
            return total
    except (ConnectionError, TimeoutError, OSError):
        pass
    writer.close()  # a reset or a stall on one side ends the other, or it would wait for ever
    return total


async def close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
        await asyncio.wait_for(writer.wait_closed(), 5)
