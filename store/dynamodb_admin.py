"""Managing the DynamoDB table (`chat-approvals store init`, tests): create it on demand with
TTL on its `ttl` attribute, idempotently, and delete it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from chat_approvals.store.aws import error_code, make_client, parse_target
from chat_approvals.store.dynamodb_codec import TTL_ATTRIBUTE


def create_table(url: str) -> str:
    """Create the table (on-demand) with TTL on `ttl`, idempotently. Returns what was done."""
    target = parse_target(url, "dynamodb")
    client = make_client("dynamodb", target)
    done = []
    try:
        try:
            client.create_table(
                TableName=target.name,
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            done.append(f"created table {target.name}")
        except ClientError as e:
            if error_code(e) != "ResourceInUseException":
                raise
            done.append(f"table {target.name} exists")
        client.get_waiter("table_exists").wait(TableName=target.name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
        done.append(_enable_ttl(client, target.name))
    finally:
        client.close()
    return "; ".join(done)


def _enable_ttl(client: Any, table: str) -> str:
    try:
        desc = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
        if desc.get("TimeToLiveStatus") in ("ENABLED", "ENABLING") and desc.get("AttributeName") == TTL_ATTRIBUTE:
            return f"TTL on {TTL_ATTRIBUTE!r} already enabled"
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
        return f"enabled TTL on {TTL_ATTRIBUTE!r}"
    except ClientError as e:
        if error_code(e) == "UnknownOperationException":  # dynalite has no TTL API
            return "this endpoint has no TTL API (emulator): rows are removed by `sweep` only"
        raise


def delete_table(url: str) -> None:
    target = parse_target(url, "dynamodb")
    client = make_client("dynamodb", target)
    try:
        client.delete_table(TableName=target.name)
    except ClientError as e:
        if error_code(e) != "ResourceNotFoundException":
            raise
    finally:
        client.close()
