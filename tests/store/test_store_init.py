"""`chat-approvals store init`: creates the table with TTL and the bucket with its lifecycle rule,
and running it again changes nothing and still succeeds."""

from __future__ import annotations

import secrets
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from chat_approvals.bots.cli import main
from chat_approvals.core.settings import Settings, retention_days
from tests.support.store_backends import DYNALITE, MOTO, REGION, require_env


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_store_init_on_the_embedded_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ("store", "init", "--store", f"sqlite:///{tmp_path}/a.db", "--objects", str(tmp_path / "objects"))
    assert _run(capsys, *args)[0] == 0
    assert (tmp_path / "a.db").exists() and (tmp_path / "objects").is_dir()
    assert _run(capsys, *args)[0] == 0


def test_store_init_creates_table_ttl_bucket_and_lifecycle_on_moto_idempotently(
    capsys: pytest.CaptureFixture[str],
) -> None:
    moto = require_env(MOTO)[MOTO]
    table, bucket = "init" + secrets.token_hex(4), "init-" + secrets.token_hex(4)
    rows = f"dynamodb://{table}?region={REGION}&endpoint_url={moto}"
    objects = f"s3://{bucket}/approvals?region={REGION}&endpoint_url={moto}"
    code, out = _run(capsys, "store", "init", "--store", rows, "--objects", objects, "--create-bucket")
    assert code == 0, out
    assert f"created table {table}" in out and f"created bucket {bucket}" in out
    ddb = boto3.client("dynamodb", region_name=REGION, endpoint_url=moto)
    ttl = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert (ttl["TimeToLiveStatus"], ttl["AttributeName"]) == ("ENABLED", "ttl")
    keys = {k["AttributeName"]: k["KeyType"] for k in ddb.describe_table(TableName=table)["Table"]["KeySchema"]}
    assert keys == {"pk": "HASH", "sk": "RANGE"}
    s3 = boto3.client("s3", region_name=REGION, endpoint_url=moto, config=Config(s3={"addressing_style": "path"}))
    rules = s3.get_bucket_lifecycle_configuration(Bucket=bucket)["Rules"]
    assert [(r["Filter"]["Prefix"], r["Expiration"]["Days"]) for r in rules] == [
        ("approvals/", retention_days(Settings()))
    ]
    code, out = _run(capsys, "store", "init", "--store", rows, "--objects", objects, "--create-bucket")
    assert code == 0, out
    assert f"table {table} exists" in out and "already enabled" in out and f"bucket {bucket} exists" in out
    code, out = _run(capsys, "store", "init", "--store", rows, "--objects", objects)  # no --create-bucket
    assert code == 0 and "lifecycle not changed" in out


def test_store_init_without_create_bucket_names_a_missing_bucket(capsys: pytest.CaptureFixture[str]) -> None:
    moto = require_env(MOTO)[MOTO]
    rows = f"dynamodb://init{secrets.token_hex(4)}?region={REGION}&endpoint_url={moto}"
    objects = f"s3://absent-{secrets.token_hex(4)}/p?region={REGION}&endpoint_url={moto}"
    code, out = _run(capsys, "store", "init", "--store", rows, "--objects", objects)
    assert code == 2 and "pass --create-bucket" in out


def test_store_init_on_dynalite_says_it_has_no_ttl_api(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dyn = require_env(DYNALITE)[DYNALITE]
    rows = f"dynamodb://init{secrets.token_hex(4)}?region={REGION}&endpoint_url={dyn}"
    code, out = _run(capsys, "store", "init", "--store", rows, "--objects", str(tmp_path / "o"))
    assert code == 0 and "no TTL API" in out


def test_store_urls_with_unknown_options_are_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "store", "init", "--store", "dynamodb://t?regoin=x", "--objects", "var/x")
    assert code == 2 and "unknown option" in out


def test_a_missing_table_is_a_store_error_that_says_to_run_store_init() -> None:
    from chat_approvals.store.base import StoreError
    from chat_approvals.store.dynamodb_rows import open_dynamodb_rows

    moto = require_env(MOTO)[MOTO]
    rows = open_dynamodb_rows(f"dynamodb://absent{secrets.token_hex(4)}?region={REGION}&endpoint_url={moto}")
    with pytest.raises(StoreError, match="store init"):
        rows.get_pointer("http:a")
    rows.close()
