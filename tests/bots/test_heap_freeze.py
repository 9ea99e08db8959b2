"""Issue 12 (load): once the server has started, its start-up heap is frozen (bots/server.py), so a
full collection no longer walks every object the imports made (about 80 ms on the event loop, which
held up every ack behind it in a burst). Garbage made before then is freed, not frozen."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from chat_approvals.bots.server import freeze_heap_at_startup


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()  # this test process's heap, as it was: the test must not keep it frozen
    yield
    gc.unfreeze()


async def test_the_heap_is_frozen_once_started_and_startup_garbage_is_freed_first(thawed: None) -> None:
    app = web.Application()
    started: list[int] = []

    async def before_freeze(_: web.Application) -> None:
        started.append(gc.get_freeze_count())

    app.on_startup.append(before_freeze)  # a start-up step registered first runs before the freeze
    freeze_heap_at_startup(app)
    garbage = Node()
    gone = weakref.ref(garbage)
    del garbage
    server = TestServer(app)
    await server.start_server()
    try:
        assert started == [0]  # nothing frozen until the app's own start-up is done
        assert gc.get_freeze_count() > 10_000  # the imports' objects (pytest's, aiohttp's, ours)
        assert gone() is None  # collected before the freeze, not kept in the permanent generation
    finally:
        await server.close()
