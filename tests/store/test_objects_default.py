"""Where objects go when --objects is not given (issue 12): on the embedded SQLite store, in that
same file, so a step's snapshot, pointer and audit commit together; a folder an earlier version
filled (var/objects) is kept, because its open cards' snapshots live there."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from chat_approvals.bots.config import LEGACY_OBJECTS, ServerConfig
from chat_approvals.bots.server import open_root
from chat_approvals.core.agent.factory import default_factory
from chat_approvals.core.models import Answer

TEXT = "please fetch https://data.example.org/table.csv"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working folder, with no CHAT_APPROVALS_* store settings from outside."""
    monkeypatch.chdir(tmp_path)
    for name in ("CHAT_APPROVALS_STORE", "CHAT_APPROVALS_OBJECTS"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "var").mkdir()
    return tmp_path


async def _one_cycle(cfg: ServerConfig) -> None:
    root = open_root(cfg, factory=default_factory("scripted"))
    approvals = root.approvals
    try:
        turn = await approvals.run_turn(chat="c1", user="u1", text=TEXT, platform="http")
        assert turn.offer is not None
        res = await approvals.resume(
            card_id=turn.offer.card.card_id, user="u1", secret=turn.offer.secret, answer=Answer(approved=True)
        )
        assert res.outcome == "resumed"
    finally:
        root.close()


def _objects_in_db(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM objects").fetchone()[0])


async def test_a_fresh_embedded_store_keeps_its_objects_in_its_own_file(here: Path) -> None:
    cfg = ServerConfig()
    assert cfg.objects_url() == cfg.store == "sqlite:///var/approvals.db"
    await _one_cycle(cfg)
    assert _objects_in_db(here / "var" / "approvals.db") >= 2  # the snapshot and the answer at least
    assert not (here / LEGACY_OBJECTS).exists()


async def test_a_folder_an_earlier_version_filled_is_kept(here: Path) -> None:
    old = here / LEGACY_OBJECTS / "snapshots"
    old.mkdir(parents=True)
    (old / "open-card.json").write_bytes(b"{}")  # an open card's snapshot from before the upgrade
    cfg = ServerConfig()
    assert cfg.objects_url() == LEGACY_OBJECTS
    await _one_cycle(cfg)
    written = [p for p in (here / LEGACY_OBJECTS).rglob("*") if p.is_file()]
    assert len(written) > 1  # this cycle's objects went to the folder too


def test_an_empty_legacy_folder_does_not_hold_the_default_back(here: Path) -> None:
    (here / LEGACY_OBJECTS).mkdir()
    assert ServerConfig().objects_url() == "sqlite:///var/approvals.db"


def test_a_given_objects_url_wins_and_other_stores_keep_the_folder(here: Path) -> None:
    assert ServerConfig(objects="/srv/objects").objects_url() == "/srv/objects"
    dynamo = ServerConfig(store="dynamodb://t?region=us-east-1")
    assert dynamo.objects_url() == LEGACY_OBJECTS
