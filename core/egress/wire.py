"""The little HTTP/1.1 the gate speaks: read a request or response head, write a short response,
copy bytes. Bodies are never parsed; the gate only needs heads to decide."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

MAX_HEAD = 64 * 1024
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


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """None on a clean EOF before any byte; WireError on anything malformed."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial:
            return None
        raise WireError(400, "incomplete request head") from e
    except asyncio.LimitOverrunError as e:
        raise WireError(431, "request head too large") from e
    if len(raw) > MAX_HEAD:
        raise WireError(431, "request head too large")
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) != 3:
        raise WireError(400, "malformed first line")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise WireError(400, "malformed header line")
        headers.append((name, value.strip()))
    return Head((parts[0], parts[1], parts[2]), headers)


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
