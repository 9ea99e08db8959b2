"""The multi-replica object store: write-once, checksummed S3 objects.

Every object lives under `<prefix>/` (default `chat-approvals/`), so one bucket lifecycle rule
on that prefix gives them the store's retention (deploy/cloudformation.yaml, `store init`);
`sweep` does the same on demand.

A PUT is `put_object(ChecksumAlgorithm=SHA256, ChecksumSHA256=..., IfNoneMatch="*")`: S3 checks
the digest server-side and refuses to overwrite an existing key (412 -> ObjectExists). The
digest S3 echoes must be ours before the write counts as confirmed (R7). The hex digest, the
writer's clock time and a per-call nonce ride along as metadata: a read re-hashes the bytes
against it (and against the caller's ObjectRef), and a PUT that was retried after a lost
response recognises its own earlier write by the nonce instead of reporting ObjectExists.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any

from botocore.exceptions import ClientError, FlexibleChecksumError

from chat_approvals.core.models import Clock, ObjectRef, SystemClock
from chat_approvals.store.aws import AwsTarget, call_with_retries, error_code, make_client, parse_target
from chat_approvals.store.base import CorruptObject, ObjectExists, ObjectStore, StoreError, verified

DEFAULT_PREFIX = "chat-approvals"
_MISSING = ("NoSuchKey", "404", "NotFound")


def _b64_sha256(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


class S3Objects(ObjectStore):
    def __init__(self, target: AwsTarget, clock: Clock | None = None, client: Any | None = None) -> None:
        self.target = target
        self.bucket = target.name
        self.prefix = (target.path or DEFAULT_PREFIX).strip("/") + "/"
        self.clock = clock or SystemClock()
        self.client = client if client is not None else make_client("s3", target, s3={"addressing_style": "path"})

    def _full(self, key: str) -> str:
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in key.split("/")):
            raise ValueError(f"bad object key: {key!r}")
        return self.prefix + key

    def _call(self, what: str, fn: Any, **kwargs: Any) -> dict[str, Any]:
        """One API call with retries. Misses and failed preconditions are the caller's to read;
        any other error is a StoreError."""
        try:
            result: dict[str, Any] = call_with_retries(self.target, f"{what} s3://{self.bucket}", lambda: fn(**kwargs))
        except ClientError as e:
            if error_code(e) in (*_MISSING, "PreconditionFailed", "412"):
                raise
            raise StoreError(f"s3 {what} s3://{self.bucket}: {error_code(e)}: {e}") from e
        return result

    def put(self, key: str, data: bytes) -> ObjectRef:
        full = self._full(key)
        hexdigest = hashlib.sha256(data).hexdigest()
        b64 = _b64_sha256(data)
        nonce = secrets.token_hex(8)
        meta = {"sha256": hexdigest, "written-at": repr(float(self.clock.now())), "op": nonce}
        try:
            r = self._call(
                "PUT",
                self.client.put_object,
                Bucket=self.bucket,
                Key=full,
                Body=data,
                ChecksumAlgorithm="SHA256",
                ChecksumSHA256=b64,
                IfNoneMatch="*",
                Metadata=meta,
            )
        except ClientError as e:
            if error_code(e) not in ("PreconditionFailed", "412"):
                raise StoreError(f"s3 PUT {full}: {e}") from e
            head = self._head(full)
            if head is None or head.get("Metadata", {}).get("op") != nonce:
                raise ObjectExists(key) from e
            r = head  # our own earlier attempt landed; its response was lost
        echoed = r.get("ChecksumSHA256")
        if echoed is None:  # not echoed by this endpoint: ask for it explicitly
            head = self._head(full)
            echoed = None if head is None else head.get("ChecksumSHA256")
        if echoed is not None and echoed != b64:
            raise CorruptObject(f"s3 stored {full} with checksum {echoed}, expected {b64}")
        return ObjectRef(key=key, size=len(data), sha256=hexdigest)

    def _head(self, full: str) -> dict[str, Any] | None:
        try:
            return self._call("HEAD", self.client.head_object, Bucket=self.bucket, Key=full, ChecksumMode="ENABLED")
        except ClientError as e:
            if error_code(e) in _MISSING:
                return None
            raise StoreError(f"s3 HEAD {full}: {e}") from e

    def _read_verified(self, key: str, expected: str | None) -> bytes | None:
        full = self._full(key)

        def read() -> tuple[bytes, dict[str, str]]:
            r = self.client.get_object(Bucket=self.bucket, Key=full, ChecksumMode="ENABLED")
            return r["Body"].read(), r.get("Metadata", {})

        try:
            data, meta = call_with_retries(self.target, f"GET s3://{self.bucket}", read)
        except FlexibleChecksumError as e:  # botocore checked S3's own checksum and it failed
            raise CorruptObject(f"checksum mismatch for {key}: {e}") from e
        except ClientError as e:
            if error_code(e) in _MISSING:
                return None
            raise StoreError(f"s3 GET {full}: {e}") from e
        return verified(key, data, meta.get("sha256"), expected)

    def get(self, ref: ObjectRef) -> bytes:
        data = self._read_verified(ref.key, ref.sha256)
        if data is None:
            raise KeyError(ref.key)
        return data

    def get_key(self, key: str) -> bytes | None:
        return self._read_verified(key, None)

    def sweep(self, older_than: float) -> int:
        """Delete objects whose writer's clock said they were written before `older_than`
        (the bucket's lifecycle rule does the same by S3's own clock)."""
        removed = 0
        token: str | None = None
        while True:
            page = self._call(
                "LIST",
                self.client.list_objects_v2,
                Bucket=self.bucket,
                Prefix=self.prefix,
                **({"ContinuationToken": token} if token else {}),
            )
            for obj in page.get("Contents", []):
                head = self._head(obj["Key"])
                if head is None:
                    continue
                try:
                    written_at = float(head.get("Metadata", {}).get("written-at", "inf"))
                except ValueError:
                    continue
                if written_at < older_than:
                    self._call("DELETE", self.client.delete_object, Bucket=self.bucket, Key=obj["Key"])
                    removed += 1
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return removed


def open_s3_objects(url: str, clock: Clock) -> S3Objects:
    """`s3://BUCKET/prefix?region=R[&endpoint_url=URL][&max_attempts=N]`; credentials from boto3's chain."""
    return S3Objects(parse_target(url, "s3"), clock)


