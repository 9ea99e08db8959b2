"""The approval policy through the HTTP front end (issue 13), over real HTTP to the running server:
who may answer, quorum with votes, a veto, durations (`once` asks again, `1h` does not until the
clock moves), a deny reason that reaches the agent and the audit trail. R9, R10, R12, R14, R15."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from chat_approvals.bots.approvers import ApproverDirectory
from chat_approvals.core.agent.factory import user_factory
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.protocol.policy import parse_policy
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import Api, serve
from tests.support import mp_workers
from tests.support.agents import WORK_LOG_ENV, Counter, scripted_factory

POLICY = """\
[defaults]
approvers = "owner"
durations = ["once", "1h", "8h"]
default_duration = "8h"

[approvers]
http = ["sec-alice", "sec-bob", "sec-carol"]

[[rule]]
match = "*.corp.example.com"
approvers = "approvers"
quorum = 2

[[rule]]
match = "data.example.org"
approvers = "owner_or_approvers"

[[rule]]
match = "data.example"
approvers = "approvers"
quorum = 2
"""
CORP = "please fetch https://files.corp.example.com/report.csv"
DATA = "please fetch https://data.example.org/table.csv"
PLAIN = "please fetch https://example.com/x.csv"


def policy_approvals(store: StoreIO, clock: ManualClock, counter: Counter, text: str = POLICY) -> Approvals:
    policy = parse_policy(text)
    return bootstrap(
        store,
        clock=clock,
        agent_factory=scripted_factory(counter),
        policy=policy,
        approvers=ApproverDirectory(policy),
    ).approvals


@pytest.fixture
async def papi(store: StoreIO, clock: ManualClock, counter: Counter) -> AsyncIterator[Api]:
    server = await serve(policy_approvals(store, clock, counter))
    async with aiohttp.ClientSession() as session:
        yield Api(session, str(server.make_url("")).rstrip("/"))
    await server.close()


async def _card(api: Api, text: str, chat: str = "chat-1", user: str = "requester") -> dict:
    code, body = await api.turn(chat, user, text)
    assert code == 200 and body["status"] == "awaiting_approval", body
    return body["card"]


async def test_the_card_carries_who_may_answer_the_quorum_votes_and_durations(papi: Api) -> None:
    card = await _card(papi, CORP)
    assert (card["approvers"], card["quorum"], card["votes"]) == ("approvers", 2, [])
    assert card["durations"] == ["once", "1h", "8h"] and card["default_duration"] == "8h"
    plain = await _card(papi, PLAIN, chat="chat-2")
    assert (plain["approvers"], plain["quorum"]) == ("owner", 1)


async def test_r9_an_approver_who_is_not_the_requester_approves(papi: Api, store: StoreIO, clock: ManualClock) -> None:
    card = await _card(papi, DATA)
    code, body = await papi.resume(card["card_id"], "mallory", card["secret"])  # neither owner nor approver
    assert code == 403 and body["outcome"] == "forbidden"
    code, body = await papi.resume(card["card_id"], "sec-alice", card["secret"])
    assert code == 200 and body["outcome"] == "resumed" and body["answered_by"] == "sec-alice"
    assert body["answer"] == {"approved": True}
    grants = store.rows.list_grants("requester", "chat-1", clock.now())  # the grant is the requester's chat's
    assert [(g.name, g.expires_at - clock.now()) for g in grants] == [("data.example.org", 8 * 3600)]
    assert store.rows.list_grants("sec-alice", None, clock.now()) == []


async def test_r9_the_requester_is_refused_under_approvers_and_nothing_changes(papi: Api, store: StoreIO) -> None:
    card = await _card(papi, CORP)
    before = store.rows.get_pointer("chat-1")
    code, body = await papi.resume(card["card_id"], "requester", card["secret"])
    assert code == 403 and body["outcome"] == "forbidden"
    assert body["message"].startswith("An approver must answer this")
    code, body = await papi.resume(card["card_id"], "requester", card["secret"], approved=False)  # nor deny
    assert code == 403
    assert store.rows.get_pointer("chat-1") == before
    _, audit = await papi.get("/v1/chats/chat-1/audit")
    assert [e["kind"] for e in audit["events"]] == ["card_created", "refused_answer", "refused_answer"]


async def test_r10_quorum_two_votes_then_the_completing_vote_resumes_once(
    papi: Api, store: StoreIO, counter: Counter
) -> None:
    card = await _card(papi, CORP)
    code, body = await papi.resume(card["card_id"], "sec-alice", card["secret"], duration="1h")
    assert (code, body["outcome"], body["votes"], body["needed"]) == (202, "vote_recorded", ["sec-alice"], 2)
    assert counter.calls() == 1  # nothing resumed yet
    # the same person again counts once, and answers the same 202
    again = await papi.resume(card["card_id"], "sec-alice", card["secret"], duration="1h")
    assert again == (code, body)
    pointer = store.rows.get_pointer("chat-1")
    assert pointer is not None and pointer.state == "pending" and [v.user for v in pointer.votes] == ["sec-alice"]
    # the requester's next message gets the card back (a new secret, R19) with the votes so far
    code, again = await papi.turn("chat-1", "requester", CORP)
    assert again["status"] == "awaiting_approval" and again["card"]["votes"] == ["sec-alice"]
    card = again["card"]
    code, body = await papi.resume(card["card_id"], "sec-bob", card["secret"])
    assert code == 200 and body["outcome"] == "resumed" and body["answered_by"] == "sec-bob"
    assert body["answer"] == {"approved": True, "duration": "1h"}  # the shortest duration the voters chose
    assert counter.calls() == 2
    code, later = await papi.resume(card["card_id"], "sec-carol", card["secret"])
    assert code == 200 and later["outcome"] == "replayed" and later["result"] == body["result"]
    _, audit = await papi.get("/v1/chats/chat-1/audit")
    answered = [e for e in audit["events"] if e["kind"] == "answered"]
    assert answered[0]["detail"]["votes"] == ["sec-alice", "sec-bob"]
    assert [e["actor"] for e in audit["events"] if e["kind"] == "vote"] == ["sec-alice", "sec-bob"]


async def test_r10_two_approvers_racing_with_quorum_two_resume_once(papi: Api, counter: Counter) -> None:
    for n in range(8):
        card = await _card(papi, CORP, chat=f"race-{n}")
        before = counter.calls()
        (c1, b1), (c2, b2) = await asyncio.gather(
            papi.resume(card["card_id"], "sec-alice", card["secret"]),
            papi.resume(card["card_id"], "sec-bob", card["secret"]),
        )
        outcomes = sorted([b1["outcome"], b2["outcome"]])
        assert outcomes in (["resumed", "vote_recorded"], ["in_progress", "resumed"]), outcomes
        assert counter.calls() == before + 1  # the resumed run, once


async def test_a_deny_by_an_allowed_answerer_vetoes_with_its_reason(
    papi: Api, store: StoreIO, clock: ManualClock
) -> None:
    card = await _card(papi, CORP)
    code, _ = await papi.resume(card["card_id"], "sec-alice", card["secret"])
    assert code == 202
    why = "Not from\u0007 prod\ndata, please."
    code, body = await papi.resume(card["card_id"], "sec-bob", card["secret"], approved=False, reason=why)
    assert code == 200 and body["outcome"] == "resumed"
    assert body["answer"] == {"approved": False, "reason": "Not from prod data, please."}  # control characters gone
    # the agent got the approver's words, and the offline model tells the person in plain words
    assert body["result"]["text"].endswith(
        "you denied https://files.corp.example.com/report.csv (Not from prod data, please.)."
    )
    assert store.rows.list_grants("requester", "chat-1", clock.now()) == []
    _, audit = await papi.get("/v1/chats/chat-1/audit")
    answered = [e for e in audit["events"] if e["kind"] == "answered"]
    assert answered[0]["detail"]["reason"] == "Not from prod data, please." and answered[0]["actor"] == "sec-bob"


async def test_r14_once_asks_again_on_the_next_turn_while_1h_does_not_until_the_clock_moves(
    papi: Api, clock: ManualClock
) -> None:
    card = await _card(papi, PLAIN)
    code, body = await papi.resume(card["card_id"], "requester", card["secret"], duration="once")
    assert code == 200 and body["answer"]["duration"] == "once"
    assert body["result"]["status"] == "answered"
    _, grants = await papi.get("/v1/chats/chat-1/grants?user=requester")
    assert [g["name"] for g in grants["grants"]] == ["example.com"] and grants["grants"][0]["turn_id"]
    card = await _card(papi, PLAIN)  # the next turn asks again
    code, body = await papi.resume(card["card_id"], "requester", card["secret"], duration="1h")
    assert code == 200 and body["answer"]["duration"] == "1h"
    code, body = await papi.turn("chat-1", "requester", PLAIN)
    assert code == 200 and body["status"] == "answered" and "card" not in body  # approved for the hour
    clock.advance(3601)  # the clock moved, not slept
    await _card(papi, PLAIN)  # asks again


@pytest.mark.parametrize(
    "payload",
    [
        {"approved": True, "duration": "2h"},  # well-formed but not offered
        {"approved": True, "duration": "forever"},
        {"approved": True, "duration": 3600},
        {"approved": True, "reason": "yes"},  # a reason goes with a deny
        {"approved": False, "duration": "1h"},
        {"approved": False, "reason": "x" * 501},
        {"approved": False, "reason": ["no"]},
    ],
)
async def test_r15_a_bad_duration_or_reason_is_invalid_and_changes_nothing(
    papi: Api, store: StoreIO, payload: dict
) -> None:
    card = await _card(papi, PLAIN)
    before = store.rows.get_pointer("chat-1")
    body = {
        "user": "requester",
        "secret": card["secret"],
        "responses": [{"interruptId": card["card_id"], "status": "resolved", "payload": payload}],
    }
    code, _text = await papi.resume_raw(card["card_id"], body)
    assert code == 422
    assert store.rows.get_pointer("chat-1") == before
    code, ok = await papi.resume(card["card_id"], "requester", card["secret"])  # still answerable
    assert code == 200 and ok["outcome"] == "resumed"


async def test_a_reason_of_exactly_500_characters_is_kept(papi: Api) -> None:
    card = await _card(papi, PLAIN)
    code, body = await papi.resume(card["card_id"], "requester", card["secret"], approved=False, reason="y" * 500)
    assert code == 200 and body["answer"]["reason"] == "y" * 500


@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_r10_two_approvers_in_two_processes_on_one_store_resume_once(tmp_path: Path) -> None:
    db, objects, log = tmp_path / "a.db", tmp_path / "objects", tmp_path / "work.log"
    for n in range(3):
        a_root = bootstrap(
            StoreIO(SqliteRows(db), FileObjects(objects)),
            agent_factory=user_factory("tests.support.agents:work_agent"),
            policy=parse_policy(POLICY),
        )
        a = a_root.approvals
        chat = f"chat-mp-{n}"
        turn = asyncio.run(a.run_turn(chat=chat, user="requester", text="go", platform="http"))
        a_root.close()
        assert turn.offer is not None and turn.offer.card.policy is not None and turn.offer.card.policy.quorum == 2
        ctx = mp.get_context("spawn")
        with ctx.Manager() as manager:
            barrier = manager.Barrier(2)
            with ctx.Pool(2) as pool:
                jobs = [
                    pool.apply_async(
                        mp_workers.vote,
                        (
                            str(db),
                            str(objects),
                            turn.offer.card.card_id,
                            turn.offer.secret,
                            who,
                            POLICY,
                            barrier,
                            {WORK_LOG_ENV: str(log)},
                        ),
                    )
                    for who in ("sec-alice", "sec-bob")
                ]
                outcomes = sorted(job.get(timeout=120) for job in jobs)
        assert outcomes in (["resumed", "vote_recorded"], ["in_progress", "resumed"]), outcomes
        assert len(log.read_text().splitlines()) == n + 1  # the post-approval work ran once per card
        pointer = SqliteRows(db).get_pointer(chat)
        assert pointer is not None and pointer.state == "done" and pointer.claim_count == 1
        assert sorted(v.user for v in pointer.votes) == ["sec-alice", "sec-bob"]
