"""The approval tool and the batch rule, driven by deterministic test models (R2-R6, R16)."""

from __future__ import annotations

from typing import Any

from strands import tool

import chat_approvals.core.protocol.wording as wording
from chat_approvals.core.agent.approval_tool import own_interrupt_answered, request_approval
from chat_approvals.core.agent.batch_rule import ALONE, MERGED, decide_batch
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Grant, Refusal
from chat_approvals.store.aio import StoreIO
from tests.conftest import click, make_approvals
from tests.support.agents import Counter, policy_factory, results_of, text_of


def ask(**inp: Any) -> dict[str, Any]:
    return {"name": "request_approval", "input": {"reason": "need data", **inp}}


def ask_then_echo(first: list[dict[str, Any]]):
    """Call the given tools once, then answer with the text of every tool result."""

    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", first
        return " | ".join(f"{r['status']}:{text_of(r)}" for r in results), []

    return policy


def approvals_for(store: StoreIO, clock: ManualClock, policy: Any, counter: Counter | None = None, tools=None):
    return make_approvals(store, clock, policy_factory(policy, counter, tools))


async def test_r3_empty_request_is_an_input_error_never_already_approved(store: StoreIO, clock: ManualClock) -> None:
    a = approvals_for(store, clock, ask_then_echo([ask()]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.status == "answered"
    assert turn.text == f"error:{wording.NOTHING_NAMED}"
    assert "Already approved" not in turn.text
    assert store.rows.get_pointer("c") is None


async def test_r3_merges_hosts_the_sandbox_refused_this_turn(store: StoreIO, clock: ManualClock) -> None:
    """A call with only a reason asks for what the gate refused in this turn, and only this turn."""

    # The gate writes refusals keyed by the turn; record them as the gate does (through the access
    # the tools get, the grant book), from the tool call.
    @tool(context=True)
    async def blocked_script_ctx(tool_context) -> str:
        """Pretend to run a script the gate refuses."""
        from chat_approvals.core.agent.context import context_of, tool_access_of

        ctx, access = context_of(tool_context.invocation_state), tool_access_of(tool_context.invocation_state)
        assert ctx is not None and access is not None
        await access.record_refusal(
            Refusal(
                chat=ctx.chat,
                turn_id=ctx.turn_id,
                kind="site",
                name="mirror.example",
                url="https://mirror.example/f",
                at=clock.now(),
            )
        )
        await access.record_refusal(
            Refusal(chat=ctx.chat, turn_id="another-turn", kind="site", name="stale.example", at=clock.now())
        )
        return "blocked: mirror.example"

    def policy2(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [{"name": "blocked_script_ctx", "input": {}}]
        if len(results) == 1:
            return "", [ask(urls=["https://named.example/a"])]
        return "done", []

    a = approvals_for(store, clock, policy2, tools=[blocked_script_ctx])
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    assert turn.offer.card.sites == ["named.example", "mirror.example"]
    assert turn.offer.card.urls == ["https://named.example/a", "https://mirror.example/f"]


def grant_old_example(store: StoreIO, clock: ManualClock, chat: str) -> None:
    grant = Grant(
        user="u", chat=chat, kind="site", name="old.example", card_id="c_x", created_at=0, expires_at=clock.now() + 60
    )
    store.rows.put_grant(grant, clock.now() + 120)


async def test_r3_drops_what_is_already_approved(store: StoreIO, clock: ManualClock) -> None:
    grant_old_example(store, clock, "c")
    a = approvals_for(store, clock, ask_then_echo([ask(urls=["https://old.example/a", "https://new.example/b"])]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.sites == ["new.example"]
    assert turn.offer.card.urls == ["https://new.example/b"]
    # Everything named already approved: say so (the request was not empty), and ask nothing.
    grant_old_example(store, clock, "c3")
    a2 = approvals_for(store, clock, ask_then_echo([ask(urls=["https://old.example/z"])]))
    turn2 = await a2.run_turn(chat="c3", user="u", text="go", platform="http")
    assert turn2.status == "answered"
    assert turn2.text == "success:" + wording.already_approved(["old.example"], [])
    assert store.rows.get_pointer("c3") is None


async def test_r3_invalid_input_is_an_error_the_model_can_act_on(store: StoreIO, clock: ManualClock) -> None:
    for bad in [ask(urls=["ftp://x.example/a"]), ask(urls=["not a url"]), ask(packages=["bad name!"])]:
        a = approvals_for(store, clock, ask_then_echo([bad]))
        turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
        assert turn.status == "answered" and turn.text.startswith("error:Invalid approval request:"), turn.text
    assert store.rows.get_pointer("c") is None


async def test_r2_resumed_body_answers_only_from_the_stored_card(store: StoreIO, clock: ManualClock) -> None:
    """After the card, the world changes (a new refusal, a grant); the resumed body must not merge again."""
    a = approvals_for(store, clock, ask_then_echo([ask(urls=["https://a.example/1"])]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    pointer = store.rows.get_pointer("c")
    assert pointer is not None
    store.rows.record_refusal(
        Refusal(chat="c", turn_id=pointer.turn_id, kind="site", name="late.example", at=clock.now()), clock.now() + 60
    )
    res = await click(a, turn.offer, approved=True)
    assert res.result is not None
    assert res.result.text == "success:" + wording.user_approved(["a.example"], [], [])
    assert "late.example" not in res.result.text and "Already approved" not in res.result.text
    # And after a deny it reports the deny, not the opposite.
    turn = await a.run_turn(chat="d", user="u", text="go", platform="http")
    assert turn.offer is not None
    res = await click(a, turn.offer, approved=False)
    assert res.result is not None and res.result.text == "error:" + wording.user_denied(["a.example"], [])


async def test_r2_a_second_new_approval_in_the_same_turn_takes_the_normal_path(
    store: StoreIO, clock: ManualClock
) -> None:
    def policy(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        results = results_of(messages)
        if not results:
            return "", [ask(urls=["https://a.example/1"])]
        if len(results) == 1:
            return "", [ask(urls=["https://a.example/2", "https://b.example/3"])]  # a.example is approved now
        return " | ".join(text_of(r) for r in results), []

    a = approvals_for(store, clock, policy)
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    res = await click(a, turn.offer, approved=True)
    assert res.result is not None and res.result.offer is not None
    assert res.result.offer.card.sites == ["b.example"]  # validated and merged afresh, approved host dropped


def test_r2_unreadable_interrupt_state_assumes_the_card_is_this_calls() -> None:
    class Opaque:
        tool_use = {"toolUseId": "t1"}

        def _interrupt_id(self, name: str) -> str:
            raise AttributeError("no such internals")

    assert own_interrupt_answered(Opaque()) is True  # type: ignore[arg-type]


async def test_r4_identity_is_never_an_argument(store: StoreIO, clock: ManualClock) -> None:
    props = set(request_approval.tool_spec["inputSchema"]["json"]["properties"])
    assert props == {"reason", "urls", "packages"}
    # A model that tries to name another user is ignored: the owner is the turn's user.
    a = approvals_for(store, clock, ask_then_echo([ask(urls=["https://a.example/1"], user="mallory")]))
    turn = await a.run_turn(chat="c", user="alice", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.owner == "alice"
    pointer = store.rows.get_pointer("c")
    assert pointer is not None and pointer.owner == "alice"
    res = await click(a, turn.offer, user="mallory")
    assert res.outcome == "forbidden" and res.owner == "alice"


async def test_r5_approval_runs_alone_in_its_batch(store: StoreIO, clock: ManualClock) -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: recipient
        """
        ran.append(to)
        return "sent"

    batch = [
        {"name": "send_email", "input": {"to": "x@example.com"}},
        ask(urls=["https://a.example/1"]),
        ask(urls=["https://b.example/2"]),
    ]
    a = approvals_for(store, clock, ask_then_echo(batch), tools=[send_email])
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.sites == ["a.example"]
    assert ran == []  # cancelled before it could run, even with the concurrent executor
    res = await click(a, turn.offer, approved=False)
    assert ran == []  # and not run after the answer either
    assert res.result is not None
    assert f"error:{ALONE}" in res.result.text and f"error:{MERGED}" in res.result.text


def test_r5_the_decision_is_a_pure_function_of_the_message() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"text": "thinking"},
            {"toolUse": {"toolUseId": "t1", "name": "run_script", "input": {}}},
            {"toolUse": {"toolUseId": "t2", "name": "request_approval", "input": {}}},
            {"toolUse": {"toolUseId": "t3", "name": "request_approval", "input": {}}},
        ],
    }
    first = decide_batch(message)
    assert first == {"t1": ALONE, "t3": MERGED}
    assert decide_batch(message) == first
    assert (
        decide_batch({"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "x", "input": {}}}]})
        == {}
    )


async def test_r6_unattended_deny_is_deterministic_and_names_what_was_blocked(
    store: StoreIO, clock: ManualClock
) -> None:
    a = approvals_for(store, clock, ask_then_echo([ask(urls=["https://a.example/1"], packages=["Requests"])]))
    texts = {
        (await a.run_turn(chat=f"c{i}", user="u", text="go", platform="http", unattended=True)).text for i in range(3)
    }
    assert texts == {"error:" + wording.unattended_deny(["a.example"], ["requests"])}
    assert all(store.rows.get_pointer(f"c{i}") is None for i in range(3))


def test_r16_deny_wording_names_what_was_blocked_and_gives_a_path() -> None:
    for text in [wording.user_denied(["a.example"], ["numpy"]), wording.unattended_deny(["a.example"], ["numpy"])]:
        assert "a.example" in text and "numpy" in text
        assert text.endswith("Continue without that data and say so.")


async def test_r15_partial_package_approval_grants_only_the_chosen(store: StoreIO, clock: ManualClock) -> None:
    a = approvals_for(store, clock, ask_then_echo([ask(packages=["numpy", "pandas"])]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None and turn.offer.card.packages == ["numpy", "pandas"]
    res = await click(a, turn.offer, approved=True, packages=["pandas"])
    assert [(g.kind, g.name) for g in store.rows.list_grants("u", "c", clock.now())] == [("package", "pandas")]
    assert res.result is not None and "Not approved: package numpy" in res.result.text
