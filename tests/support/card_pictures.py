"""The Slack card picture: a real download card (and a tool card) from cards/slack_blocks.py, drawn
by tests/support/blockkit_html.py and screenshotted in headless Chromium (Debian's /usr/bin/chromium).

    python -m tests.support.card_pictures OUT.png [--tool]

Run by scripts/card-pictures (which also makes the Teams picture) and by tests/cards/test_card_pictures.py.
"""

from __future__ import annotations

import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from chat_approvals.cards.slack_blocks import card_message
from chat_approvals.cards.slack_chat import chat_key
from chat_approvals.core.models import ApprovalCard, CardPolicy, ToolCall
from tests.support.blockkit_html import Names, render_page

CHROMIUM = os.environ.get("TEAMS_CHROMIUM", "/usr/bin/chromium")
WIDTH = 680  # the message is 640 px at most; the page is measured, then shot at its own height
NAMES = Names(users={"U0ALEX": "Alex Wilber"}, channels={"C0APPROVERS": "approvers"})
CREATED = 1_767_261_600.0  # 2026-01-01 10:00 UTC: a fixed time, so the picture only changes with the cards
SECRET = "s" * 43  # never shown: it only goes into the buttons' values


def download_card() -> ApprovalCard:
    """What the agent asks for in the README's tour: a site, its URL and two packages, under a
    policy that offers durations (so the card shows every input a download card has)."""
    return ApprovalCard(
        card_id="c_7Hq2xKpL0aVb3nRt9sWd1e",
        chat=chat_key("T0APPROV1", "D0ALEX", "1767261590.000100"),
        owner="slack:E0:T0APPROV1:U0ALEX",
        platform="slack",
        reason="load the quarterly sales table and chart it",
        sites=["data.example.org"],
        urls=["https://data.example.org/sales/2025-q4.csv"],
        packages=["pandas", "matplotlib"],
        created_at=CREATED,
        expires_at=CREATED + 1800,
        policy=CardPolicy(durations=["once", "1h", "1d"], default_duration="1h"),
    )


def download_card_with(**changes: Any) -> ApprovalCard:
    """The tour's download card without its policy, with `changes`: a variant with a test's own inputs."""
    return ApprovalCard(**{**download_card().model_dump(exclude={"policy"}), **changes})


def tool_card() -> ApprovalCard:
    """A gated tool call (`--confirm-tools save_note`)."""
    return ApprovalCard(
        card_id="c_Zp4mW8cQ2rTy6uLk1vXa0b",
        chat=chat_key("T0APPROV1", "D0ALEX", "1767261590.000100"),
        owner="slack:E0:T0APPROV1:U0ALEX",
        platform="slack",
        reason="",
        sites=[],
        urls=[],
        packages=[],
        created_at=CREATED,
        expires_at=CREATED + 1800,
        kind="tool",
        tool=ToolCall(name="save_note", input={"text": "ship the Q4 report on Friday"}, fingerprint="9f2c" * 16),
    )


def card_blocks(card: ApprovalCard) -> list[dict[str, Any]]:
    """The blocks exactly as the bot posts them (validated by slack_sdk's models)."""
    blocks: list[dict[str, Any]] = card_message(card, SECRET).block_dicts()
    return blocks


def card_page(card: ApprovalCard) -> str:
    return render_page(card_blocks(card), names=NAMES, at="10:00 AM")


# ----------------------------------------------------------------------------- Chromium

# Measures the message and writes its size into the DOM, which --dump-dom prints.
MEASURE = (
    "<script>const r=document.getElementById('card').getBoundingClientRect();"
    "document.body.setAttribute('data-size', Math.ceil(r.right)+'x'+Math.ceil(r.bottom));</script>"
)


def _chromium(args: list[str], timeout: float = 60) -> str:
    """One headless Chromium run in a throwaway profile; nothing leaves the machine."""
    with tempfile.TemporaryDirectory(prefix="card-pictures-") as profile:
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--force-device-scale-factor=1",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"chromium exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def screenshot(page: str, out: Path) -> tuple[int, int]:
    """Shoot `page` cropped to its message: measure it first (--dump-dom), then shoot at that size."""
    with tempfile.TemporaryDirectory(prefix="card-page-") as tmp:
        src = Path(tmp) / "card.html"
        src.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
        dom = _chromium([f"--window-size={WIDTH},2000", "--dump-dom", src.as_uri()])
        found = re.search(r'data-size="(\d+)x(\d+)"', dom)
        if found is None:
            raise RuntimeError("chromium did not measure the card page")
        width, height = int(found.group(1)), int(found.group(2))
        out.parent.mkdir(parents=True, exist_ok=True)
        shot = Path(tmp) / "shot.png"
        _chromium([f"--window-size={width},{height}", f"--screenshot={shot}", src.as_uri()])
        out.write_bytes(shot.read_bytes())
    return png_size(out)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk; ValueError if it is not a PNG."""
    head = path.read_bytes()[:24]
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Picture a Slack approval card, rendered from its Block Kit JSON.")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--tool", action="store_true", help="the tool card instead of the download card")
    parser.add_argument("--html", type=Path, help="also write the HTML page here")
    args = parser.parse_args(argv)
    page = card_page(tool_card() if args.tool else download_card())
    if args.html:
        args.html.write_text(page, encoding="utf-8")
    width, height = screenshot(page, args.out)
    print(f"{args.out}: {width}x{height}, {args.out.stat().st_size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
