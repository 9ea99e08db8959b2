"""A pointer read back from its row validates its document once per text and its columns on every
read (store/pointer_docs.py, issue 34; SQLite and PostgreSQL): the card a pause step wrote is not
checked again by the click's two reads, and nothing the row's columns hold escapes Pointer's rules
(R8, R20)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from chat_approvals.store.pointer_docs import PointerDocs
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.support.store_backends import pg_schema
from tests.support.store_conformance import T0, claim, make_pointer


def _row_write(rows: SqliteRows, sql: str, args: tuple[object, ...]) -> None:
    """Change a row behind the store's back (another program, a bad restore, a disk fault)."""
    assert rows._exec(sql, args).rowcount == 1


def test_r8_a_pointer_read_back_is_the_one_written_and_shares_its_validated_card(tmp_path: Path) -> None:
    rows = SqliteRows(tmp_path / "a.db")
    p = make_pointer("http:a")
    assert rows.put_pointer(p, T0)
    got = rows.get_pointer("http:a")
    assert got == p
    assert got is not None and got.card is p.card  # the document known: the card not validated again
    won = claim(rows, p)  # the claim's RETURNING row: new columns on the same document
    assert won is not None and won.state == "claimed" and won.worker == "w1" and won.claim_count == 1
    assert won.card is p.card
    by_card = rows.get_pointer_by_card(p.card_id)
    assert by_card == won and by_card is not None and by_card.card is p.card


def test_r8_a_document_another_process_wrote_is_validated_then_kept(tmp_path: Path) -> None:
    writer, reader = SqliteRows(tmp_path / "a.db"), SqliteRows(tmp_path / "a.db")  # two stores on one file
    p = make_pointer("http:a")
    assert writer.put_pointer(p, T0)
    first = reader.get_pointer("http:a")
    assert first == p and first is not None and first.card is not p.card  # validated from its text
    second = reader.get_pointer("http:a")
    assert second == p and second is not None and second.card is first.card


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("state", "bogus"),  # not a PointerState
        ("claim_count", 1.5),  # not an int
        ("worker", b"w1"),  # a blob, not text
        ("expires_at", "soon"),  # not a number
        ("card_location", '{"channel": 7}'),  # not a dict of strings
        ("votes", '[{"user": "U2"}]'),  # a vote without its time
    ],
)
def test_r20_a_bad_column_is_refused_even_when_the_document_is_known(
    tmp_path: Path, column: str, value: object
) -> None:
    rows = SqliteRows(tmp_path / "a.db")
    p = make_pointer("http:a")
    assert rows.put_pointer(p, T0) and rows.get_pointer("http:a") == p
    _row_write(rows, f"UPDATE pointers SET {column} = ? WHERE chat = ?", (value, "http:a"))
    with pytest.raises(ValidationError):
        rows.get_pointer("http:a")
    with pytest.raises(ValidationError):
        rows.get_pointer_by_card(p.card_id)


def test_r20_a_changed_document_is_validated_again(tmp_path: Path) -> None:
    rows = SqliteRows(tmp_path / "a.db")
    p = make_pointer("http:a")
    assert rows.put_pointer(p, T0) and rows.get_pointer("http:a") == p
    bad = p.model_dump_json().replace('"reason":"fetch the data set"', '"reason":7')
    _row_write(rows, "UPDATE pointers SET doc = ? WHERE chat = ?", (bad, "http:a"))
    with pytest.raises(ValidationError):
        rows.get_pointer("http:a")


def test_the_documents_kept_are_bounded_oldest_first() -> None:
    docs = PointerDocs(kept=2)
    a, b, c = (make_pointer(f"http:{n}") for n in "abc")
    texts = [docs.document(p) for p in (a, b, c)]
    assert len(docs) == 2
    columns = {
        "card_id": a.card_id,
        "secret_hash": a.secret_hash,
        "state": "pending",
        "expires_at": a.expires_at,
        "ttl": a.ttl,
        "claim_count": 0,
        "worker": None,
        "lease_until": None,
        "resume_deadline": None,
        "answer_key": None,
        "card_location": None,
        "votes": [],
    }
    again = docs.pointer(texts[0], columns)  # dropped: validated from its text, kept again
    assert again == a and again.card is not a.card
    assert docs.pointer(texts[2], {**columns, "card_id": c.card_id, "secret_hash": c.secret_hash}).card is c.card
    assert len(docs) == 2


def test_the_documents_kept_are_bounded_in_text_too() -> None:
    a, b = make_pointer("http:a"), make_pointer("http:b")
    one = len(a.model_dump_json())
    docs = PointerDocs(kept_chars=one + one // 2)  # room for one document, not two
    docs.document(a)
    docs.document(b)
    assert len(docs) == 1  # the older one dropped
    alone = PointerDocs(kept_chars=one - 1)
    alone.document(a)  # larger than the whole bound: not kept
    assert len(alone) == 0


def test_r8_r20_postgres_reads_share_the_card_and_check_the_columns() -> None:
    from chat_approvals.store.postgres_rows import PostgresRows

    with pg_schema() as url:
        writer, reader = PostgresRows(url), PostgresRows(url)
        try:
            p = make_pointer("http:a")
            assert writer.put_pointer(p, T0)
            got = writer.get_pointer("http:a")
            assert got == p and got is not None and got.card is p.card
            won = claim(writer, p)
            assert won is not None and won.state == "claimed" and won.card is p.card
            first = reader.get_pointer("http:a")  # another store: validated from its text, then kept
            assert first == won and first is not None and first.card is not p.card
            again = reader.get_pointer_by_card(p.card_id)
            assert again is not None and again.card is first.card
            writer._exec("UPDATE pointers SET state = %s WHERE chat = %s", ("bogus", "http:a"))
            for rows in (writer, reader):
                with pytest.raises(ValidationError):
                    rows.get_pointer("http:a")
        finally:
            writer.close()
            reader.close()


def test_r8_r20_dynamodb_items_share_the_card_and_check_the_columns() -> None:
    from chat_approvals.store.dynamodb_codec import _pointer_item, _to_pointer

    p = make_pointer("http:a")
    item = _pointer_item(p, "nonce-1")
    got = _to_pointer(item)
    assert got == p and got is not None and got.card is p.card
    # written elsewhere (another process's text of the same pointer): validated, then kept
    other = {**item, "doc": {"S": p.model_dump_json(indent=1)}}
    first, second = _to_pointer(other), _to_pointer(other)
    assert first == p and first is not None and first.card is not p.card
    assert second is not None and second.card is first.card
    with pytest.raises(ValidationError):
        _to_pointer({**item, "state": {"S": "bogus"}})
