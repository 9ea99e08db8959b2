"""The embedded store's cheaper writes of a cycle (issue 34): a pointer read back from its row,
one statement for a card's timers, an object written inside a step without a savepoint of its
own. Each keeps what the longer form promised (R8: the pointer read back is what its row holds;
R7, R12: an object is written once, and a refused one leaves the step's other writes to commit
together)."""

from __future__ import annotations

import pytest

from chat_approvals.core.models import ClaimRead, Timer, Vote
from chat_approvals.store.base import ObjectExists
from chat_approvals.store.sqlite_objects import SqliteObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_conformance import RETENTION, T0, make_pointer


def test_a_pointer_read_back_has_its_columns_not_the_document_written_first(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    """The row's columns change after the card is written (claim, vote, location); the JSON
    document keeps the first values, and the read must give the columns'."""
    rows, _ = embedded
    p = make_pointer("http:a")
    assert rows.put_pointer(p, T0)
    assert rows.set_card_location("http:a", p.card_id, {"channel": "C1", "ts": "1.5"})
    voted = rows.vote(chat="http:a", card_id=p.card_id, secret_hash=p.secret_hash, vote=Vote(user="U2", at=T0), now=T0)
    assert voted is not None and [v.user for v in voted.votes] == ["U2"]
    read = rows.get_pointer("http:a")
    assert read is not None
    assert read.card_location == {"channel": "C1", "ts": "1.5"} and read.votes == voted.votes
    assert read.model_copy(update={"card_location": None, "votes": []}) == p  # the rest as written


def test_a_pointer_read_by_position_is_the_pointer_of_its_columns(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    """R8: every read (by chat, by card, the claim's and the vote's rows) gives the same pointer,
    whatever order the table's columns are in; a votes column of a file made before votes
    (NULL) or of a card nobody voted on (the text []) reads as no votes."""
    rows, _ = embedded
    p = make_pointer("http:a")
    assert rows.put_pointer(p, T0)
    assert rows.get_pointer("http:a") == rows.get_pointer_by_card(p.card_id) == p
    rows._exec("UPDATE pointers SET votes = NULL WHERE chat = 'http:a'")
    assert rows.get_pointer("http:a") == p
    voted = rows.vote(chat="http:a", card_id=p.card_id, secret_hash=p.secret_hash, vote=Vote(user="U2", at=T0), now=T0)
    assert voted is not None and voted == rows.get_pointer_by_card(p.card_id)
    assert voted.model_copy(update={"votes": []}) == p
    won = rows.claim(ClaimRead("http:a", p.card_id, p.secret_hash, 0), worker="w", now=T0, lease_until=T0 + 30,
                     resume_deadline=T0 + 60)  # fmt: skip
    assert won is not None and won == rows.get_pointer("http:a")
    assert (won.state, won.worker, won.claim_count, won.votes) == ("claimed", "w", 1, voted.votes)


def test_many_timers_of_a_card_are_all_stored_once(embedded: tuple[SqliteRows, SqliteObjects]) -> None:
    """Past one statement's share of parameters the timers go in several, in one transaction;
    a retried schedule leaves every stored timer as it is."""
    rows, _ = embedded
    timers = [
        Timer(chat="http:a", card_id="c_1", name=f"remind:{i}", due_at=T0 + i, ttl=T0 + RETENTION) for i in range(250)
    ]
    rows.put_timers(timers[:1])
    assert rows.fire_timer(timers[0], T0)
    rows.put_timers(timers)
    rows.put_timers(timers)  # retried
    due = rows.claim_timers("h1", T0 + 1000, T0 + 1030, T0 - 1, 1000)
    assert due == timers[1:]  # the fired one stays fired, the others stored once, earliest first


def test_a_refused_object_inside_a_step_leaves_the_rest_of_the_step(
    embedded: tuple[SqliteRows, SqliteObjects],
) -> None:
    """An object write inside `atomic` is one statement: a key written before is refused
    (ObjectExists) and the step's other writes still commit together."""
    rows, objects = embedded
    objects.put("answers/a.json", b"first")
    with rows.atomic():
        objects.put("sessions/1.json", b"[]")
        with pytest.raises(ObjectExists):
            objects.put("answers/a.json", b"second")
        rows.put_session("http:a", "sessions/1.json", T0, T0 + 10)
    assert objects.get_key("answers/a.json") == b"first"
    assert objects.get_key("sessions/1.json") == b"[]"
    assert rows.get_session("http:a") == "sessions/1.json"
