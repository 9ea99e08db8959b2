"""The server's Prometheus metrics, in a registry of its own (never the global default), so one
process can hold several servers (tests do) and each exposes only its own.

Labels are bounded enumerations only: platform, status, outcome, kind, result, decision,
backend, op. Never a user id, a chat key, a card id or a secret.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

# Resumes run an agent (seconds to minutes); store calls and acks are milliseconds.
_RESUME_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
_FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

EXPIRING_WITHIN = 300.0  # an open card this close to its expiry counts as expiring


class OpenCards:
    """The cards this process created and has not seen answered or expired (its own view:
    another replica's clicks are not seen here; a card past its expiry stops counting)."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._cards: dict[str, float] = {}
        self._lock = threading.Lock()

    def add(self, card_id: str, expires_at: float) -> None:
        with self._lock:
            self._cards[card_id] = expires_at

    def discard(self, card_id: str) -> None:
        with self._lock:
            self._cards.pop(card_id, None)

    def _live(self) -> list[float]:
        now = self._now()
        with self._lock:
            for card_id in [c for c, at in self._cards.items() if at <= now]:
                del self._cards[card_id]
            return [at - now for at in self._cards.values()]

    def count(self) -> float:
        return float(len(self._live()))

    def expiring(self) -> float:
        return float(sum(1 for left in self._live() if left <= EXPIRING_WITHIN))


class Metrics:
    def __init__(self, now: Callable[[], float] = time.time) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        p = "chat_approvals_"
        self.turns = Counter(p + "turns", "Turns by front end and how they ended", ["platform", "status"], registry=r)
        self.cards = Counter(
            p + "cards", "Cards offered, by kind: new, chained (a resumed turn asked again), reoffered",
            ["platform", "kind"], registry=r,
        )  # fmt: skip
        self.resumes = Counter(p + "resumes", "Clicks by front end and outcome", ["platform", "outcome"], registry=r)
        self.claims = Counter(p + "claims", "Claim writes (R10): won or lost", ["result"], registry=r)
        self.resume_seconds = Histogram(
            p + "resume_seconds", "Time of one resume call, click to result", buckets=_RESUME_BUCKETS, registry=r
        )
        self.ack_seconds = Histogram(
            p + "ack_seconds", "Click to acknowledgement, per front end", ["platform"], buckets=_FAST_BUCKETS,
            registry=r,
        )  # fmt: skip
        # bots/admission.py: clicks waiting for a resume worker, running, refused because the queue was full
        self.resume_queue_depth = Gauge(p + "resume_queue_depth", "Clicks waiting for a resume worker", registry=r)
        self.resume_queue_running = Gauge(p + "resume_queue_running", "Resumes running now (admitted)", registry=r)
        self.resume_queue_refused = Counter(
            p + "resume_queue_refused", "Clicks refused because the resume queue was full", ["platform"], registry=r
        )
        self.gate = Counter(p + "gate_connections", "Egress gate decisions", ["decision"], registry=r)
        self.store_seconds = Histogram(
            p + "store_seconds", "Store calls", ["backend", "op"], buckets=_FAST_BUCKETS, registry=r
        )
        self.store_faults = Counter(p + "store_faults", "Store calls that raised", ["backend", "op"], registry=r)
        self.webhook_deliveries = Counter(
            p + "audit_webhook_deliveries", "Audit webhook POSTs by result: delivered or failed", ["result"],
            registry=r,
        )  # fmt: skip
        self.webhook_lag = Gauge(
            p + "audit_webhook_oldest_seconds", "Age of the oldest undelivered event this process saw", registry=r
        )
        self.open = OpenCards(now)
        Gauge(p + "open_cards", "Open cards, from this process's view", registry=r).set_function(self.open.count)
        Gauge(
            p + "open_cards_expiring", f"Open cards within {int(EXPIRING_WITHIN)} s of their expiry", registry=r
        ).set_function(self.open.expiring)
        # Pre-create the label sets that matter for alerts, so a rate() has a zero to start from.
        for result in ("won", "lost"):
            self.claims.labels(result)
        for decision in ("allowed", "refused"):
            self.gate.labels(decision)
        for result in ("delivered", "failed"):
            self.webhook_deliveries.labels(result)
        self._children: dict[tuple[Counter, tuple[str, ...]], Counter] = {}

    def inc(self, counter: Counter, *labels: str) -> None:
        """`counter.labels(*labels).inc()`, with the labelled child looked up once per label set:
        `labels()` takes a lock and checks every value each time, about 0.8 us of a 1.2 us count
        (issue 34: three or four counts a cycle). The label values are bounded enumerations."""
        key = (counter, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = counter.labels(*labels)
        child.inc()

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
