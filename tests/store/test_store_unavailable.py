"""One error from the core for "the store is unavailable" (`core.models.StoreUnavailable`, which
every backend's StoreError is), mapped once per front end: HTTP 503, a Slack message (an
ephemeral on a click), a Teams card (a 503 invoke error on a click). The card stays answerable
and nothing is changed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import BadObject, StoreFault, StoreUnavailable
from chat_approvals.core.protocol.wording import STORE_UNAVAILABLE
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.base import CorruptObject, ObjectExists, RowStore, StoreError
from chat_approvals.store.file_objects import FileObjects
from tests.conftest import Api
from tests.support.slack_rig import SlackRig
from tests.teams.harness import Bot, MockConnector, card_data

URL_TEXT = "please fetch https://data.example.org/table.csv"
READS = ("get_pointer_by_card", "get_pointer", "take_turn", "claim_event", "list_grants")


@contextmanager
def store_down(rows: RowStore) -> Iterator[None]:
    """Every call a turn or a click starts with fails as a backend fault does after its retries."""

    def fail(*_: object, **__: object) -> Any:
        raise StoreError("injected: the table is unreachable")

    saved = {name: rows.__dict__.get(name) for name in READS}
    for name in READS:
        setattr(rows, name, fail)
    try:
        yield
    finally:
        for name, was in saved.items():
            if was is None:
                delattr(rows, name)
            else:
                setattr(rows, name, was)


def test_backend_faults_are_the_core_error() -> None:
    assert issubclass(StoreError, StoreUnavailable)


def test_a_corrupt_or_duplicate_object_is_its_own_error_not_an_outage() -> None:
    for bad in (CorruptObject, ObjectExists):
        assert issubclass(bad, BadObject) and issubclass(bad, StoreFault)
        assert not issubclass(bad, StoreUnavailable), bad  # retrying reads the same bytes


async def test_http_answers_a_corrupt_object_as_a_store_fault(api: Api, store: StoreIO) -> None:
    """A corrupt answer object (read by a replay) is a BadObject, and the front end answers it
    as it answers any store fault: a 503 that says so, never a 500."""
    code, body = await api.turn("chat-1", "alice", URL_TEXT)
    card = body["card"]
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed"
    p = store.rows.get_pointer_by_card(card["card_id"])
    assert p is not None and p.answer_key and isinstance(store.objects, FileObjects)
    answer = store.objects.root / p.answer_key
    answer.write_bytes(answer.read_bytes() + b" ")  # the bytes no longer match their checksum
    with pytest.raises(CorruptObject):
        store.objects.get_key(p.answer_key)
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert (code, body["outcome"]) == (503, "unavailable") and "checksum mismatch" in body["message"]


async def test_http_maps_a_store_fault_to_503_and_changes_nothing(api: Api, store: StoreIO) -> None:
    code, body = await api.turn("chat-1", "alice", URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval"
    card = body["card"]
    before = store.rows.get_pointer("chat-1")
    with store_down(store.rows):
        code, turn = await api.turn("chat-2", "alice", "hello")
        code2, resumed = await api.resume(card["card_id"], "alice", card["secret"])
    assert (code, turn["status"]) == (503, "unavailable")
    assert (code2, resumed["outcome"]) == (503, "unavailable")
    assert store.rows.get_pointer("chat-1") == before  # still answerable
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed"


async def test_slack_says_so_in_the_thread_and_to_the_clicker() -> None:
    rig = await SlackRig().start()
    try:
        await rig.dm("download <https://example.org/a.csv>")
        await rig.standin.wait_for(lambda s: len(rig.card_calls()) >= 1)
        await rig.settle()
        card = rig.card_calls()[-1]
        with store_down(rig.store.rows):
            assert (await rig.click(rig.click_payload(card)))[0] == 200
            await rig.settle()
            await rig.standin.wait_for(lambda s: len(s.of("chat.postEphemeral")) >= 1)
            assert (await rig.dm("hello again"))[0] == 200
            await rig.standin.wait_for(
                lambda s: any(STORE_UNAVAILABLE in str(c.args) for c in s.of("chat.postMessage"))
            )
            await rig.settle()
        (told,) = rig.standin.of("chat.postEphemeral")
        assert STORE_UNAVAILABLE in json.dumps(told.args)
        assert not rig.standin.of("chat.update")  # the card was not touched
        status, _ = await rig.click(rig.click_payload(card))  # and is still answerable
        await rig.settle()
        await rig.standin.wait_for(lambda s: len(s.of("chat.update")) >= 1)
    finally:
        await rig.stop()


async def test_teams_answers_a_card_on_a_message_and_503_on_a_click(tmp_path: Path) -> None:
    mock = MockConnector()
    server = TestServer(mock.app(), host="127.0.0.1")
    await server.start_server()
    try:
        async with Bot(tmp_path / "store", ManualClock(), str(server.make_url("/_connector"))) as bot:
            assert (await bot.say(URL_TEXT))[0] == 201
            card = mock.posts()[-1]["body"]["attachments"][0]["content"]
            rows = bot.store.rows
            before = rows.get_pointer_by_card(card_data(card)["card_id"])
            with store_down(rows):
                status, body = await bot.click("approve", card_data(card))
                said, _ = await bot.say("hello")
            assert body["statusCode"] == 503 and body["value"]["message"] == STORE_UNAVAILABLE, body
            assert said < 500
            assert STORE_UNAVAILABLE in json.dumps(mock.posts()[-1]["body"])
            assert rows.get_pointer_by_card(card_data(card)["card_id"]) == before
            status, body = await bot.click("approve", card_data(card))
            assert status == 200 and body["statusCode"] == 200
    finally:
        await server.close()
