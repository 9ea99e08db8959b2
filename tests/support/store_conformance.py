"""The store conformance suite: every RowStore / ObjectStore method, success and failure paths.

The same tests run unchanged against every backend (see tests/store/test_store_conformance.py for the
parametrisation). A test gets a `StoreBackend` and only talks to it through store/base.py; the
one backend-specific hook is `corrupt(key)`, which tampers with a stored object the way a disk
or a bucket could.

Each refused state change is checked to have changed nothing (the pointer read back is equal).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.ids import hash_secret, mint_card_id
from chat_approvals.core.models import (
    ApprovalCard,
    AuditEvent,
    AuditWrite,
    CardPolicy,
    ClaimRead,
    ClaimWrite,
    Fence,
    Grant,
    GrantChange,
    ObjectRef,
    OutboxItem,
    Pointer,
    Refusal,
    SessionWrite,
    SubjectKind,
    Timer,
    Vote,
)
from chat_approvals.store.base import CorruptObject, ObjectExists, ObjectStore, RowStore

T0 = 1_800_000_000.0
EXPIRY = 1800.0
RETENTION = 7 * 86400.0
LEASE = 30.0


@dataclass
class StoreBackend:
    name: str
    rows: RowStore
    objects: ObjectStore
    clock: ManualClock
    corrupt: Callable[[str], None]  # overwrite a stored object's bytes behind the store's back
    cleanup: list[Callable[[], None]] = field(default_factory=list)


def make_pointer(
    chat: str = "http:chat-1",
    *,
    card_id: str | None = None,
    secret: str = "secret-1",
    now: float = T0,
    expiry: float = EXPIRY,
    owner: str = "U1",
) -> Pointer:
    cid = card_id or mint_card_id()
    card = ApprovalCard(
        card_id=cid,
        chat=chat,
        owner=owner,
        platform="http",
        reason="fetch the data set",
        sites=["example.org"],
        urls=["https://example.org/data.csv"],
        packages=[],
        created_at=now,
        expires_at=now + expiry,
    )
    return Pointer(
        chat=chat,
        card_id=cid,
        secret_hash=hash_secret(secret),
        owner=owner,
        state="pending",
        expires_at=now + expiry,
        ttl=now + expiry + RETENTION,
        snapshot=ObjectRef(key=f"snapshots/{cid}", size=3, sha256="0" * 64),
        card=card,
        sdk_interrupt_id="sdk-int-1",
        tool_use_id="tool-use-1",
        turn_id="turn-1",
        created_at=now,
    )


def claim(
    rows: RowStore,
    p: Pointer,
    *,
    secret: str = "secret-1",
    count: int | None = None,
    worker: str = "w1",
    now: float = T0 + 1,
) -> Pointer | None:
    return rows.claim(
        ClaimRead(p.chat, p.card_id, hash_secret(secret), p.claim_count if count is None else count),
        worker=worker,
        now=now,
        lease_until=now + LEASE,
        resume_deadline=now + 900,
    )


def pending(b: StoreBackend, chat: str = "http:chat-1", *, expiry: float = EXPIRY) -> Pointer:
    p = make_pointer(chat, expiry=expiry)
    assert b.rows.put_pointer(p, T0)
    return p


def claimed(b: StoreBackend, chat: str = "http:chat-1", worker: str = "w1") -> Pointer:
    p = pending(b, chat)
    won = claim(b.rows, p, worker=worker)
    assert won is not None
    return won


# --- put_pointer (R7, R8) -------------------------------------------------------------------


def test_r7_put_pointer_creates_when_absent_and_round_trips_every_field(store: StoreBackend) -> None:
    p = make_pointer()
    assert store.rows.put_pointer(p, T0)
    assert store.rows.get_pointer(p.chat) == p
    assert store.rows.get_pointer_by_card(p.card_id) == p
    assert store.rows.get_pointer("http:other") is None


def test_r7_put_pointer_refused_over_open_pending_request(store: StoreBackend) -> None:
    p = pending(store)
    assert not store.rows.put_pointer(make_pointer(p.chat), T0 + 10)
    assert store.rows.get_pointer(p.chat) == p


def test_r7_put_pointer_refused_over_live_claim(store: StoreBackend) -> None:
    won = claimed(store)
    assert not store.rows.put_pointer(make_pointer(won.chat), T0 + 2)
    assert store.rows.get_pointer(won.chat) == won


def test_r7_put_pointer_refused_over_live_lease_even_past_expiry(store: StoreBackend) -> None:
    """A worker still holding a live lease is never overwritten, even past the card's expiry."""
    p = pending(store, expiry=10)
    won = claim(store.rows, p, now=T0 + 5)
    assert won is not None
    assert not store.rows.put_pointer(make_pointer(p.chat), T0 + 20)  # lease runs to T0+35
    assert store.rows.get_pointer(p.chat) == won


def test_r7_put_pointer_over_done_row(store: StoreBackend) -> None:
    won = claimed(store)
    assert store.rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key="answers/a1")
    q = make_pointer(won.chat)
    assert store.rows.put_pointer(q, T0 + 3)
    assert store.rows.get_pointer(won.chat) == q
    assert store.rows.get_pointer_by_card(won.card_id) is None


def test_r7_put_pointer_over_expired_row(store: StoreBackend) -> None:
    p = pending(store)
    assert store.rows.expire(p.chat, p.card_id, T0 + 1)
    q = make_pointer(p.chat)
    assert store.rows.put_pointer(q, T0 + 2)
    assert store.rows.get_pointer(p.chat) == q


def test_r7_put_pointer_over_pending_row_past_its_expiry(store: StoreBackend) -> None:
    p = pending(store)
    q = make_pointer(p.chat, now=T0 + EXPIRY)
    assert store.rows.put_pointer(q, T0 + EXPIRY)  # expires_at <= now
    assert store.rows.get_pointer(p.chat) == q
    assert store.rows.get_pointer_by_card(p.card_id) is None


def test_r7_put_pointer_over_lapsed_claim_past_expiry(store: StoreBackend) -> None:
    p = pending(store, expiry=10)
    assert claim(store.rows, p, now=T0 + 5) is not None
    q = make_pointer(p.chat, now=T0 + 100)
    assert store.rows.put_pointer(q, T0 + 100)  # lease ran out at T0+35, card at T0+10
    assert store.rows.get_pointer(p.chat) == q


def test_r7_put_pointer_chats_are_independent(store: StoreBackend) -> None:
    a = pending(store, "http:a")
    b = pending(store, "http:b")
    assert store.rows.get_pointer("http:a") == a
    assert store.rows.get_pointer("http:b") == b


# --- claim (R10) ----------------------------------------------------------------------------


def test_r10_claim_wins_and_returns_the_fencing_token(store: StoreBackend) -> None:
    p = pending(store)
    won = claim(store.rows, p, worker="w1", now=T0 + 1)
    assert won is not None
    assert (won.state, won.worker, won.claim_count) == ("claimed", "w1", 1)
    assert (won.lease_until, won.resume_deadline) == (T0 + 1 + LEASE, T0 + 1 + 900)
    assert won.card == p.card and won.snapshot == p.snapshot
    assert store.rows.get_pointer(p.chat) == won


@pytest.mark.parametrize(
    "case",
    ["wrong_card_id", "wrong_secret_hash", "stale_claim_count", "past_expiry", "at_expiry"],
)
def test_r10_claim_refused_and_changes_nothing(store: StoreBackend, case: str) -> None:
    p = pending(store)
    rows = store.rows
    if case == "wrong_card_id":
        got = rows.claim(
            ClaimRead(p.chat, mint_card_id(), p.secret_hash, 0),
            worker="w1",
            now=T0 + 1,
            lease_until=T0 + 31,
            resume_deadline=T0 + 900,
        )
    elif case == "wrong_secret_hash":
        got = claim(rows, p, secret="not-the-secret")
    elif case == "stale_claim_count":
        got = claim(rows, p, count=1)
    elif case == "past_expiry":
        got = claim(rows, p, now=T0 + EXPIRY + 1)
    else:
        got = claim(rows, p, now=T0 + EXPIRY)  # expires_at > now is strict
    assert got is None
    assert rows.get_pointer(p.chat) == p


