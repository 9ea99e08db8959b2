"""A burst of clicks, each on a connection of its own, is held by the kernel until the server
accepts it (bots/cli.py, LISTEN_BACKLOG): at 128, connection 130 of a burst waited a second for the
client's retry (issue 34's 1,000-click burst)."""

from __future__ import annotations

import contextlib
import socket

from chat_approvals.bots.cli import bind

BURST = 600  # connections at once, none accepted yet


def test_the_listening_socket_holds_a_burst_of_connections_before_any_is_accepted() -> None:
    listener = bind("127.0.0.1", 0)
    port = listener.getsockname()[1]
    clients: list[socket.socket] = []
    try:
        for _ in range(BURST):
            c = socket.socket()
            clients.append(c)
            c.settimeout(0.5)  # a connection past the queue waits ~1 s for its retry: this fails
            c.connect(("127.0.0.1", port))
    finally:
        for c in clients:
            c.close()
        with contextlib.suppress(OSError):
            listener.close()
    assert len(clients) == BURST
