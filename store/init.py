"""`chat-approvals store init`: create the store's tables and bucket, idempotently."""

from __future__ import annotations

from urllib.parse import urlsplit

from chat_approvals.core.models import SystemClock


def init_store(rows_url: str, objects_url: str, create_bucket: bool, retention_days: int) -> str:
    """Create what the URLs name when it is missing; say what was done. Safe to run again.
    `retention_days`: how long the bucket keeps objects (`core.settings.retention_days`)."""
    done: list[str] = []
    if urlsplit(rows_url).scheme == "dynamodb":
        from chat_approvals.store.dynamodb_rows import create_table

        done.append(create_table(rows_url))
    elif urlsplit(rows_url).scheme in ("postgresql", "postgres"):
        from chat_approvals.store.postgres_init import init_postgres

        done.append(init_postgres(rows_url))
    else:
        from chat_approvals.store.open import open_rows

        open_rows(rows_url).close()  # the embedded store creates its schema on open
        done.append(f"rows ready at {rows_url}")
    if urlsplit(objects_url).scheme in ("postgresql", "postgres"):
        if objects_url != rows_url:
            from chat_approvals.store.postgres_init import init_postgres

            done.append(init_postgres(objects_url))
        else:
            done.append("objects in the same database (table objects)")
    elif urlsplit(objects_url).scheme == "s3":
        from chat_approvals.store.s3_objects import check_bucket
        from chat_approvals.store.s3_objects import create_bucket as make_bucket

        if create_bucket:
            done.append(make_bucket(objects_url, retention_days))
        else:
            done.append(check_bucket(objects_url))
    else:
        from chat_approvals.store.open import open_objects

        open_objects(objects_url, SystemClock())  # creates the folder
        done.append(f"objects ready at {objects_url}")
    return "\n".join(done)
