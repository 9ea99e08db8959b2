"""What the DynamoDB and S3 backends share: their URLs, their boto3 clients, their retry loop.

boto3's own retries are turned off (one attempt per call) and this module retries instead, so
that every store method sees each attempt: a write whose response was lost and that is sent
again must be recognised by the caller as its own earlier win (see `op nonce` in
dynamodb_rows.py), and tests can inject throttling and count the attempts.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from chat_approvals.store.base import StoreError

T = TypeVar("T")

# Faults worth another attempt: throttling, server-side 5xx, and the transport.
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "SlowDown",
        "InternalServerError",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
        "TransactionConflictException",
        "ConditionalRequestConflict",  # S3: a concurrent conditional PUT on the same key is in flight
    }
)

_OPTIONS = {"region", "endpoint_url", "max_attempts", "backoff_base"}
# s3:// only: small objects as items in this DynamoDB table (store/table_objects.py)
_S3_OPTIONS = {"table", "inline_max", "retention_days"}


@dataclass(frozen=True)
class AwsTarget:
    """A parsed `dynamodb://TABLE?...` or `s3://BUCKET/prefix?...`."""

    scheme: str
    name: str
    path: str
    region: str | None
    endpoint_url: str | None
    max_attempts: int = 8
    backoff_base: float = 0.02
    table: str | None = None  # s3:// only: small objects in this DynamoDB table
    inline_max: int | None = None
    retention_days: float | None = None


def parse_target(url: str, scheme: str) -> AwsTarget:
    parts = urlsplit(url)
    if parts.scheme != scheme or not parts.netloc:
        raise ValueError(f"bad {scheme} URL {url!r}: expected {scheme}://NAME[/prefix]?region=R[&endpoint_url=URL]")
    query = parse_qs(parts.query, keep_blank_values=False, strict_parsing=False)
    allowed = _OPTIONS | (_S3_OPTIONS if scheme == "s3" else set())
    unknown = set(query) - allowed
    if unknown:
        raise ValueError(f"bad {scheme} URL {url!r}: unknown option(s) {sorted(unknown)}; allowed {sorted(allowed)}")

    def one(key: str) -> str | None:
        vals = query.get(key)
        return vals[-1] if vals else None

    attempts = int(one("max_attempts") or 8)
    if attempts < 1:
        raise ValueError(f"bad {scheme} URL {url!r}: max_attempts must be >= 1")
    return AwsTarget(
        scheme=scheme,
        name=parts.netloc,
        path=parts.path.strip("/"),
        region=one("region"),  # None: boto3's standard chain (AWS_REGION, profile, ...)
        endpoint_url=one("endpoint_url"),
        max_attempts=attempts,
        backoff_base=float(one("backoff_base") or 0.02),
        table=one("table"),
        inline_max=int(v) if (v := one("inline_max")) is not None else None,
        retention_days=float(v) if (v := one("retention_days")) is not None else None,
    )


_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


def make_client(service: str, target: AwsTarget, **config: Any) -> Any:
    """A client from one shared session (its loaded service models are reused; creating clients
    from a session is not thread-safe, hence the lock; the clients themselves are)."""
    global _SESSION
    import boto3

    cfg = Config(
        retries={"total_max_attempts": 1, "mode": "standard"},  # retried by `call_with_retries`
        connect_timeout=3,
        read_timeout=10,
        max_pool_connections=64,
        **config,
    )
    with _SESSION_LOCK:
        if _SESSION is None:
            _SESSION = boto3.session.Session()
        return _SESSION.client(service, region_name=target.region, endpoint_url=target.endpoint_url, config=cfg)


def error_code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def is_retryable(e: Exception) -> bool:
    if isinstance(e, (BotoConnectionError, HTTPClientError)):
        return True
    if isinstance(e, ClientError):
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        return error_code(e) in RETRYABLE_CODES or status >= 500
    return False


def call_with_retries(target: AwsTarget, what: str, fn: Callable[[], T]) -> T:
    """Run `fn`; retry throttling and transient faults with full-jitter exponential backoff.

    A fault that outlasts the attempts becomes StoreError. Any other ClientError (a failed
    condition, a validation error) is the caller's to handle and is raised at once.
    """
    for attempt in range(target.max_attempts):
        try:
            return fn()
        except Exception as e:
            if not is_retryable(e):
                raise
            if attempt + 1 == target.max_attempts:
                raise StoreError(f"{target.scheme} {what}: gave up after {target.max_attempts} attempts: {e}") from e
            time.sleep(random.uniform(0, min(1.0, target.backoff_base * 2**attempt)))
    raise AssertionError("unreachable")
