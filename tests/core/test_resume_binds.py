"""A tool card resumes only the call its stored run holds (binds(), card_kinds.py), whether the
Agent is held in this process or built from the stored snapshot: a failed check refuses and runs
nothing (R9), so what runs is the call the approver read on the card (R22). A held Agent's snapshot
bytes are read only for a card that shows a call (issue 34: the rest need not decode them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import chat_approvals.core.protocol.resume_run as resume_run
from chat_approvals.core.bootstrap import bootstrap
from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Claimed, ClaimWrite
from chat_approvals.core.protocol.resume_checks import NOT_BOUND
from chat_approvals.core.settings import Settings
from chat_approvals.store.aio import StoreIO
from chat_approvals.store.file_objects import FileObjects
from chat_approvals.store.sqlite_rows import SqliteRows
from tests.conftest import click
from tests.support.agents import Counter, notes_agent, saved_notes, scripted_factory

NOTE = "save a note: hello"
FETCH = "please fetch https://data.example.org/table.csv"


class OtherCall(SqliteRows):
    """A store whose won claim hands back the card with another call's fingerprint: the card the
    pointer shows is not the call the stored run holds (what binds() refuses)."""

    def claim_grants(self, w: ClaimWrite) -> Claimed | None:
        won = super().claim_grants(w)
        if won is None or won.pointer.card.tool is None:
            return won
        card = won.pointer.card
        other = card.model_copy(update={"tool": card.tool.model_copy(update={"fingerprint": "0" * 64})})
        return dataclasses.replace(won, pointer=won.pointer.model_copy(update={"card": other}))


@pytest.mark.parametrize("held", [128, 0], ids=["held", "from the store"])
async def test_a_tool_card_that_is_not_the_stored_call_runs_nothing(tmp_path: Path, held: int) -> None:
    clock = ManualClock()
    io = StoreIO(OtherCall(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"), clock=clock))
    notes = tmp_path / "notes"
    try:
        a = bootstrap(
            io, settings=Settings(), clock=clock, agent_factory=notes_agent(notes), held_agents=held
        ).approvals
        turn = await a.run_turn(chat="c1", user="u", text=NOTE, platform="http")
        assert turn.offer is not None and turn.offer.card.tool is not None, turn
        assert (len(a.resumes.paused) == 1) == bool(held)
        res = await click(a, turn.offer)
        assert res.outcome == "expired" and res.message == NOT_BOUND, res
        assert saved_notes(notes) == []  # the gated call never ran
    finally:
        io.close()


async def test_a_held_agent_reads_its_snapshot_only_for_a_card_that_shows_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[int] = []
    real = resume_run.decode_doc

    def counted(raw: bytes) -> object:
        decoded.append(len(raw))
        return real(raw)

    monkeypatch.setattr(resume_run, "decode_doc", counted)
    clock = ManualClock()
    io = StoreIO(SqliteRows(str(tmp_path / "rows.db")), FileObjects(str(tmp_path / "o"), clock=clock))
    try:
        sites = bootstrap(io, settings=Settings(), clock=clock, agent_factory=scripted_factory(Counter())).approvals
        turn = await sites.run_turn(chat="c1", user="u", text=FETCH, platform="http")
        assert turn.offer is not None and turn.offer.card.tool is None
        res = await click(sites, turn.offer)
        assert res.outcome == "resumed" and sites.resumes.paused.hits == 1
        assert decoded == []  # a site card binds to no call: the held bytes were not decoded
        tools = bootstrap(io, settings=Settings(), clock=clock, agent_factory=notes_agent(tmp_path / "notes")).approvals
        turn = await tools.run_turn(chat="c2", user="u", text=NOTE, platform="http")
        assert turn.offer is not None and turn.offer.card.tool is not None
        res = await click(tools, turn.offer)
        assert res.outcome == "resumed" and tools.resumes.paused.hits == 1
        assert len(decoded) == 1  # a tool card's held bytes are checked against the card
    finally:
        io.close()
