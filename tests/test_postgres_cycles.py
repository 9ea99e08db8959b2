"""Full cycles on PostgreSQL (issue 30): the HTTP front end with grants, chained cards and replay;
votes with a quorum; the audit outbox; the Slack and Teams front ends; webhooks from a served
process; `audit --all`; Slack installations (issue 31). The tests are the existing ones, imported
here and run with this file's `store`, `rig`, `bot` and `root` fixtures, which put rows and objects
in a fresh PostgreSQL schema. Tool grants: tests/test_postgres_tools.py (its own `api` fixture).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from chat_approvals.bots.cli import main
from chat_approvals.bots.webhooks import verify
from chat_approvals.core.bootstrap import Root, bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.postgres_objects import PostgresObjects
from chat_approvals.store.postgres_rows import PostgresRows
from tests.bots.test_http_api import (
    test_audit_trail_records_who_did_what,  # noqa: F401
    test_r12_done_replays_the_stored_result_byte_for_byte,  # noqa: F401 - collected here, on PostgreSQL
    test_r13_chained_card_replaces_the_open_request_in_place,  # noqa: F401
    test_r14_approve_writes_grants_for_this_chat_only_and_they_can_be_revoked,  # noqa: F401
    test_r14_deny_removes_stored_rows_for_what_it_names,  # noqa: F401
)
from tests.bots.test_operating_processes import URL_TEXT, WEBHOOK_SECRET, Receiver, serving
from tests.bots.test_policy_http import (
    papi,  # noqa: F401 - the fixture of the imported tests
    test_r10_quorum_two_votes_then_the_completing_vote_resumes_once,  # noqa: F401
    test_r10_two_approvers_racing_with_quorum_two_resume_once,  # noqa: F401
)
from tests.bots.test_slack_commands import approve, names
from tests.bots.test_slack_http import (
    test_r9_r12_dm_card_click_resume_update_reply_in_thread,  # noqa: F401
    test_r10_twenty_concurrent_signed_clicks_resume_once,  # noqa: F401
)
from tests.bots.test_slack_install import (
    test_an_org_wide_install_answers_for_every_workspace_of_its_enterprise,  # noqa: F401
    test_the_key_is_rotated_by_putting_the_new_one_first,  # noqa: F401
)
from tests.core.test_audit_trail import (
    test_every_event_of_a_turn_and_its_answer_has_an_outbox_item_per_sink_in_order,  # noqa: F401
)
from tests.support.agents import Counter, scripted_factory
from tests.support.serve_process import free_port
from tests.support.slack_rig import SlackRig, open_root, running
from tests.support.store_backends import pg_schema
from tests.teams.conftest import connector  # noqa: F401 - the fixture of the imported Teams tests
from tests.teams.harness import Bot, MockConnector
from tests.teams.test_teams_bot import (
    test_r9_r12_execute_resumes_once_and_replaces_card,  # noqa: F401
    test_r15_deny_grants_nothing,  # noqa: F401
)


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema() as url:
        yield url


@pytest.fixture
def store(pg_url: str, clock: ManualClock) -> Iterator[StoreIO]:
    rows = PostgresRows(pg_url)
    io = StoreIO(rows, PostgresObjects(rows, clock))
    yield io
    io.close()


@pytest.fixture
def root(tmp_path: Path, pg_url: str) -> Iterator[Root[StoreIO]]:
    """The Slack installation tests' root (issue 31), on PostgreSQL."""
    r = open_root(tmp_path, ManualClock(1_800_000_000.0), store=pg_url)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
async def rig(pg_url: str) -> AsyncIterator[SlackRig]:
    async with running(SlackRig(store=pg_url)) as r:
        yield r


@pytest.fixture
async def bot(
    tmp_path: Path,
    clock: ManualClock,
    connector: tuple[MockConnector, str],  # noqa: F811 - the imported fixture
    pg_url: str,
) -> AsyncIterator[Bot]:
    async with Bot(tmp_path / "store", clock, connector[1], store=pg_url) as b:
        yield b


async def test_r14_slack_grants_listed_and_revoked_on_postgres(rig: SlackRig) -> None:
    await approve(rig, "https://example.org/a.csv")
    await approve(rig, "https://other.org/c.csv")
    assert await names(rig) == ["example.org", "other.org"]
    assert await rig.command("revoke example.org") == (200, "")
    await rig.settle()
    assert await names(rig) == ["other.org"]


def test_audit_all_exports_every_chat_from_postgres(
    pg_url: str, store: StoreIO, clock: ManualClock, counter: Counter, capsys: pytest.CaptureFixture[str]
) -> None:
    a = bootstrap(store, clock=clock, agent_factory=scripted_factory(counter)).approvals

    async def turns() -> None:
        for chat in ("c1", "c2"):
            turn = await a.run_turn(chat=chat, user="alice", text=URL_TEXT, platform="http")
            assert turn.offer is not None

    asyncio.run(turns())
    code = main(["audit", "--all", "--since", "0", "--format", "jsonl", "--store", pg_url])
    out = capsys.readouterr().out
    assert code == 0, out
    docs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert sorted({d["chat"] for d in docs}) == ["c1", "c2"]
    assert [d["kind"] for d in docs] == ["card_created", "card_created"]


@pytest.mark.slow
async def test_webhooks_from_a_served_process_on_postgres_get_every_event(tmp_path: Path, pg_url: str) -> None:
    port = free_port()
    hook = ["--audit-webhook", f"http://127.0.0.1:{port}/hook", "--audit-webhook-secret", WEBHOOK_SECRET]
    env = {"CHAT_APPROVALS_AUDIT_WEBHOOK_POLL": "0.2", "CHAT_APPROVALS_AUDIT_WEBHOOK_BACKOFF_CAP": "0.5"}
    receiver = Receiver(port, fail_first=1)
    await receiver.start()
    try:
        async with serving(tmp_path, *hook, env=env, store=pg_url) as (api, _):
            _, body = await api.turn("chat-1", "alice", URL_TEXT)
            card = body["card"]
            assert (await api.resume(card["card_id"], "alice", card["secret"]))[1]["outcome"] == "resumed"
            rows = PostgresRows(pg_url)
            want = rows.list_audit("chat-1")
            rows.close()
            deadline = time.monotonic() + 30
            while len({json.loads(b)["id"] for _, b in receiver.got}) < len(want) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
    finally:
        await receiver.close()
    by_id: dict[str, dict[str, object]] = {}
    for signature, body in receiver.got:
        assert verify(WEBHOOK_SECRET, body, signature)
        doc = json.loads(body)
        by_id.setdefault(str(doc["id"]), doc)
    assert [(d["kind"], d["at"]) for d in by_id.values()] == [(e.kind, e.at) for e in want]
