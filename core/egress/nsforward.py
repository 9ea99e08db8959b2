"""First process inside the sandbox's fresh network (and PID) namespace. Standard library only:
it is run by file path, before anything of the project is importable.

The namespace has nothing but a loopback interface, so there is no route anywhere. This
process brings `lo` up, listens on 127.0.0.1:PORT inside the namespace and copies every
connection to the gate's unix socket (a filesystem socket is reachable across network
namespaces; an IP address is not). Then it runs the child with no capabilities, so even a
root child cannot add interfaces or join another namespace, and exits with the child's code.
As PID 1 of the namespace, its exit makes the kernel kill whatever the child left behind.

usage: nsforward.py UNIX_SOCKET PORT -- ARGV...
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import os
import socket
import struct
import sys

SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38


def lo_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
        flags = struct.unpack("16sH14s", fcntl.ioctl(s, SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14s", b"lo", flags | IFF_UP, b"\0" * 14))


def drop_privileges() -> None:
    """Runs in the child between fork and exec: empty bounding set, no new privileges."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last cap: ignored
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        os._exit(126)


async def _pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
        if w.can_write_eof():
            w.write_eof()  # pass the half-close on
            return
    except (ConnectionError, OSError):
        pass
    w.close()  # an error on one side ends the other too, or it would wait for ever


async def main(unix_path: str, port: int, argv: list[str]) -> int:
    lo_up()

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_unix_connection(unix_path)
        except OSError:
            w.close()
            return
        try:
            await asyncio.gather(_pipe(r, uw), _pipe(ur, w))
        finally:
            for x in (w, uw):
                with contextlib.suppress(Exception):
                    x.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        proc = await asyncio.create_subprocess_exec(*argv, preexec_fn=drop_privileges)
        return await proc.wait()


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 4 or args[2] != "--":
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    rc = asyncio.run(main(args[0], int(args[1]), args[3:]))
    sys.exit(128 - rc if rc < 0 else rc)
