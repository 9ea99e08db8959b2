"""The README's card pictures (scripts/card-pictures): the Slack picture is drawn from the real
builders' Block Kit JSON by tests/support/blockkit_html.py. The renderer must drop nothing (every
text of every block is on the page, in order), refuse what it does not know, escape what the agent
and users wrote, and, where Chromium is present, give a PNG of a card's size."""

from __future__ import annotations

import html
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from chat_approvals.cards import slack_blocks as sb
from chat_approvals.core.models import Answer, CardPolicy, Grant, Question, Vote
from tests.support.blockkit_html import EMOJI, Names, UnsupportedBlock, mrkdwn, render_page
from tests.support.card_pictures import (
    CHROMIUM,
    NAMES,
    SECRET,
    card_blocks,
    card_page,
    download_card,
    png_size,
    screenshot,
    tool_card,
)

ROOT = Path(__file__).resolve().parents[2]
Blocks = list[dict[str, Any]]


class PageText(HTMLParser):
    """What a reader sees (text nodes, in order) and what the page keeps in `title` attributes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.seen: list[str] = []
        self.titles: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "title"):
            self._skip += 1
        self.titles += [v for k, v in attrs if k == "title" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "title"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.seen.append(data)


def words(text: str) -> str:
    """Letters and digits only, space-separated: markup, punctuation and emoji do not count."""
    return " " + " ".join(re.findall(r"[^\W_]+", text)) + " "


def as_read(text: str, kind: str) -> str:
    """How Slack shows a text object's words, derived here independently of the renderer."""
    if kind == "plain_text":
        return text
    text = re.sub(r"<!date\^[^|>]*\|([^>]*)>", r"\1", text)
    text = re.sub(r"<@(\w+)(?:\|[^>]*)?>", lambda m: "@" + NAMES.users.get(m.group(1), m.group(1)), text)
    text = re.sub(r"<#(\w+)(?:\|[^>]*)?>", lambda m: "#" + NAMES.channels.get(m.group(1), m.group(1)), text)
    text = re.sub(r"<[^|>]*\|([^>]*)>", r"\1", text)
    text = re.sub(r"<([^>]*)>", r"\1", text)
    text = re.sub(r":([a-z0-9_+-]+):", lambda m: "" if m.group(1) in EMOJI else m.group(0), text)  # a picture
    return html.unescape(text)


# The order a reader meets an object's parts in (a section's text before its fields and button).
READING_ORDER = ["text", "label", "fields", "elements", "element", "initial_option", "options", "accessory", "hint"]


def texts(node: Any, hidden: bool = False) -> list[tuple[str, str, bool]]:
    """Every text object in the blocks, in reading order: (type, text, shown only on a click). A
    confirm dialog and a select's list (and its placeholder, when an option is chosen) open on a
    click; checkboxes' `initial_options` repeat their options (they only tick them)."""
    found: list[tuple[str, str, bool]] = []
    if isinstance(node, list):
        for item in node:
            found += texts(item, hidden)
    elif isinstance(node, dict):
        if node.get("type") in ("plain_text", "mrkdwn") and isinstance(node.get("text"), str):
            return [(node["type"], node["text"], hidden)]
        select = node.get("type") == "static_select"
        rank = {k: i for i, k in enumerate(READING_ORDER)}
        for key in sorted(node, key=lambda k: rank.get(k, len(rank))):
            if key == "initial_options":
                continue
            opens = key == "confirm" or (select and key in ("options", "placeholder"))
            found += texts(node[key], hidden or opens)
    return found


def assert_every_text_on_page(blocks: Blocks) -> None:
    """Each text is on the page after the one before it (so a dropped text is not excused by the
    same words elsewhere); what opens on a click is in the page's `title` attributes."""
    page = PageText()
    page.feed(render_page(blocks, names=NAMES))
    seen, titles = words(" ".join(page.seen)), words(" ".join(page.titles))
    found = texts(blocks)
    assert found, "no text in the blocks"
    at = 0
    for kind, text, hidden in found:
        expected = words(as_read(text, kind))
        assert expected.strip(), text
        if hidden:
            assert expected in titles, f"missing from the page's titles: {text!r}"
            continue
        where = seen.find(expected, at)
        assert where >= 0, f"missing from the page (or out of order): {text!r}"
        at = where + len(expected) - 1


def messages() -> dict[str, sb.SlackMessage]:
    """The builders' messages, the README's card first: together they use every block type they emit."""
    card = download_card()
    question = download_card().model_copy(
        update={
            "kind": "question",
            "sites": [],
            "urls": [],
            "packages": [],
            "question": Question(name="deploy", reason={"env": "prod"}),
        }
    )
    quorum = card.model_copy(update={"policy": CardPolicy(approvers="approvers", quorum=2, durations=["1h"])})
    grant = Grant(
        user=card.owner,
        chat=card.chat,
        kind="site",
        name="data.example.org",
        created_at=1.0,
        expires_at=2e9,
        card_id=card.card_id,
    )
    return {
        "download": sb.card_message(card, SECRET),
        "download-routed-quorum": sb.card_message(
            quorum,
            SECRET,
            votes=[Vote(user=card.owner, at=1.0)],
            link="https://x.slack.com/archives/D0/p1",
            routed_to="C0APPROVERS",
        ),
        "tool": sb.card_message(tool_card(), SECRET),
        "question": sb.card_message(question, SECRET),
        "outcome": sb.outcome_message(card, Answer(approved=False, reason="not <now> & *never*"), card.owner, 1.8e9),
        "grants": sb.grants_message([grant], notice="Revoked `x`."),
        "help": sb.help_message(),
    }


@pytest.mark.parametrize("name", list(messages()))
def test_every_text_of_the_builders_blocks_is_on_the_page(name: str) -> None:
    assert_every_text_on_page(messages()[name].block_dicts())