def test_r10_claim_on_absent_row_creates_nothing(store: StoreBackend) -> None:
    p = make_pointer()
    assert claim(store.rows, p) is None
    assert store.rows.get_pointer(p.chat) is None
    assert store.rows.get_pointer_by_card(p.card_id) is None


def test_r10_claim_refused_while_lease_is_live(store: StoreBackend) -> None:
    won = claimed(store)
    assert claim(store.rows, won, worker="w2", now=T0 + 1 + LEASE) is None  # lease_until == now: live
    assert store.rows.get_pointer(won.chat) == won


def test_r11_reclaim_after_the_lease_lapses(store: StoreBackend) -> None:
    won = claimed(store)
    again = claim(store.rows, won, worker="w2", now=T0 + 2 + LEASE)
    assert again is not None
    assert (again.worker, again.claim_count, again.state) == ("w2", 2, "claimed")


@pytest.mark.parametrize("final", ["done", "expired"])
def test_r12_claim_refused_on_a_finished_request(store: StoreBackend, final: str) -> None:
    won = claimed(store)
    if final == "done":
        assert store.rows.finish(Fence(won.chat, won.card_id, "w1", 1), answer_key="answers/x")
    else:
        assert store.rows.expire(won.chat, won.card_id, T0 + 100)
    before = store.rows.get_pointer(won.chat)
    assert before is not None and before.state == final
    assert claim(store.rows, before, worker="w2", now=T0 + 200) is None
    assert store.rows.get_pointer(won.chat) == before


# --- renew (R11) ----------------------------------------------------------------------------


def test_r11_renew_by_the_holder_extends_the_lease(store: StoreBackend) -> None:
    won = claimed(store)
    assert store.rows.renew(Fence(won.chat, won.card_id, "w1", won.claim_count), now=T0 + 20, lease_until=T0 + 50)
    got = store.rows.get_pointer(won.chat)
    assert got is not None and got.lease_until == T0 + 50 and got.state == "claimed"


@pytest.mark.parametrize("case", ["non_holder", "wrong_token", "wrong_card", "after_lapse", "absent"])
def test_r11_renew_refused_and_changes_nothing(store: StoreBackend, case: str) -> None:
    won = claimed(store)
    rows = store.rows
    if case == "non_holder":
        ok = rows.renew(Fence(won.chat, won.card_id, "w2", won.claim_count), now=T0 + 20, lease_until=T0 + 50)
    elif case == "wrong_token":
        ok = rows.renew(Fence(won.chat, won.card_id, "w1", won.claim_count + 1), now=T0 + 20, lease_until=T0 + 50)
    elif case == "wrong_card":
        ok = rows.renew(Fence(won.chat, mint_card_id(), "w1", won.claim_count), now=T0 + 20, lease_until=T0 + 50)
    elif case == "after_lapse":
        ok = rows.renew(Fence(won.chat, won.card_id, "w1", won.claim_count), now=T0 + 2 + LEASE, lease_until=T0 + 90)
    else:
        ok = rows.renew(Fence("http:absent", won.card_id, "w1", won.claim_count), now=T0 + 20, lease_until=T0 + 50)
    assert not ok
    assert rows.get_pointer(won.chat) == won
    assert rows.get_pointer("http:absent") is None


def test_r11_fencing_token_stops_a_lapsed_worker_with_the_same_name(store: StoreBackend) -> None:
    """w1 lapses, w1 (same name, e.g. a restarted process) re-claims: the old token is dead."""
    first = claimed(store)
    second = claim(store.rows, first, worker="w1", now=T0 + 2 + LEASE)
    assert second is not None and second.claim_count == first.claim_count + 1
    rows, t = store.rows, first.claim_count
    assert not rows.renew(Fence(first.chat, first.card_id, "w1", t), now=T0 + 40, lease_until=T0 + 70)
    assert not rows.finish(Fence(first.chat, first.card_id, "w1", t), answer_key="answers/stale")
    assert not rows.replace(Fence(first.chat, first.card_id, "w1", t), new=make_pointer(first.chat))
    assert rows.get_pointer(first.chat) == second
    assert rows.renew(Fence(first.chat, first.card_id, "w1", second.claim_count), now=T0 + 40, lease_until=T0 + 70)


# --- finish (R12) ---------------------------------------------------------------------------


def test_r12_finish_marks_done_with_the_answer_location(store: StoreBackend) -> None:
    won = claimed(store)
    assert store.rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key="answers/a1")
    got = store.rows.get_pointer(won.chat)
    assert got is not None
    assert (got.state, got.answer_key, got.lease_until) == ("done", "answers/a1", None)
    assert store.rows.get_pointer_by_card(won.card_id) == got


def test_r12_finish_twice_is_refused(store: StoreBackend) -> None:
    won = claimed(store)
    assert store.rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key="answers/a1")
    done = store.rows.get_pointer(won.chat)
    assert not store.rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key="answers/a2")
    assert store.rows.get_pointer(won.chat) == done


@pytest.mark.parametrize("case", ["non_holder", "wrong_token", "pending", "wrong_card"])
def test_r12_finish_refused_without_holding(store: StoreBackend, case: str) -> None:
    if case == "pending":
        p = pending(store)
        assert not store.rows.finish(Fence(p.chat, p.card_id, "w1", 1), answer_key="answers/a")
        assert store.rows.get_pointer(p.chat) == p
        return
    won = claimed(store)
    worker, token, card = "w1", won.claim_count, won.card_id
    if case == "non_holder":
        worker = "w2"
    elif case == "wrong_token":
        token += 5
    else:
        card = mint_card_id()
    assert not store.rows.finish(Fence(won.chat, card, worker, token), answer_key="answers/a")
    assert store.rows.get_pointer(won.chat) == won


# --- replace (R13) --------------------------------------------------------------------------


def test_r13_replace_installs_the_chained_request(store: StoreBackend) -> None:
    won = claimed(store)
    nxt = make_pointer(won.chat, secret="secret-2", now=T0 + 5)
    assert store.rows.replace(Fence(won.chat, won.card_id, "w1", won.claim_count), new=nxt)
    assert store.rows.get_pointer(won.chat) == nxt
    assert store.rows.get_pointer_by_card(nxt.card_id) == nxt
    assert store.rows.get_pointer_by_card(won.card_id) is None
    # the old secret and the old card id no longer claim anything; the new ones do
    assert claim(store.rows, nxt, secret="secret-1", now=T0 + 6) is None
    assert (
        store.rows.claim(
            ClaimRead(won.chat, won.card_id, hash_secret("secret-1"), 0),
            worker="w2",
            now=T0 + 6,
            lease_until=T0 + 36,
            resume_deadline=T0 + 900,
        )
        is None
    )
    assert store.rows.get_pointer(won.chat) == nxt
    assert claim(store.rows, nxt, secret="secret-2", now=T0 + 6) is not None


@pytest.mark.parametrize("case", ["non_holder", "wrong_token", "pending", "done"])
def test_r13_replace_refused_without_holding(store: StoreBackend, case: str) -> None:
    won = claimed(store)
    worker, token = "w1", won.claim_count
    if case == "non_holder":
        worker = "w2"
    elif case == "wrong_token":
        token = 0
    elif case == "done":
        assert store.rows.finish(Fence(won.chat, won.card_id, "w1", token), answer_key="answers/a")
    else:
        assert store.rows.expire(won.chat, won.card_id, T0 + 100)  # lapsed, then the card is re-put
        won = pending(store, won.chat)
    before = store.rows.get_pointer(won.chat)
    nxt = make_pointer(won.chat, secret="secret-2")
    assert not store.rows.replace(Fence(won.chat, won.card_id, worker, token), new=nxt)
    assert store.rows.get_pointer(won.chat) == before
    assert store.rows.get_pointer_by_card(nxt.card_id) is None


def test_r13_replace_into_another_chat_is_a_clear_error(store: StoreBackend) -> None:
    won = claimed(store)
    with pytest.raises(ValueError):
        store.rows.replace(Fence(won.chat, won.card_id, "w1", won.claim_count), new=make_pointer("http:elsewhere"))
    assert store.rows.get_pointer(won.chat) == won
    assert store.rows.get_pointer("http:elsewhere") is None


# --- expire (R9, R11) -----------------------------------------------------------------------


