"""Counts a PostgreSQL client's round trips from libpq's own protocol trace.

A round trip is a message after which the client waits for the server: a Sync (the end of an
extended-protocol statement, or of a pipeline) or a simple Query (one or several statements in
one message). Pass `RoundTrips().configure` as a pool's `configure` (PostgresRows(configure=...)):
every connection the pool opens is traced to a file of its own.
"""

from __future__ import annotations

import re
import tempfile
from typing import IO, Any

from psycopg import pq

_WAITS = re.compile(r"^F\t\d+\t(Sync|Query)\b", re.MULTILINE)


class RoundTrips:
    def __init__(self) -> None:
        self._files: list[IO[str]] = []
        self._base = 0

    def configure(self, conn: Any) -> None:
        f = tempfile.TemporaryFile("w+")  # noqa: SIM115 - open while the connection lives
        conn.pgconn.trace(f.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        self._files.append(f)

    def _total(self) -> int:
        n = 0
        for f in self._files:
            f.seek(0)
            n += len(_WAITS.findall(f.read()))
        return n

    def count(self) -> int:
        """Round trips since the last reset."""
        return self._total() - self._base

    def reset(self) -> None:
        self._base = self._total()
