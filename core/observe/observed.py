"""The store as the server uses it: every call timed and its faults counted by backend and op,
claims counted won or lost, this process's open cards tracked. It only times and counts: the
audit events and their outbox items are built in core/protocol/audit.py.

One generic wrapper over any backend (rows or objects): it restates no store signature, so a
store method added later is timed without a change here. `observe(backend, metrics)` is typed as
the backend it wraps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

from chat_approvals.core.observe.metrics import Metrics

B = TypeVar("B")

_BACKENDS = {
    "SqliteRows": "sqlite",
    "DynamoRows": "dynamodb",
    "FileObjects": "files",
    "S3Objects": "s3",
    "PostgresRows": "postgresql",
    "PostgresObjects": "postgresql",
}
_UNTIMED = frozenset({"atomic", "close"})  # a context manager and the shutdown: not store calls


def backend_name(store: object) -> str:
    name = type(store).__name__
    return _BACKENDS.get(name, name.lower())


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], i: int, name: str) -> Any:
    """A call's argument by name, else by position (the backends take both)."""
    return kwargs[name] if name in kwargs else args[i]


# What a successful call also counts, by op: (metrics, result, args, kwargs).
Count = Callable[[Metrics, Any, tuple[Any, ...], dict[str, Any]], None]


def _card_opened(m: Metrics, ok: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    if ok:  # put_pointer(pointer, now)
        p = _arg(args, kw, 0, "pointer")
        m.open.add(p.card_id, p.expires_at)


def _claimed(m: Metrics, won: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    m.inc(m.claims, "won" if won is not None else "lost")


def _fence_closed(m: Metrics, ok: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    if ok:  # finish(fence, ...)
        m.open.discard(_arg(args, kw, 0, "fence").card_id)


def _replaced(m: Metrics, ok: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    if ok:  # replace(fence, *, new)
        new = kw["new"]
        m.open.discard(_arg(args, kw, 0, "fence").card_id)
        m.open.add(new.card_id, new.expires_at)


def _expired(m: Metrics, ok: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    if ok:  # expire(chat, card_id, now, ...)
        m.open.discard(_arg(args, kw, 1, "card_id"))


def _turn_ended(m: Metrics, ok: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    p = kw.get("pointer")  # end_turn(chat, holder, *, now, pointer=None, ...)
    if ok and p is not None:
        m.open.add(p.card_id, p.expires_at)


COUNTS: dict[str, Count] = {
    "put_pointer": _card_opened,
    "claim": _claimed,
    "claim_grants": _claimed,
    "finish": _fence_closed,
    "replace": _replaced,
    "expire": _expired,
    "end_turn": _turn_ended,
}


class Observed(Generic[B]):
    """`inner` with each public call timed (`store_seconds`), its faults counted (`store_faults`)
    and what COUNTS says counted; anything else (a backend's `local_reads`, a test's reach for
    `client` or `root`) is the inner backend's own."""

    def __init__(self, inner: B, metrics: Metrics) -> None:
        self.inner = inner
        self._m = metrics
        self._backend = backend_name(inner)
        self._hist: dict[str, Any] = {}  # op -> its labelled histogram (labels() is the costly part)

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy, an unpickle): no recursion
            raise AttributeError(name)
        attr = getattr(self.inner, name)
        if name.startswith("_") or name in _UNTIMED or not callable(attr):
            return attr
        timed = self._timer(name)
        self.__dict__[name] = timed  # the next call skips __getattr__
        return timed

    def _timer(self, op: str) -> Callable[..., Any]:
        count = COUNTS.get(op)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                # looked up per call: the inner method may be replaced (a test's fault)
                result = getattr(self.inner, op)(*args, **kwargs)
            except Exception:
                self._m.store_faults.labels(self._backend, op).inc()
                raise
            finally:
                hist = self._hist.get(op)
                if hist is None:
                    hist = self._hist[op] = self._m.store_seconds.labels(self._backend, op)
                hist.observe(time.perf_counter() - start)
            if count is not None:
                count(self._m, result, args, kwargs)
            return result

        return timed


def observe(backend: B, metrics: Metrics) -> B:
    """`backend` timed and counted, typed as itself (the wrapper answers every call it does)."""
    return cast(B, Observed(backend, metrics))