def test_r9_expire_a_pending_request_keeps_the_answer_key(store: StoreBackend) -> None:
    p = pending(store)
    assert store.rows.expire(p.chat, p.card_id, T0 + EXPIRY + 1, answer_key="answers/denied")
    got = store.rows.get_pointer(p.chat)
    assert got is not None and (got.state, got.answer_key) == ("expired", "answers/denied")
    assert not store.rows.expire(p.chat, p.card_id, T0 + EXPIRY + 2)  # already expired
    assert store.rows.get_pointer(p.chat) == got


def test_r11_expire_never_takes_a_live_lease(store: StoreBackend) -> None:
    won = claimed(store)
    assert not store.rows.expire(won.chat, won.card_id, T0 + 10)
    assert store.rows.get_pointer(won.chat) == won
    assert store.rows.expire(won.chat, won.card_id, T0 + 2 + LEASE)  # lapsed: the cap may expire it
    got = store.rows.get_pointer(won.chat)
    assert got is not None and got.state == "expired" and got.lease_until is None


@pytest.mark.parametrize("case", ["wrong_card", "done", "absent"])
def test_r9_expire_refused_and_changes_nothing(store: StoreBackend, case: str) -> None:
    won = claimed(store)
    card = won.card_id
    if case == "wrong_card":
        card = mint_card_id()
    elif case == "done":
        assert store.rows.finish(Fence(won.chat, won.card_id, "w1", won.claim_count), answer_key="answers/a")
    before = store.rows.get_pointer(won.chat)
    chat = "http:absent" if case == "absent" else won.chat
    assert not store.rows.expire(chat, card, T0 + 5000)
    assert store.rows.get_pointer(won.chat) == before
    assert store.rows.get_pointer("http:absent") is None


# --- set_card_location ----------------------------------------------------------------------


def test_set_card_location_on_the_current_card(store: StoreBackend) -> None:
    p = pending(store)
    loc = {"channel": "C1", "ts": "1700000000.000100"}
    assert store.rows.set_card_location(p.chat, p.card_id, loc)
    got = store.rows.get_pointer(p.chat)
    assert got is not None and got.card_location == loc
    assert store.rows.get_pointer_by_card(p.card_id) == got


def test_r13_set_card_location_refused_on_a_replaced_card(store: StoreBackend) -> None:
    won = claimed(store)
    nxt = make_pointer(won.chat, secret="secret-2")
    assert store.rows.replace(Fence(won.chat, won.card_id, "w1", won.claim_count), new=nxt)
    assert not store.rows.set_card_location(won.chat, won.card_id, {"channel": "C1", "ts": "1"})
    assert store.rows.get_pointer(won.chat) == nxt
    assert not store.rows.set_card_location("http:absent", nxt.card_id, {"channel": "C1"})
    assert store.rows.get_pointer("http:absent") is None


# --- rotate_secret (R19) --------------------------------------------------------------------


def test_r19_rotate_secret_replaces_the_hash_and_the_old_secret_stops_working(store: StoreBackend) -> None:
    p = pending(store)
    assert store.rows.rotate_secret(p.chat, p.card_id, p.secret_hash, hash_secret("secret-2"), T0 + 1)
    got = store.rows.get_pointer(p.chat)
    assert got is not None and got == p.model_copy(update={"secret_hash": hash_secret("secret-2")})
    assert claim(store.rows, got, secret="secret-1") is None  # the old secret claims nothing
    won = claim(store.rows, got, secret="secret-2")
    assert won is not None and won.claim_count == 1


def test_r19_rotate_secret_on_a_lapsed_claim(store: StoreBackend) -> None:
    won = claimed(store)
    assert store.rows.rotate_secret(won.chat, won.card_id, won.secret_hash, hash_secret("s2"), T0 + 2 + LEASE)
    got = store.rows.get_pointer(won.chat)
    assert got is not None and got.secret_hash == hash_secret("s2") and got.claim_count == 1


@pytest.mark.parametrize("case", ["wrong-id", "wrong-old-hash", "past-expiry", "live-lease", "done", "expired"])
def test_r19_rotate_secret_refused_and_changes_nothing(store: StoreBackend, case: str) -> None:
    p = pending(store)
    now, card_id, old = T0 + 1, p.card_id, p.secret_hash
    if case == "wrong-id":
        card_id = mint_card_id()
    elif case == "wrong-old-hash":
        old = hash_secret("not-it")
    elif case == "past-expiry":
        now = p.expires_at
    elif case == "live-lease":
        assert claim(store.rows, p) is not None
    elif case == "done":
        won = claim(store.rows, p)
        assert won is not None and store.rows.finish(
            Fence(p.chat, p.card_id, "w1", won.claim_count), answer_key="answers/x"
        )
    else:
        assert store.rows.expire(p.chat, p.card_id, now)
    before = store.rows.get_pointer(p.chat)
    assert not store.rows.rotate_secret(p.chat, card_id, old, hash_secret("secret-2"), now)
    assert store.rows.get_pointer(p.chat) == before
    assert not store.rows.rotate_secret("http:absent", p.card_id, old, hash_secret("x"), now)
    assert store.rows.get_pointer("http:absent") is None


# --- turn lease (one turn per chat across replicas) -----------------------------------------