def test_fields_and_dividers_are_drawn_too() -> None:
    """Block Kit the builders may use next (section fields, a divider, a button accessory)."""
    blocks: Blocks = [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": "*Top*"},
            "fields": [{"type": "mrkdwn", "text": "*Site*\nexample.org"}, {"type": "plain_text", "text": "Two hours"}],
            "accessory": {"type": "button", "text": {"type": "plain_text", "text": "Open"}, "action_id": "a"},
        },
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "plain_text", "text": "after the line"}]},
    ]
    assert_every_text_on_page(blocks)
    assert '<hr class="block divider">' in render_page(blocks)


def test_the_pictured_card_shows_its_inputs_and_styled_buttons() -> None:
    page = card_page(download_card())
    assert '<span class="button primary">Approve</span>' in page
    assert 'class="button danger" title="Deny this request? · The agent goes on without it.' in page
    assert page.count('<span class="box on">') == 2  # both packages ticked
    assert '<span class="select" title="How long: This turn only | 1 hour | 1 day"><span>1 hour</span>' in page
    assert '<div class="box-in multiline">' in page and "(optional)" in page
    assert "Answer by 2026-01-01 10:30 UTC" in page and "{date_short_pretty}" not in page


def test_the_agents_words_are_escaped() -> None:
    """The reason is the model's text: it must not become markup on the page, nor in Slack."""
    card = download_card().model_copy(update={"reason": '<img src=x onerror=alert(1)> "q" & <@U0EVIL> *b*'})
    page = render_page(card_blocks(card), names=NAMES)
    assert "<img" not in page and "onerror=alert(1)&gt;" in page
    assert "@U0EVIL" not in page.replace("&lt;@U0EVIL&gt;", "")  # shown as typed, not as a mention
    assert "<b>b</b>" in page  # the builders keep mrkdwn in a reason (escaping only Slack's &, <, >)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("*bold* and _it_ and ~gone~", "<b>bold</b> and <i>it</i> and <s>gone</s>"),
        ("a `x*y*z` b", "a <code>x*y*z</code> b"),
        ("save_note_now and 2*3*4", "save_note_now and 2*3*4"),
        ("<https://e.org/a?b=1&amp;c=2|the file>", '<span class="link">the file</span>'),
        ("<https://e.org/>", '<span class="link">https://e.org/</span>'),
        ("<!date^1800000000^{date_short_pretty}|2027-01-15 08:00 UTC>", "2027-01-15 08:00 UTC"),
        (
            "<@U0ALEX> in <#C0APPROVERS>",
            '<span class="mention">@Alex Wilber</span> in <span class="mention">#approvers</span>',
        ),
        ("```a\n<b> &amp; c```", "<pre>a\n&lt;b&gt; &amp; c</pre>"),
        ("unclosed ``` fence", "unclosed ``` fence"),
        ("1 &lt; 2\nnext", "1 &lt; 2<br>next"),
        (":white_check_mark: done :nope:", "\u2705 done :nope:"),
    ],
)
def test_mrkdwn_basics(text: str, shown: str) -> None:
    assert mrkdwn(text, NAMES) == shown


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "image", "image_url": "https://e.org/x.png", "alt_text": "x"}],
        [{"type": "rich_text", "elements": []}],
        [{"type": "actions", "elements": [{"type": "datepicker", "action_id": "d"}]}],
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}, "accessory": {"type": "image"}}],
        [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}, "expand": True}],
        [{"type": "header", "text": {"type": "mrkdwn", "text": "*x*"}}],
        [{"type": "context", "elements": [{"type": "mrkdwn", "text": "<!date^1800000000^{time}>"}]}],
        [
            {
                "type": "actions",
                "elements": [{"type": "button", "text": {"type": "plain_text", "text": "x"}, "style": "x"}],
            }
        ],
        [{"text": {"type": "plain_text", "text": "no type"}}],
    ],
    ids=[
        "image",
        "rich_text",
        "datepicker",
        "image-accessory",
        "unknown-key",
        "mrkdwn-header",
        "date-no-fallback",
        "style",
        "no-type",
    ],
)
def test_what_it_cannot_draw_is_refused(blocks: Blocks) -> None:
    with pytest.raises(UnsupportedBlock):
        render_page(blocks, names=Names())


def test_a_refused_block_stops_the_whole_card() -> None:
    """A card with one block it cannot draw gives no page at all, not a page without that block."""
    blocks = [*card_blocks(download_card()), {"type": "video", "title": {"type": "plain_text", "text": "x"}}]
    with pytest.raises(UnsupportedBlock, match="'video'"):
        render_page(blocks, names=NAMES)


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"no Chromium at {CHROMIUM}")
@pytest.mark.slow  # over 2 s in scripts/test's --durations
def test_the_screenshot_is_a_png_of_a_cards_size(tmp_path: Path) -> None:
    out = tmp_path / "slack-card.png"
    width, height = screenshot(card_page(download_card()), out)
    assert 500 <= width <= 700 and 400 <= height <= 1000, (width, height)
    assert 10_000 < out.stat().st_size < 200_000
    # taller when the card has more in it: the shot follows the page, not a fixed window
    _, shorter = screenshot(card_page(tool_card()), tmp_path / "tool.png")
    assert shorter < height


@pytest.mark.parametrize("name", ["slack-card.png", "teams-card.png"])
def test_the_committed_pictures_are_small_pngs(name: str) -> None:
    path = ROOT / "docs" / "img" / name
    width, height = png_size(path)
    assert 300 <= width <= 1400 and 200 <= height <= 1200, (width, height)
    assert path.stat().st_size < 150_000  # "a few tens of KB": a README picture, not a screen dump
