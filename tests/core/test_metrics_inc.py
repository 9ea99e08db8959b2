"""core/observe/metrics.py `Metrics.inc`: the labelled child looked up once per label set counts
into the same series as `labels().inc()` (issue 34), also when both are used on one counter. No
rule covers the metrics; docs/operating.md names the series."""

from __future__ import annotations

from chat_approvals.core.observe.metrics import Metrics


def _value(m: Metrics, name: str, **labels: str) -> float:
    found = m.registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def test_inc_counts_into_the_series_labels_names() -> None:
    m = Metrics()
    m.inc(m.turns, "http", "answered")
    m.inc(m.turns, "http", "answered")
    m.turns.labels("http", "answered").inc()
    m.inc(m.turns, "slack", "answered")
    m.inc(m.claims, "won")
    assert _value(m, "chat_approvals_turns_total", platform="http", status="answered") == 3
    assert _value(m, "chat_approvals_turns_total", platform="slack", status="answered") == 1
    assert _value(m, "chat_approvals_claims_total", result="won") == 1
    assert _value(m, "chat_approvals_claims_total", result="lost") == 0
    other = Metrics()  # a second server in the process keeps its own counts
    other.inc(other.turns, "http", "answered")
    assert _value(m, "chat_approvals_turns_total", platform="http", status="answered") == 3