def test_turn_lease_one_holder_per_chat_until_released(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.take_turn("http:t", "h1", T0, T0 + LEASE)
    assert not rows.take_turn("http:t", "h2", T0 + 1, T0 + 1 + LEASE)  # held
    assert not rows.take_turn("http:t", "h1", T0 + 1, T0 + 1 + LEASE)  # not re-entrant either
    assert rows.take_turn("http:other", "h2", T0 + 1, T0 + 1 + LEASE)  # chats are independent
    assert not rows.release_turn("http:t", "h2")  # only the holder releases
    assert not rows.take_turn("http:t", "h2", T0 + 2, T0 + 2 + LEASE)
    assert rows.release_turn("http:t", "h1")
    assert not rows.release_turn("http:t", "h1")  # once
    assert rows.take_turn("http:t", "h2", T0 + 3, T0 + 3 + LEASE)


def test_turn_lease_renew_only_by_a_live_holder_and_a_lapsed_lease_can_be_taken(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.take_turn("http:t", "h1", T0, T0 + LEASE)
    assert rows.renew_turn("http:t", "h1", T0 + 20, T0 + 20 + LEASE)
    assert not rows.renew_turn("http:t", "h2", T0 + 21, T0 + 21 + LEASE)
    assert not rows.take_turn("http:t", "h2", T0 + 20 + LEASE - 1, T0 + 100)  # renewed: still live
    lapse = T0 + 20 + LEASE + 1  # the holder died: its lease runs out
    assert not rows.renew_turn("http:t", "h1", lapse, lapse + LEASE)
    assert rows.take_turn("http:t", "h2", lapse, lapse + LEASE)
    assert not rows.renew_turn("http:t", "h1", lapse + 1, lapse + 1 + LEASE)  # the old holder is fenced off
    assert not rows.release_turn("http:t", "h1")
    assert rows.renew_turn("http:t", "h2", lapse + 1, lapse + 1 + LEASE)
    assert not rows.renew_turn("http:absent", "h1", T0, T0 + LEASE)


def test_turn_lease_twenty_racing_takers_exactly_one_wins(store: StoreBackend) -> None:
    barrier = threading.Barrier(20)
    won: list[int] = []
    errors: list[BaseException] = []

    def take(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            if store.rows.take_turn("http:race", f"h{i}", T0, T0 + LEASE):
                won.append(i)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(won) == 1


def test_turn_lease_rows_are_swept_once_lapsed(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.take_turn("http:dead", "h1", T0, T0 + LEASE)  # never released: its process died
    assert rows.sweep(T0 + 1) == 0
    assert rows.sweep(T0 + LEASE + 1) == 1
    assert rows.take_turn("http:dead", "h2", T0 + 1, T0 + 1 + LEASE)


# --- grants (R14) ---------------------------------------------------------------------------


def _grant(
    user: str, chat: str, kind: SubjectKind, name: str, *, expires: float = T0 + 3600, card: str = "c_1"
) -> Grant:
    return Grant(
        user=user,
        chat=chat,
        kind=kind,
        name=name,
        card_id=card,
        created_at=T0,
        expires_at=expires,
    )


def test_r14_grants_upsert_list_sorted_and_per_chat(store: StoreBackend) -> None:
    rows = store.rows
    g = [
        _grant("U1", "http:b", "site", "b.org"),
        _grant("U1", "http:a", "site", "z.org"),
        _grant("U1", "http:a", "package", "requests"),
        _grant("U1", "http:a", "site", "a.org"),
        _grant("U2", "http:a", "site", "a.org"),
    ]
    for x in g:
        rows.put_grant(x, x.expires_at + RETENTION)
    assert rows.list_grants("U1", None, T0) == [g[2], g[3], g[1], g[0]]
    assert rows.list_grants("U1", "http:a", T0) == [g[2], g[3], g[1]]
    assert rows.list_grants("U2", None, T0) == [g[4]]
    assert rows.list_grants("U3", None, T0) == []
    assert rows.list_grants("U1", "http:c", T0) == []
    # upsert: the same (user, chat, kind, name) is refreshed, not duplicated
    fresh = _grant("U1", "http:a", "site", "a.org", expires=T0 + 7200, card="c_2")
    rows.put_grant(fresh, fresh.expires_at + RETENTION)
    assert rows.list_grants("U1", "http:a", T0) == [g[2], fresh, g[1]]


def test_r14_grants_chat_filter_is_exact_not_a_prefix(store: StoreBackend) -> None:
    rows = store.rows
    a, ab = _grant("U1", "slack:T:C", "site", "a.org"), _grant("U1", "slack:T:C2", "site", "a.org")
    rows.put_grant(a, T0 + RETENTION)
    rows.put_grant(ab, T0 + RETENTION)
    assert rows.list_grants("U1", "slack:T:C", T0) == [a]
    assert rows.list_grants("U1", "slack:T", T0) == []


def test_r14_expired_grants_are_not_listed(store: StoreBackend) -> None:
    rows = store.rows
    old = _grant("U1", "http:a", "site", "old.org", expires=T0 + 10)
    live = _grant("U1", "http:a", "site", "live.org", expires=T0 + 100)
    rows.put_grant(old, T0 + RETENTION)
    rows.put_grant(live, T0 + RETENTION)
    assert rows.list_grants("U1", "http:a", T0 + 10) == [live]  # expires_at > now is strict
    assert rows.list_grants("U1", None, T0 + 5) == [live, old]


def test_r14_delete_grant(store: StoreBackend) -> None:
    rows = store.rows
    a, b = _grant("U1", "http:a", "site", "a.org"), _grant("U1", "http:a", "package", "numpy")
    rows.put_grant(a, T0 + RETENTION)
    rows.put_grant(b, T0 + RETENTION)
    assert rows.delete_grant("U1", "http:a", "site", "a.org")
    assert not rows.delete_grant("U1", "http:a", "site", "a.org")
    assert not rows.delete_grant("U2", "http:a", "package", "numpy")
    assert not rows.delete_grant("U1", "http:b", "package", "numpy")
    assert rows.list_grants("U1", None, T0) == [b]


def test_r14_tool_grants_are_rows_like_sites_and_packages(store: StoreBackend) -> None:
    """Issue 14: a grant of kind `tool` (a gated tool's exact name, case and underscores kept) is
    listed, sorted, refreshed, expired and deleted like the others, and never collides with a
    site or package of a similar name."""
    rows = store.rows
    tool = _grant("U1", "http:a", "tool", "save_note")
    upper = _grant("U1", "http:a", "tool", "Save_Note")
    pkg = _grant("U1", "http:a", "package", "save-note")
    short = _grant("U1", "http:a", "tool", "write_table", expires=T0 + 10)
    for g in (tool, upper, pkg, short):
        rows.put_grant(g, g.expires_at + RETENTION)
    assert rows.list_grants("U1", "http:a", T0) == [pkg, upper, tool, short]
    assert rows.list_grants("U1", "http:a", T0 + 10) == [pkg, upper, tool]  # expired: not listed
    fresh = _grant("U1", "http:a", "tool", "save_note", expires=T0 + 7200, card="c_2")
    rows.put_grant(fresh, fresh.expires_at + RETENTION)
    assert rows.list_grants("U1", "http:a", T0) == [pkg, upper, fresh, short]
    assert not rows.delete_grant("U1", "http:a", "site", "save_note")
    assert not rows.delete_grant("U1", "http:a", "package", "save_note")
    assert rows.delete_grant("U1", "http:a", "tool", "save_note")
    assert not rows.delete_grant("U1", "http:a", "tool", "save_note")
    assert rows.list_grants("U1", "http:a", T0) == [pkg, upper, short]


# --- refusals (R3) --------------------------------------------------------------------------


def _refusal(name: str, *, turn: str = "turn-1", at: float = T0, kind: SubjectKind = "site") -> Refusal:
    return Refusal(chat="http:a", turn_id=turn, kind=kind, name=name, port=443, url=f"https://{name}/x", at=at)


def test_r3_refusals_are_idempotent_per_turn_and_listed_in_order(store: StoreBackend) -> None:
    rows = store.rows
    r2, r1, r3 = (
        _refusal("b.org", at=T0 + 2),
        _refusal("a.org", at=T0 + 1),
        _refusal("pypi", at=T0 + 2, kind="package"),
    )
    assert rows.record_refusal(r2, T0 + RETENTION)
    assert rows.record_refusal(r1, T0 + RETENTION)
    assert rows.record_refusal(r3, T0 + RETENTION)
    again = Refusal(chat="http:a", turn_id="turn-1", kind="site", name="b.org", at=T0 + 9)
    assert not rows.record_refusal(again, T0 + RETENTION)
    assert rows.list_refusals("http:a", "turn-1") == [r1, r3, r2]  # by at, kind, name; first record kept
    other = _refusal("b.org", turn="turn-2")
    assert rows.record_refusal(other, T0 + RETENTION)
    assert rows.list_refusals("http:a", "turn-2") == [other]
    assert rows.list_refusals("http:b", "turn-1") == []


# --- delivery dedupe ------------------------------------------------------------------------


def test_claim_event_dedupes_until_its_ttl(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.claim_event("slack:Ev1", T0, T0 + 100)
    assert not rows.claim_event("slack:Ev1", T0 + 1, T0 + 101)
    assert not rows.claim_event("slack:Ev1", T0 + 99, T0 + 199)
    assert rows.claim_event("slack:Ev2", T0 + 1, T0 + 101)
    assert rows.claim_event("slack:Ev1", T0 + 100.5, T0 + 200)  # past its ttl: a new delivery window
    assert not rows.claim_event("slack:Ev1", T0 + 150, T0 + 250)


# --- audit ----------------------------------------------------------------------------------


def test_slack_installations_put_replace_read_delete_and_never_swept(store: StoreBackend) -> None:
    """Issue 31: Bolt's installation store on this store: one opaque record per key, replaced in
    place, read back exactly, removed once, and kept by the sweep (an install has no expiry)."""
    rows = store.rows
    assert rows.get_installation("slack:-:T1") is None
    rows.put_installation("slack:-:T1", '{"v": 1}')
    rows.put_installation("slack:E1:*", '{"org": "\u00e9"}')
    rows.put_installation("slack:-:T1", '{"v": 2}')  # a rotated token replaces the record
    assert rows.get_installation("slack:-:T1") == '{"v": 2}'
    assert rows.get_installation("slack:E1:*") == '{"org": "\u00e9"}'
    assert rows.get_installation("slack:-:T") is None  # exact keys, not prefixes
    rows.sweep(T0 + 10 * RETENTION)
    assert rows.get_installation("slack:-:T1") == '{"v": 2}'
    assert rows.delete_installation("slack:-:T1")
    assert not rows.delete_installation("slack:-:T1")
    assert rows.get_installation("slack:-:T1") is None
    assert rows.get_installation("slack:E1:*") is not None


def test_audit_keeps_append_order_per_chat(store: StoreBackend) -> None:
    rows = store.rows
    events = [
        AuditEvent(chat="http:a", at=T0, kind="card_created", actor="U1", card_id="c_1", detail={"sites": ["a.org"]}),
        AuditEvent(chat="http:a", at=T0, kind="claim_won", actor="w1", card_id="c_1"),
        AuditEvent(chat="http:b", at=T0, kind="turn", actor="U2"),
        AuditEvent(
            chat="http:a",
            at=T0 - 5,
            kind="answered",
            actor="U1",
            card_id="c_1",
            detail={"approved": True, "n": 1},
        ),
    ]
    for e in events:
        rows.append_audit(e, T0 + RETENTION)
    assert rows.list_audit("http:a") == [events[0], events[1], events[3]]  # append order, not time order
    assert rows.list_audit("http:b") == [events[2]]
    assert rows.list_audit("http:c") == []


def test_audit_lists_many_events(store: StoreBackend) -> None:
    events = [AuditEvent(chat="http:a", at=T0 + i, kind="turn", actor="U1", detail={"i": i}) for i in range(120)]
    for e in events:
        store.rows.append_audit(e, T0 + RETENTION)
    assert store.rows.list_audit("http:a") == events


def test_audit_since_lists_every_chat_in_time_order(store: StoreBackend) -> None:
    rows = store.rows
    a1 = AuditEvent(chat="http:a", at=T0 + 2, kind="turn", actor="U1")
    b1 = AuditEvent(chat="http:b", at=T0 + 1, kind="turn", actor="U2")
    a0 = AuditEvent(chat="http:a", at=T0 - 10, kind="turn", actor="U1")
    a2 = AuditEvent(chat="http:a", at=T0 + 2, kind="claim_won", actor="w", card_id="c_1")
    for e in (a1, b1, a0, a2):
        rows.append_audit(e, T0 + RETENTION)
    assert rows.list_audit_since(T0) == [b1, a1, a2]  # by time, then chat, then append order
    assert rows.list_audit_since(T0 - 100) == [a0, b1, a1, a2]
    assert rows.list_audit_since(T0 + 3) == []


# --- audit outbox (webhook delivery) ---------------------------------------------------------


def _out(sink: str, n: int, chat: str = "http:a") -> OutboxItem:
    return OutboxItem(sink=sink, id=f"{n:020d}-x", chat=chat, body=f'{{"n":{n}}}')


def test_outbox_items_are_written_with_their_event_and_listed_in_order(store: StoreBackend) -> None:
    rows = store.rows
    for n in (3, 1, 2):  # ids sort in append order by construction; the store sorts by id
        e = AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1", detail={"n": n})
        rows.append_audit(e, T0 + RETENTION, outbox=[_out("s1", n), _out("s2", n)])
    assert [e.detail["n"] for e in rows.list_audit("http:a")] == [3, 1, 2]
    got = rows.claim_outbox("s1", "h1", T0, T0 + 30, 10)
    assert [(o.sink, o.id, o.chat, o.body) for o in got] == [
        ("s1", f"{n:020d}-x", "http:a", f'{{"n":{n}}}') for n in (1, 2, 3)
    ]
    assert [o.id for o in rows.claim_outbox("s2", "h1", T0, T0 + 30, 2)] == [f"{n:020d}-x" for n in (1, 2)]
    assert rows.claim_outbox("s3", "h1", T0, T0 + 30, 10) == []


def test_outbox_lease_keeps_a_second_deliverer_out_until_it_lapses(store: StoreBackend) -> None:
    rows = store.rows
    rows.append_audit(AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1"), T0 + RETENTION, outbox=[_out("s", 1)])
    assert len(rows.claim_outbox("s", "h1", T0, T0 + 30, 10)) == 1
    assert rows.claim_outbox("s", "h2", T0 + 10, T0 + 40, 10) == []  # h1 holds it
    assert len(rows.claim_outbox("s", "h1", T0 + 20, T0 + 50, 10)) == 1  # h1 renews
    assert rows.claim_outbox("s", "h2", T0 + 49, T0 + 79, 10) == []
    assert len(rows.claim_outbox("s", "h2", T0 + 51, T0 + 81, 10)) == 1  # lapsed: h2 takes over
    assert rows.claim_outbox("s", "h1", T0 + 52, T0 + 82, 10) == []
    rows.claim_outbox("s", "h2", T0 + 53, T0 + 52, 1)  # h2 gives it up (renewed into the past)
    assert len(rows.claim_outbox("s", "h1", T0 + 54, T0 + 84, 10)) == 1  # at once, not after 30 s


def test_outbox_delete_removes_one_item_once(store: StoreBackend) -> None:
    rows = store.rows
    e = AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1")
    rows.append_audit(e, T0 + RETENTION, outbox=[_out("s", 1)])
    rows.append_audit(e, T0 + RETENTION, outbox=[_out("s", 2)])
    assert rows.delete_outbox("s", f"{1:020d}-x")
    assert not rows.delete_outbox("s", f"{1:020d}-x")
    assert not rows.delete_outbox("other", f"{2:020d}-x")
    assert [o.id for o in rows.claim_outbox("s", "h", T0, T0 + 30, 10)] == [f"{2:020d}-x"]


def test_outbox_survives_until_its_ttl(store: StoreBackend) -> None:
    rows = store.rows
    e = AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1")
    rows.append_audit(e, T0 + 100, outbox=[_out("s", 1)])
    rows.sweep(T0 + 50)
    assert [o.id for o in rows.claim_outbox("s", "h", T0 + 50, T0 + 60, 10)] == [f"{1:020d}-x"]
    rows.sweep(T0 + 101)
    assert rows.claim_outbox("s", "h", T0 + 101, T0 + 130, 10) == []


# --- sweep (physical expiry) ----------------------------------------------------------------


def test_sweep_deletes_only_rows_past_their_ttl(store: StoreBackend) -> None:
    rows = store.rows
    old_p = make_pointer("http:old", now=T0, expiry=10)  # ttl = T0 + 10 + RETENTION
    live_p = make_pointer("http:live", now=T0 + 1000, expiry=10)
    assert rows.put_pointer(old_p, T0) and rows.put_pointer(live_p, T0)
    cut = old_p.ttl + 1
    rows.put_grant(_grant("U1", "http:a", "site", "old.org"), cut - 1)
    rows.put_grant(_grant("U1", "http:a", "site", "live.org", expires=cut + 100), cut + 100)
    rows.record_refusal(_refusal("old.org"), cut - 1)
    rows.record_refusal(_refusal("live.org"), cut + 100)
    rows.claim_event("old-event", T0, cut - 1)
    rows.claim_event("live-event", T0, cut + 100)
    rows.append_audit(AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1", detail={"n": 1}), cut - 1)
    live_audit = AuditEvent(chat="http:a", at=T0, kind="turn", actor="U1", detail={"n": 2})
    rows.append_audit(live_audit, cut + 100)

    assert rows.sweep(cut) == 5
    assert rows.get_pointer("http:old") is None and rows.get_pointer_by_card(old_p.card_id) is None
    assert rows.get_pointer("http:live") == live_p and rows.get_pointer_by_card(live_p.card_id) == live_p
    assert [g.name for g in rows.list_grants("U1", None, T0)] == ["live.org"]
    assert [r.name for r in rows.list_refusals("http:a", "turn-1")] == ["live.org"]
    assert rows.claim_event("old-event", T0, cut + 200)  # gone, so a first delivery again
    assert not rows.claim_event("live-event", T0, cut + 200)
    assert rows.list_audit("http:a") == [live_audit]
    assert rows.sweep(cut) == 0


# --- votes (issue 13: a card that needs a quorum) ------------------------------------------


def _vote(
    rows: RowStore, p: Pointer, user: str, *, at: float = T0 + 1, secret: str = "secret-1", **kw: object
) -> Pointer | None:
    return rows.vote(
        chat=p.chat,
        card_id=p.card_id,
        secret_hash=hash_secret(secret),
        vote=Vote(user=user, at=at, **kw),
        now=at,  # type: ignore[arg-type]
    )


def test_votes_are_recorded_in_order_once_per_voter(store: StoreBackend) -> None:
    p = pending(store)
    first = _vote(store.rows, p, "alice", duration="1h")
    assert first is not None
    assert [v.user for v in first.votes] == ["alice"] and first.votes[0].duration == "1h"
    assert first.state == "pending" and first.claim_count == 0
    # a repeated vote by the same person counts once: nothing changes
    assert _vote(store.rows, p, "alice", at=T0 + 2) is None
    second = _vote(store.rows, p, "bob", at=T0 + 3, packages=["numpy"])
    assert second is not None
    assert [(v.user, v.at, v.packages) for v in second.votes] == [("alice", T0 + 1, None), ("bob", T0 + 3, ["numpy"])]
    assert store.rows.get_pointer(p.chat) == second
    assert store.rows.get_pointer_by_card(p.card_id) == second
    # the votes survive the claim, and the claim's conditions are unchanged by them
    won = claim(store.rows, second, now=T0 + 4)
    assert won is not None and [v.user for v in won.votes] == ["alice", "bob"]


@pytest.mark.parametrize("case", ["wrong_secret", "wrong_card", "past_expiry", "claimed", "done", "expired", "absent"])
def test_votes_refused_and_change_nothing(store: StoreBackend, case: str) -> None:
    p = pending(store)
    at, secret, target = T0 + 1, "secret-1", p
    if case == "wrong_secret":
        secret = "secret-2"
    elif case == "wrong_card":
        target = make_pointer(p.chat)
    elif case == "past_expiry":
        at = p.expires_at
    elif case == "claimed":
        assert claim(store.rows, p) is not None
    elif case == "done":
        won = claim(store.rows, p)
        assert won is not None and store.rows.finish(
            Fence(p.chat, p.card_id, "w1", won.claim_count), answer_key="answers/x"
        )
    elif case == "expired":
        assert store.rows.expire(p.chat, p.card_id, T0 + 1)
    elif case == "absent":
        target = make_pointer("http:nobody")
    before = store.rows.get_pointer(p.chat)
    assert _vote(store.rows, target, "alice", at=at, secret=secret) is None
    assert store.rows.get_pointer(p.chat) == before


def test_r13_a_chained_card_starts_with_no_votes(store: StoreBackend) -> None:
    p = pending(store)
    voted = _vote(store.rows, p, "alice")
    assert voted is not None
    won = claim(store.rows, voted)
    assert won is not None
    nxt = make_pointer(p.chat, secret="secret-2", now=T0 + 5)
    assert store.rows.replace(Fence(p.chat, p.card_id, "w1", won.claim_count), new=nxt)
    assert store.rows.get_pointer(p.chat) == nxt and nxt.votes == []
    assert _vote(store.rows, nxt, "alice", at=T0 + 6, secret="secret-2") is not None


def test_votes_twenty_racing_voters_all_counted_once(store: StoreBackend) -> None:
    p = pending(store)
    barrier = threading.Barrier(20)
    errors: list[BaseException] = []

    def cast(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            _vote(store.rows, p, f"user-{i % 10}", at=T0 + 1)  # every voter twice
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=cast, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    final = store.rows.get_pointer(p.chat)
    assert final is not None
    assert sorted(v.user for v in final.votes) == sorted(f"user-{i}" for i in range(10))


def test_a_card_policy_round_trips_on_the_pointer(store: StoreBackend) -> None:
    p = make_pointer()
    card = p.card.model_copy(
        update={"policy": CardPolicy(approvers="approvers", quorum=2, durations=["once", "1h"], default_duration="1h")}
    )
    p = p.model_copy(update={"card": card})
    assert store.rows.put_pointer(p, T0)
    assert store.rows.get_pointer(p.chat) == p


def test_once_grants_keep_their_turn(store: StoreBackend) -> None:
    g = _grant("U1", "http:a", "site", "a.org").model_copy(update={"turn_id": "turn-9"})
    store.rows.put_grant(g, g.expires_at + RETENTION)
    assert store.rows.list_grants("U1", "http:a", T0) == [g]
    # refreshed by a grant for good: the turn goes
    lasting = _grant("U1", "http:a", "site", "a.org", card="c_2")
    store.rows.put_grant(lasting, lasting.expires_at + RETENTION)
    assert store.rows.list_grants("U1", "http:a", T0) == [lasting]


# --- the claim race (R10) -------------------------------------------------------------------


def _race(rows: RowStore, p: Pointer, n: int, now: float) -> list[Pointer]:
    barrier = threading.Barrier(n)
    winners: list[Pointer] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def click(i: int) -> None:
        try:
            seen = rows.get_pointer_by_card(p.card_id)
            assert seen is not None
            barrier.wait(timeout=30)
            won = rows.claim(
                ClaimRead(seen.chat, seen.card_id, p.secret_hash, seen.claim_count),
                worker=f"w{i}",
                now=now,
                lease_until=now + LEASE,
                resume_deadline=now + 900,
            )
            if won is not None:
                with lock:
                    winners.append(won)
        except BaseException as e:  # surfaced below: a racer that crashed did not "lose"
            with lock:
                errors.append(e)

    threads = [threading.Thread(target=click, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return winners


def test_r10_twenty_racing_clicks_exactly_one_wins(store: StoreBackend) -> None:
    p = pending(store)
    winners = _race(store.rows, p, 20, T0 + 1)
    assert len(winners) == 1
    assert store.rows.get_pointer(p.chat) == winners[0]
    assert winners[0].claim_count == 1


def test_r11_twenty_racing_reclaims_after_a_lapse_exactly_one_wins(store: StoreBackend) -> None:
    won = claimed(store)
    winners = _race(store.rows, won, 20, T0 + 2 + LEASE)
    assert len(winners) == 1
    assert winners[0].claim_count == 2
    assert store.rows.get_pointer(won.chat) == winners[0]


# --- objects (R7) ---------------------------------------------------------------------------


def test_r7_object_put_confirms_and_reads_back_verified(store: StoreBackend) -> None:
    data = b"snapshot \x00\xff bytes" * 100
    ref = store.objects.put("snapshots/c_1/state.json", data)
    assert ref.key == "snapshots/c_1/state.json" and ref.size == len(data)
    assert len(ref.sha256) == 64
    assert store.objects.get(ref) == data
    assert store.objects.get_key(ref.key) == data
    empty = store.objects.put("answers/empty", b"")
    assert store.objects.get(empty) == b"" and empty.size == 0


def test_r7_objects_are_write_once(store: StoreBackend) -> None:
    ref = store.objects.put("answers/a1", b"first")
    with pytest.raises(ObjectExists):
        store.objects.put("answers/a1", b"second")
    assert store.objects.get(ref) == b"first"


def test_r7_absent_objects(store: StoreBackend) -> None:
    assert store.objects.get_key("answers/none") is None
    with pytest.raises(KeyError):
        store.objects.get(ObjectRef(key="answers/none", size=1, sha256="0" * 64))


def test_r7_corrupt_object_is_detected_on_read(store: StoreBackend) -> None:
    ref = store.objects.put("snapshots/c_2", b"the real bytes")
    store.corrupt(ref.key)
    with pytest.raises(CorruptObject):
        store.objects.get(ref)
    with pytest.raises(CorruptObject):
        store.objects.get_key(ref.key)


def test_r7_object_read_against_a_different_checksum_is_corrupt(store: StoreBackend) -> None:
    ref = store.objects.put("snapshots/c_3", b"bytes")
    other = ObjectRef(key=ref.key, size=ref.size, sha256="f" * 64)
    with pytest.raises(CorruptObject):
        store.objects.get(other)


def test_object_sweep_removes_only_old_objects(store: StoreBackend) -> None:
    old = store.objects.put("snapshots/old", b"old")
    store.clock.advance(100)
    new = store.objects.put("snapshots/new", b"new")
    assert store.objects.sweep(store.clock.now() - 50) == 1
    assert store.objects.get_key(old.key) is None
    assert store.objects.get(new) == b"new"
    assert store.objects.sweep(store.clock.now() - 50) == 0


# --- sessions (conversation history pointer) ----------------------------------------------
def test_sessions_point_at_the_newest_history_and_never_roll_back(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.get_session("http:a") is None
    assert rows.put_session("http:a", "sessions/1.json", T0, T0 + RETENTION)
    assert rows.get_session("http:a") == "sessions/1.json"
    assert rows.put_session("http:a", "sessions/2.json", T0 + 5, T0 + RETENTION)
    assert rows.put_session("http:a", "sessions/3.json", T0 + 5, T0 + RETENTION)  # same time: the later write
    assert not rows.put_session("http:a", "sessions/old.json", T0 + 1, T0 + RETENTION)  # a slower turn
    assert rows.get_session("http:a") == "sessions/3.json"
    assert rows.get_session("http:b") is None


def test_sessions_are_swept_after_their_ttl(store: StoreBackend) -> None:
    rows = store.rows
    rows.put_session("http:a", "sessions/1.json", T0, T0 + 10)
    rows.put_session("http:b", "sessions/2.json", T0, T0 + 100)
    assert rows.sweep(T0 + 50) == 1
    assert rows.get_session("http:a") is None and rows.get_session("http:b") == "sessions/2.json"


# --- compound steps (issue 12): several calls in one round trip, the same conditions -------


def _ev(chat: str, kind: str, card: str | None = None, **detail: object) -> AuditWrite:
    event = AuditEvent(chat=chat, at=T0, kind=kind, actor="U1", card_id=card, detail=dict(detail))  # type: ignore[arg-type]
    return AuditWrite(event, T0 + RETENTION)


def test_begin_turn_takes_the_lease_and_reads_what_the_turn_starts_from(store: StoreBackend) -> None:
    rows = store.rows
    p = pending(store, "http:b")
    g = _grant("U1", "http:b", "site", "a.org")
    rows.put_grant(g, g.expires_at + RETENTION)
    rows.put_grant(_grant("U1", "http:other", "site", "b.org"), T0 + RETENTION)  # another chat: not read
    rows.put_session("http:b", "sessions/1.json", T0, T0 + RETENTION)
    start = rows.begin_turn("http:b", "h1", "U1", T0 + 1, T0 + 1 + LEASE)
    assert start.taken and start.pointer == p and list(start.grants) == [g] and start.session == "sessions/1.json"
    # held: nothing is read, and the lease stays with h1
    assert rows.begin_turn("http:b", "h2", "U1", T0 + 2, T0 + 2 + LEASE).taken is False
    assert not rows.take_turn("http:b", "h2", T0 + 2, T0 + 2 + LEASE)
    assert rows.release_turn("http:b", "h1")
    fresh = rows.begin_turn("http:new", "h3", "U2", T0 + 3, T0 + 3 + LEASE)
    assert fresh.taken and fresh.pointer is None and fresh.grants == () and fresh.session is None


def test_r7_end_turn_writes_the_pointer_with_its_audit_and_releases_the_lease(store: StoreBackend) -> None:
    rows = store.rows
    assert rows.take_turn("http:e", "h1", T0, T0 + LEASE)
    p = make_pointer("http:e")
    created = _ev("http:e", "card_created", p.card_id)
    assert rows.end_turn("http:e", "h1", now=T0, pointer=p, audit=[created])
    assert rows.get_pointer("http:e") == p and rows.get_pointer_by_card(p.card_id) == p
    assert rows.list_audit("http:e") == [created.event]
    assert rows.take_turn("http:e", "h2", T0 + 1, T0 + 1 + LEASE)  # released


def test_r7_end_turn_refused_pointer_writes_no_audit_but_still_releases(store: StoreBackend) -> None:
    rows = store.rows
    p = pending(store, "http:e")  # an open request: a second pointer is refused
    assert rows.take_turn("http:e", "h1", T0, T0 + LEASE)
    other = make_pointer("http:e")
    assert not rows.end_turn("http:e", "h1", now=T0 + 1, pointer=other, audit=[_ev("http:e", "card_created")])
    assert rows.get_pointer("http:e") == p and rows.get_pointer_by_card(other.card_id) is None
    assert rows.list_audit("http:e") == []
    assert rows.take_turn("http:e", "h2", T0 + 2, T0 + 2 + LEASE)


def test_end_turn_points_the_history_and_never_rolls_it_back(store: StoreBackend) -> None:
    rows = store.rows
    rows.put_session("http:h", "sessions/new.json", T0 + 5, T0 + RETENTION)
    assert rows.take_turn("http:h", "h1", T0, T0 + LEASE)
    assert rows.end_turn(
        "http:h", "h1", now=T0, session=SessionWrite("http:h", "sessions/old.json", T0, T0 + RETENTION)
    )
    assert rows.get_session("http:h") == "sessions/new.json"  # a slower turn
    assert rows.take_turn("http:h", "h2", T0 + 1, T0 + 1 + LEASE)
    assert rows.end_turn(
        "http:h", "h2", now=T0 + 6, session=SessionWrite("http:h", "sessions/6.json", T0 + 6, T0 + RETENTION)
    )
    assert rows.get_session("http:h") == "sessions/6.json"
    assert not rows.release_turn("http:h", "h2")  # already released by end_turn


def _changes(p: Pointer) -> list[GrantChange]:
    site = _grant(p.owner, p.chat, "site", "example.org", card=p.card_id)
    gone = _grant(p.owner, p.chat, "package", "requests", card=p.card_id)
    never = _grant(p.owner, p.chat, "package", "numpy", card=p.card_id)
    return [
        GrantChange(site, site.expires_at + RETENTION, False, _ev(p.chat, "grant", p.card_id, name="example.org")),
        GrantChange(gone, 0.0, True, _ev(p.chat, "revoke", p.card_id, name="requests")),
        GrantChange(never, 0.0, True, _ev(p.chat, "revoke", p.card_id, name="numpy")),  # no row: no event
    ]


def _claim_grants(rows: RowStore, p: Pointer, changes: list[GrantChange], *, count: int | None = None):  # type: ignore[no-untyped-def]
    return rows.claim_grants(
        ClaimWrite(
            ClaimRead(p.chat, p.card_id, p.secret_hash, p.claim_count if count is None else count),
            worker="w1",
            now=T0 + 1,
            lease_until=T0 + 1 + LEASE,
            resume_deadline=T0 + 900,
            changes=changes,
            before=[_ev(p.chat, "claim_won", p.card_id)],
            after=[_ev(p.chat, "answered", p.card_id)],
        )
    )


def test_r10_r14_claim_grants_writes_grants_and_events_in_order_with_the_claim(store: StoreBackend) -> None:
    rows = store.rows
    p = pending(store)
    old = _grant(p.owner, p.chat, "package", "requests", card="c_old")
    kept = _grant(p.owner, p.chat, "site", "kept.org", card="c_old")
    for g in (old, kept):
        rows.put_grant(g, g.expires_at + RETENTION)
    changes = _changes(p)
    won = _claim_grants(rows, p, changes)
    assert won is not None
    assert won.pointer.state == "claimed" and won.pointer.claim_count == 1 and won.pointer.worker == "w1"
    assert won.pointer == rows.get_pointer(p.chat)
    assert list(won.grants) == [changes[0].grant, kept]  # the owner's live grants after the changes
    assert rows.list_grants(p.owner, p.chat, T0 + 1) == [changes[0].grant, kept]
    kinds = [(e.kind, e.detail.get("name")) for e in rows.list_audit(p.chat)]
    assert kinds == [("claim_won", None), ("grant", "example.org"), ("revoke", "requests"), ("answered", None)]


def test_r10_claim_grants_lost_writes_nothing(store: StoreBackend) -> None:
    rows = store.rows
    p = pending(store)
    assert _claim_grants(rows, p, _changes(p), count=p.claim_count + 1) is None  # a stale read
    assert rows.get_pointer(p.chat) == p
    assert rows.list_grants(p.owner, p.chat, T0 + 1) == [] and rows.list_audit(p.chat) == []
    assert _claim_grants(rows, p, []) is not None
    assert _claim_grants(rows, p, _changes(p)) is None  # claimed, live lease: refused
    assert rows.list_grants(p.owner, p.chat, T0 + 1) == []
    assert [e.kind for e in rows.list_audit(p.chat)] == ["claim_won", "answered"]


def test_r12_finish_points_the_history_only_when_it_applies(store: StoreBackend) -> None:
    rows = store.rows
    won = claimed(store)
    fence = Fence(won.chat, won.card_id, "w1", won.claim_count)
    stale = Fence(won.chat, won.card_id, "w1", won.claim_count + 1)
    assert not rows.finish(
        stale, answer_key="answers/x", session=SessionWrite(won.chat, "sessions/x.json", T0, T0 + RETENTION)
    )
    assert rows.get_session(won.chat) is None
    assert rows.finish(
        fence, answer_key="answers/a", session=SessionWrite(won.chat, "sessions/a.json", T0, T0 + RETENTION)
    )
    assert rows.get_pointer(won.chat).state == "done"  # type: ignore[union-attr]
    assert rows.get_session(won.chat) == "sessions/a.json"


# --- a step's objects and rows (RowStore.atomic; issue 12) -----------------------------------
# Where the objects are kept with the rows (SQLite file, DynamoDB table items) they commit with
# the step's row write; elsewhere each is its own confirmed write before it. Either way, after
# the step the pointer names a snapshot that is there (R7), and the answer is there when the
# pointer says done (R12).


def test_r7_a_steps_snapshot_and_pointer_are_both_there_after_end_turn(store: StoreBackend) -> None:
    rows, objects = store.rows, store.objects
    assert rows.take_turn("http:s", "h1", T0, T0 + LEASE)
    data = b'{"snapshot": "bytes"}' * 50
    created = _ev("http:s", "card_created")
    with rows.atomic():
        ref = objects.put("snapshots/c_step.json", data)
        p = make_pointer("http:s").model_copy(update={"snapshot": ref})
        assert rows.end_turn("http:s", "h1", now=T0, pointer=p, audit=[created])
    assert rows.get_pointer_by_card(p.card_id) == p and objects.get(p.snapshot) == data
    assert rows.list_audit("http:s") == [created.event]
    assert rows.take_turn("http:s", "h2", T0 + 1, T0 + 1 + LEASE)  # released


def test_r7_a_refused_pointer_in_a_step_writes_no_audit_and_releases_the_lease(store: StoreBackend) -> None:
    rows, objects = store.rows, store.objects
    p = pending(store, "http:s")
    assert rows.take_turn("http:s", "h1", T0, T0 + LEASE)
    with rows.atomic():
        ref = objects.put("snapshots/c_refused.json", b"refused")
        other = make_pointer("http:s").model_copy(update={"snapshot": ref})
        assert not rows.end_turn("http:s", "h1", now=T0 + 1, pointer=other, audit=[_ev("http:s", "card_created")])
    assert rows.get_pointer("http:s") == p and rows.get_pointer_by_card(other.card_id) is None
    assert rows.list_audit("http:s") == []
    assert rows.take_turn("http:s", "h2", T0 + 2, T0 + 2 + LEASE)


def test_r12_a_steps_answer_and_history_are_there_when_finish_says_done(store: StoreBackend) -> None:
    rows, objects = store.rows, store.objects
    won = claimed(store)
    fence = Fence(won.chat, won.card_id, "w1", won.claim_count)
    with rows.atomic():
        answer = objects.put(f"answers/{won.card_id}/1.json", b'{"answer": 1}')
        history = objects.put("sessions/step.json", b'{"history": 1}')
        session = SessionWrite(won.chat, history.key, T0, T0 + RETENTION)
        assert rows.finish(fence, answer_key=answer.key, session=session)
    done = rows.get_pointer(won.chat)
    assert done is not None and done.state == "done" and done.answer_key == answer.key
    assert objects.get_key(answer.key) == b'{"answer": 1}'
    assert rows.get_session(won.chat) == "sessions/step.json" and objects.get(history) == b'{"history": 1}'


def test_r12_a_refused_finish_in_a_step_changes_no_pointer(store: StoreBackend) -> None:
    rows, objects = store.rows, store.objects
    won = claimed(store)
    stale = Fence(won.chat, won.card_id, "w1", won.claim_count + 1)
    with rows.atomic():
        objects.put(f"answers/{won.card_id}/9.json", b"late")
        history = objects.put("sessions/late.json", b"late history")
        assert not rows.finish(stale, answer_key="x", session=SessionWrite(won.chat, history.key, T0, T0 + RETENTION))
    assert rows.get_pointer(won.chat) == won and rows.get_session(won.chat) is None


def test_objects_put_in_a_step_without_a_row_write_are_kept(store: StoreBackend) -> None:
    with store.rows.atomic():
        ref = store.objects.put("answers/alone.json", b"alone")
    assert store.objects.get(ref) == b"alone"


def test_objects_put_in_a_step_that_fails_name_nothing(store: StoreBackend) -> None:
    with pytest.raises(RuntimeError), store.rows.atomic():
        store.objects.put("answers/failed.json", b"failed")
        raise RuntimeError("the step failed before its row write")
    store.objects.put("answers/after.json", b"after")  # the next write carries nothing of it
    assert store.objects.get_key("answers/after.json") == b"after"


def test_r7_large_objects_round_trip(store: StoreBackend) -> None:
    data = bytes(range(256)) * 600  # 150 KB: above what a table item holds here (S3 then)
    ref = store.objects.put("snapshots/large.json", data)
    assert store.objects.get(ref) == data and store.objects.get_key(ref.key) == data
    with pytest.raises(ObjectExists):
        store.objects.put("snapshots/large.json", data)


# --- durable timers (issue 33): a due-time index, one lease, each timer fired once -------------


def _timer(card: str, name: str, due: float, chat: str = "http:a") -> Timer:
    return Timer(chat=chat, card_id=card, name=name, due_at=due, ttl=T0 + RETENTION)


def test_timers_listed_only_when_due_earliest_first(store: StoreBackend) -> None:
    rows = store.rows
    late, early, later = (
        _timer("c_1", "remind:1", T0 + 3600),
        _timer("c_1", "remind:0", T0 + 600),
        _timer("c_2", "expire", T0 + 7200, chat="http:b"),
    )
    rows.put_timers([late, early, later])
    assert rows.claim_timers("h1", T0 + 599, T0 + 629, T0 - 86400, 10) == []
    assert rows.claim_timers("h1", T0 + 600, T0 + 630, T0 - 86400, 10) == [early]
    assert rows.claim_timers("h1", T0 + 7200, T0 + 7230, T0 - 86400, 10) == [early, late, later]
    assert rows.claim_timers("h1", T0 + 7200, T0 + 7230, T0 - 86400, 2) == [early, late]
    assert rows.claim_timers("h1", T0 + 7200, T0 + 7230, T0 + 601, 10) == [late, later]  # `since` bounds the index


def test_timers_across_days_are_found(store: StoreBackend) -> None:
    rows = store.rows
    a, b = _timer("c_1", "expire", T0 - 86400 * 1.5), _timer("c_2", "expire", T0 + 10)
    rows.put_timers([b, a])
    assert rows.claim_timers("h1", T0 + 10, T0 + 40, T0 - 2 * 86400, 10) == [a, b]


def test_timer_fires_exactly_once_and_is_no_longer_listed(store: StoreBackend) -> None:
    rows = store.rows
    t = _timer("c_1", "remind:0", T0)
    rows.put_timers([t])
    results = []
    barrier = threading.Barrier(4)

    def fire() -> None:
        barrier.wait()
        results.append(rows.fire_timer(t, T0 + 1))

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [False, False, False, True]
    assert rows.claim_timers("h1", T0 + 5, T0 + 35, T0 - 100, 10) == []
    assert not rows.fire_timer(_timer("c_9", "remind:0", T0), T0 + 1)  # never scheduled


def test_timer_scheduled_again_after_firing_stays_fired(store: StoreBackend) -> None:
    rows = store.rows
    t = _timer("c_1", "escalate", T0)
    rows.put_timers([t])
    assert rows.fire_timer(t, T0)
    rows.put_timers([t])  # a retried schedule
    assert not rows.fire_timer(t, T0 + 1)
    assert rows.claim_timers("h1", T0 + 5, T0 + 35, T0 - 100, 10) == []


def test_timer_lease_keeps_a_second_replica_out_until_it_lapses(store: StoreBackend) -> None:
    rows = store.rows
    t = _timer("c_1", "expire", T0)
    rows.put_timers([t])
    assert rows.claim_timers("h1", T0, T0 + 30, T0 - 100, 10) == [t]
    assert rows.claim_timers("h2", T0 + 10, T0 + 40, T0 - 100, 10) == []  # h1 holds it
    assert rows.claim_timers("h1", T0 + 20, T0 + 50, T0 - 100, 10) == [t]  # h1 renews
    assert rows.claim_timers("h2", T0 + 49, T0 + 79, T0 - 100, 10) == []
    assert rows.claim_timers("h2", T0 + 51, T0 + 81, T0 - 100, 10) == [t]  # lapsed: h2 takes over (h1 died)
    assert rows.claim_timers("h1", T0 + 52, T0 + 82, T0 - 100, 10) == []


def test_timers_swept_after_their_ttl(store: StoreBackend) -> None:
    rows = store.rows
    t = Timer(chat="http:a", card_id="c_1", name="expire", due_at=T0, ttl=T0 + 100)
    rows.put_timers([t])
    rows.sweep(T0 + 50)
    assert rows.claim_timers("h1", T0 + 50, T0 + 60, T0 - 100, 10) == [t]
    rows.sweep(T0 + 101)
    assert rows.claim_timers("h1", T0 + 102, T0 + 112, T0 - 100, 10) == []
