"""Runs blocking store calls off the event loop (never block aiohttp on SQLite or boto3)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from store.base import ObjectStore, RowStore

P = ParamSpec("P")
T = TypeVar("T")


class StoreIO:
    """The rows, the objects, and the executor their calls run on."""

    def __init__(self, rows: RowStore, objects: ObjectStore, workers: int = 4) -> None:
        self.rows = rows
        self.objects = objects
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="store")

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.rows.close()
