"""R11 with R20: an answer that cannot be stored after the claim releases the claim as a failure
the protocol already knows (the card denied and expired), over real HTTP to the running server;
never a held claim that the next click, after the lease, runs again (issue 27, finding 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import ObjectRef
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import Api, make_approvals, serve
from tests.support.agents import Counter, scripted_factory

URL_TEXT = "please fetch https://data.example.org/table.csv"


class AnswersRefused(FileObjects):
    """Real files, except that an answer document is refused as content (what an encoder raises)."""

    def put(self, key: str, data: bytes) -> ObjectRef:
        if key.startswith("answers/"):
            raise ValueError("cannot encode this answer")
        return super().put(key, data)


@pytest.fixture
async def refusing_api(tmp_path: Path, clock: ManualClock, counter: Counter) -> AsyncIterator[Api]:
    store = StoreIO(SqliteRows(tmp_path / "r.db"), AnswersRefused(tmp_path / "o", clock=clock))
    server = await serve(make_approvals(store, clock, scripted_factory(counter)))
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()
    store.close()


async def test_an_unstorable_answer_expires_the_card_and_no_click_runs_it_again(
    refusing_api: Api, clock: ManualClock, counter: Counter
) -> None:
    api = refusing_api
    code, body = await api.turn("chat-1", "alice", URL_TEXT)
    assert code == 200 and body["status"] == "awaiting_approval", body
    card = body["card"]
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert code == 410 and body["outcome"] == "expired", body
    ran = counter.calls
    clock.advance(3600)  # far past any lease: a held claim would be claimable again now
    code, body = await api.resume(card["card_id"], "alice", card["secret"])
    assert body["outcome"] == "expired", body
    assert counter.calls == ran  # nothing ran a second time
    code, body = await api.get("/v1/chats/chat-1/audit")
    kinds = [e["kind"] for e in body["events"]]
    assert kinds.count("claim_won") == 1 and kinds.count("expired") == 1, kinds
    code, body = await api.get("/v1/chats/chat-1/grants?user=alice")
    assert code == 200 and body["grants"] == [], body  # the approval's grants were taken back
