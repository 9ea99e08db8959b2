"""Moto in server mode with every request handled under one lock.

Moto's DynamoDB evaluates a condition and applies the write without a lock, so under concurrent
requests two conditional writes can both pass (observed: 3 double winners in 250 claim races).
Serialising requests makes its conditional writes atomic, as DynamoDB's are.
Usage: python scripts/moto_locked.py HOST PORT
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

_app = DomainDispatcherApplication(create_backend_app)
_lock = threading.Lock()


def locked_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    with _lock:
        return list(_app(environ, start_response))  # the whole body is produced under the lock


if __name__ == "__main__":
    run_simple(sys.argv[1], int(sys.argv[2]), locked_app, threaded=True, request_handler=MotoRequestHandler)