def _bucket_exists(s3: Any, bucket: str) -> bool:
    try:
        s3.head_bucket(Bucket=bucket)
        return True
    except ClientError as e:
        if error_code(e) in (*_MISSING, "NoSuchBucket"):
            return False
        raise


def create_bucket(url: str, retention_days: int) -> str:
    """Create the bucket (idempotently) with a lifecycle rule expiring the store's prefix."""
    store = open_s3_objects(url, SystemClock())
    s3, bucket, done = store.client, store.bucket, []
    try:
        # head first: in us-east-1, re-creating a bucket you own answers 200 as if it were new
        if _bucket_exists(s3, bucket):
            done.append(f"bucket {bucket} exists")
        else:
            kwargs: dict[str, Any] = {"Bucket": bucket}
            region = s3.meta.region_name
            if region and region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
            try:
                s3.create_bucket(**kwargs)
                done.append(f"created bucket {bucket}")
            except ClientError as e:
                if error_code(e) != "BucketAlreadyOwnedByYou":
                    raise
                done.append(f"bucket {bucket} exists")
        s3.put_bucket_lifecycle_configuration(
            Bucket=bucket,
            LifecycleConfiguration={
                "Rules": [
                    {
                        "ID": f"chat-approvals-retention-{store.prefix.strip('/')}"[:255],
                        "Filter": {"Prefix": store.prefix},
                        "Status": "Enabled",
                        "Expiration": {"Days": retention_days},
                        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
                    }
                ]
            },
        )
        done.append(f"lifecycle: {store.prefix}* expires after {retention_days} days")
    finally:
        s3.close()
    return "; ".join(done)


def check_bucket(url: str) -> str:
    """Without --create-bucket: only check the bucket is there and reachable."""
    store = open_s3_objects(url, SystemClock())
    try:
        store.client.head_bucket(Bucket=store.bucket)
    except ClientError as e:
        raise ValueError(
            f"bucket {store.bucket} is not reachable ({error_code(e)}); create it, or pass --create-bucket"
        ) from e
    finally:
        store.client.close()
    return f"bucket {store.bucket} exists (lifecycle not changed; --create-bucket sets it)"
