"""Differential check of the DynamoDB backend against the embedded reference (SQLite): the same
seeded random sequence of pointer operations (R7-R13) — right and wrong secrets, stale counts,
lapsed and live leases, stale fencing tokens, chained replaces — gives the same answer from
both, call by call, and leaves the same pointers."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.core.ids import hash_secret
from chat_approvals.core.models import ClaimRead, Fence
from chat_approvals.store.base import RowStore
from tests.support.store_backends import open_backend
from tests.support.store_conformance import LEASE, T0, StoreBackend, make_pointer

CHATS = ["http:a", "http:b"]
STEPS = 400


@pytest.fixture(params=["dynalite+moto-s3", "moto-dynamodb+moto-s3", "postgresql"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[StoreBackend, StoreBackend]]:
    with (
        open_backend("sqlite+files", tmp_path / "ref") as ref,
        open_backend(request.param, tmp_path / "aws") as aws,
    ):
        yield ref, aws


def _step(
    rng: random.Random, now: float, ref: RowStore, secrets_of: dict[str, str], held: list[tuple[Any, ...]]
) -> tuple[str, tuple[Any, ...], tuple[str, str] | None]:
    """One random operation: (method, args, the (card_id, secret) it would create). Mostly aimed
    at each chat's current card with the count just read, so that calls succeed as well as fail."""
    chat = rng.choice(CHATS)
    current = ref.get_pointer(chat)
    kind = rng.choice(["put", "claim", "claim", "claim", "renew", "finish", "replace", "expire", "locate"])
    if kind == "put" or not secrets_of:
        secret = f"s{rng.randrange(10**6)}"
        p = make_pointer(chat, secret=secret, now=now, expiry=rng.choice([60.0, 300.0, 900.0]))
        return "put_pointer", (p, now), (p.card_id, secret)
    if current is not None and rng.random() < 0.75:
        card_id, count = current.card_id, current.claim_count
    else:
        card_id, count = rng.choice(list(secrets_of)), rng.randrange(3)
    if kind == "claim":
        sh = hash_secret(secrets_of.get(card_id, "x") if rng.random() < 0.85 else "wrong")
        count = count if rng.random() < 0.85 else count + 1
        worker = f"w{rng.randrange(3)}"
        return "claim", (chat, card_id, sh, count, worker, now, now + LEASE, now + 900), None
    if kind == "expire":
        return "expire", (chat, card_id, now, rng.choice([None, "answers/x"])), None
    if kind == "locate":
        return "set_card_location", (chat, card_id, {"ts": str(now)}), None
    if held and rng.random() < 0.85:
        chat, card_id, worker, token = held[-1] if rng.random() < 0.7 else rng.choice(held)
    else:
        worker, token = f"w{rng.randrange(3)}", rng.randrange(3)
    if kind == "renew":
        return "renew", (chat, card_id, worker, token, now, now + LEASE), None
    if kind == "finish":
        return "finish", (chat, card_id, worker, token, f"answers/{rng.randrange(100)}"), None
    secret = f"s{rng.randrange(10**6)}"
    nxt = make_pointer(chat, secret=secret, now=now, expiry=300.0)
    return "replace", (chat, card_id, worker, token, nxt), (nxt.card_id, secret)


def _apply(rows: RowStore, name: str, args: tuple) -> Any:
    """The calls under a claim take their value objects (the steps keep flat tuples for the log)."""
    if name == "claim":
        chat, card_id, sh, count, worker, now, lease_until, deadline = args
        read = ClaimRead(chat, card_id, sh, count)
        return rows.claim(read, worker=worker, now=now, lease_until=lease_until, resume_deadline=deadline)
    if name == "renew":
        return rows.renew(Fence(*args[:4]), now=args[4], lease_until=args[5])
    if name == "finish":
        return rows.finish(Fence(*args[:4]), answer_key=args[4])
    if name == "replace":
        return rows.replace(Fence(*args[:4]), new=args[4])
    return getattr(rows, name)(*args)


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_r10_dynamodb_answers_every_call_like_the_reference_store(pair: tuple[StoreBackend, StoreBackend]) -> None:
    ref, aws = pair
    rng = random.Random(20260412)
    secrets_of: dict[str, str] = {}
    held: list[tuple[Any, ...]] = []
    tally: Counter[tuple[str, bool]] = Counter()
    now = T0
    for i in range(STEPS):
        now += rng.choice([0.0, 1.0, 2.0, 5.0, 31.0])
        name, args, card = _step(rng, now, ref.rows, secrets_of, held)
        expected = _apply(ref.rows, name, args)
        got = _apply(aws.rows, name, args)
        assert got == expected, (i, name, args)
        tally[(name, bool(expected))] += 1
        if card is not None and expected:
            secrets_of[card[0]] = card[1]
        if name == "claim" and expected is not None:
            held.append((expected.chat, expected.card_id, expected.worker, expected.claim_count))
        for chat in CHATS:
            assert aws.rows.get_pointer(chat) == ref.rows.get_pointer(chat), (i, name, chat)
        card_id = rng.choice(list(secrets_of)) if secrets_of else "c_none"
        assert aws.rows.get_pointer_by_card(card_id) == ref.rows.get_pointer_by_card(card_id), (i, card_id)
    print("differential tally:", sorted(tally.items()))
    # the sequence reached both the success and the failure path of every operation
    for name in ("put_pointer", "claim", "renew", "finish", "replace", "expire", "set_card_location"):
        assert tally[(name, True)] > 0 and tally[(name, False)] > 0, (name, tally)
