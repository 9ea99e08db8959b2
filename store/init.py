"""`chat-approvals store init`: create the store's tables and bucket, idempotently."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from core.clock import SystemClock
from core.settings import DAY, Settings


def retention_days(settings: Settings) -> int:
    """How long an object must live: the card's life, a resume, then the retention; one day spare."""
    return math.ceil((settings.card_expiry + settings.resume_deadline + settings.retention) / DAY) + 1


def init_store(rows_url: str, objects_url: str, create_bucket: bool, settings: Settings | None = None) -> str:
    """Create what the URLs name when it is missing; say what was done. Safe to run again."""
    settings = settings or Settings()
    done: list[str] = []
    if urlsplit(rows_url).scheme == "dynamodb":
        from store.dynamodb_rows import create_table

        done.append(create_table(rows_url))
    else:
        from store.open import open_rows

        open_rows(rows_url).close()  # the embedded store creates its schema on open
        done.append(f"rows ready at {rows_url}")
    if urlsplit(objects_url).scheme == "s3":
        from store.s3_objects import check_bucket
        from store.s3_objects import create_bucket as make_bucket

        if create_bucket:
            done.append(make_bucket(objects_url, retention_days(settings)))
        else:
            done.append(check_bucket(objects_url))
    else:
        from store.open import open_objects

        open_objects(objects_url, SystemClock())  # creates the folder
        done.append(f"objects ready at {objects_url}")
    return "\n".join(done)
