"""One HTTP/1.1 request as raw bytes over a socket: for what no well-behaved client will send
(non-UTF-8 header values, paths with NUL), so the server's handling of it can be tested."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


async def raw_request(
    base: str, method: str, target: bytes, *, headers: dict[bytes, bytes] | None = None, body: bytes = b""
) -> tuple[int, bytes]:
    """Send one request to `base` (http://127.0.0.1:PORT) and return (status, body)."""
    url = urlsplit(base)
    assert url.hostname == "127.0.0.1" and url.port, "loopback only"
    head = [method.encode() + b" " + target + b" HTTP/1.1", b"Host: 127.0.0.1", b"Connection: close"]
    for name, value in (headers or {}).items():
        head.append(name + b": " + value)
    head.append(b"Content-Length: " + str(len(body)).encode())
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        await writer.drain()
        async with asyncio.timeout(30):
            data = await reader.read()
    finally:
        writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    _, _, payload = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), payload
