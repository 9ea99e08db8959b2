"""Block Kit -> a small static HTML page that looks like a Slack message, to picture a card.

Used only to make docs/img/slack-card.png (scripts/card-pictures) and by tests/cards/test_card_pictures.py;
it is not Slack's renderer and is not installed. It is strict on purpose: a block, element, text
object or key it does not know raises UnsupportedBlock, so a picture can never silently drop part of
a card. Every text is HTML-escaped (a card carries the agent's and users' words); links are drawn,
never made clickable. What Slack shows only on a click (a button's confirm dialog, a select's other
options) is kept in `title` attributes, so the page still holds every text of the blocks.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Json = dict[str, Any]


class UnsupportedBlock(ValueError):
    """A block, element or key this renderer does not draw: refuse rather than drop it."""


@dataclass(frozen=True)
class Names:
    """Display names for mentions: Slack shows `<@U123>` as "@Alex Wilber"; unknown ids show as "@U123"."""

    users: Mapping[str, str] = field(default_factory=dict)
    channels: Mapping[str, str] = field(default_factory=dict)


# Only the emoji the card builders use; any other `:name:` stays as typed.
EMOJI = {
    "hourglass": "\u231b",
    "hourglass_flowing_sand": "\u23f3",
    "no_entry": "\u26d4",
    "white_check_mark": "\u2705",
    "alarm_clock": "\u23f0",
    "arrow_down": "\u2b07\ufe0f",
    "lock": "\U0001f512",
    "ballot_box_with_ballot": "\u2611\ufe0f",
    "information_source": "\u2139\ufe0f",
    "grey_question": "\u2754",
    "warning": "\u26a0\ufe0f",
    "wastebasket": "\U0001f5d1\ufe0f",
}

STYLE = """
body { margin: 0; background: #fff; color: #1d1c1d;
  font: 15px/1.46668 "Lato", "Helvetica Neue", "Liberation Sans", "DejaVu Sans", Arial, sans-serif; }
#card { display: flex; gap: 8px; padding: 12px 20px 14px 16px; width: max-content; max-width: 640px; }
.avatar { flex: none; width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff;
  font-weight: 900; font-size: 15px; display: flex; align-items: center; justify-content: center; }
.content { min-width: 0; width: 580px; }
.meta { line-height: 22px; }
.meta .name { font-weight: 900; }
.meta .badge { font-size: 10px; font-weight: 700; color: #616061; background: #e8e8e8; border-radius: 2px;
  padding: 1px 3px; margin-left: 4px; vertical-align: 1px; }
.meta .time { color: #616061; font-size: 12px; margin-left: 6px; }
.block { margin: 4px 0; }
.header { font-size: 18px; font-weight: 900; line-height: 1.33; margin: 6px 0 4px; }
.section { display: flex; gap: 12px; align-items: flex-start; }
.section .text { flex: 1; overflow-wrap: anywhere; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin-top: 4px; }
.context { color: #616061; font-size: 12px; line-height: 1.5; }
.context code { font-size: 11px; }
hr.divider { border: 0; border-top: 1px solid #dddddd; margin: 10px 0; }
code { font-family: Monaco, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px; color: #e01e5a;
  background: #f6f6f6; border: 1px solid #dddddd; border-radius: 3px; padding: 1px 3px; }
pre { font-family: Monaco, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px; line-height: 1.5;
  background: #f8f8f8; border: 1px solid #dddddd; border-radius: 4px; padding: 8px; margin: 4px 0;
  white-space: pre-wrap; overflow-wrap: anywhere; }
.link { color: #1264a3; }
.mention { color: #1264a3; background: #e8f5fa; border-radius: 3px; padding: 0 2px; }
.actions { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin: 8px 0; }
.button { display: inline-block; font-size: 13px; font-weight: 700; line-height: 26px; padding: 0 12px;
  border: 1px solid #bbbbbb; border-radius: 4px; background: #fff; color: #1d1c1d; }
.button.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
.button.danger { background: #e01e5a; border-color: #e01e5a; color: #fff; }
.checkboxes { display: flex; flex-direction: column; gap: 4px; }
.checkbox { display: flex; align-items: center; gap: 8px; }
.box { width: 14px; height: 14px; border: 1px solid #868686; border-radius: 3px; background: #fff;
  color: #fff; font-size: 11px; line-height: 14px; text-align: center; }
.box.on { background: #1264a3; border-color: #1264a3; }
.select { display: inline-flex; justify-content: space-between; gap: 24px; min-width: 180px; font-size: 14px;
  line-height: 30px; padding: 0 10px; border: 1px solid #bbbbbb; border-radius: 4px; }
.select .chevron { color: #616061; }
.select .placeholder { color: #868686; }
.input { margin: 10px 0; }
.input .label { font-weight: 700; margin-bottom: 4px; }
.input .optional { font-weight: 400; color: #616061; }
.input .box-in { border: 1px solid #bbbbbb; border-radius: 4px; height: 30px; }
.input .box-in.multiline { height: 58px; }
"""


def render_page(
    blocks: Sequence[Json], *, names: Names | None = None, app: str = "Approvals", at: str = "10:42 AM"
) -> str:
    """A whole HTML page: one bot message (avatar, app name, time) holding `blocks`, in `#card`."""
    body = render_blocks(blocks, names or Names())
    initials = "".join(w[0] for w in app.split()[:2]).upper() or "?"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Slack card</title>'
        f"<style>{STYLE}</style></head><body>"
        f'<div id="card"><div class="avatar">{_esc(initials)}</div><div class="content">'
        f'<div class="meta"><span class="name">{_esc(app)}</span><span class="badge">APP</span>'
        f'<span class="time">{_esc(at)}</span></div>{body}</div></div></body></html>'
    )


def render_blocks(blocks: Sequence[Json], names: Names) -> str:
    out = []
    for block in blocks:
        kind = block.get("type")
        draw = BLOCKS.get(kind) if isinstance(kind, str) else None
        if draw is None:
            raise UnsupportedBlock(f"no rendering for block type {kind!r}")
        out.append(draw(block, names))
    return "".join(out)


# ----------------------------------------------------------------------------- blocks


def _header(b: Json, names: Names) -> str:
    _keys(b, "header", {"text"})
    return f'<div class="block header">{_text(b["text"], names, plain_only=True)}</div>'


def _section(b: Json, names: Names) -> str:
    _keys(b, "section", {"text", "fields", "accessory"})
    if "text" not in b and "fields" not in b:
        raise UnsupportedBlock("a section with neither text nor fields")
    inner = f'<div class="text">{_text(b["text"], names)}</div>' if "text" in b else ""
    if "fields" in b:
        cells = "".join(f"<div>{_text(f, names)}</div>" for f in b["fields"])
        inner = f'<div class="text">{inner}<div class="fields">{cells}</div></div>'
    if "accessory" in b:
        inner += _element(b["accessory"], names, allowed={"button"})
    return f'<div class="block section">{inner}</div>'


def _context(b: Json, names: Names) -> str:
    _keys(b, "context", {"elements"})
    parts = [_text(e, names) for e in b["elements"]]
    return f'<div class="block context">{" ".join(parts)}</div>'


def _actions(b: Json, names: Names) -> str:
    _keys(b, "actions", {"elements"})
    inner = "".join(_element(e, names, allowed={"button", "checkboxes", "static_select"}) for e in b["elements"])
    return f'<div class="block actions">{inner}</div>'


def _input(b: Json, names: Names) -> str:
    _keys(b, "input", {"label", "element", "optional", "hint"})
    optional = ' <span class="optional">(optional)</span>' if b.get("optional") else ""
    hint = f'<div class="context">{_text(b["hint"], names, plain_only=True)}</div>' if "hint" in b else ""
    element = _element(b["element"], names, allowed={"plain_text_input"})
    label = _text(b["label"], names, plain_only=True)
    return f'<div class="block input"><div class="label">{label}{optional}</div>{element}{hint}</div>'


def _divider(b: Json, names: Names) -> str:
    _keys(b, "divider", set())
    return '<hr class="block divider">'


BLOCKS: dict[str, Callable[[Json, Names], str]] = {
    "header": _header,
    "section": _section,
    "context": _context,
    "actions": _actions,
    "input": _input,
    "divider": _divider,
}


# ----------------------------------------------------------------------------- elements


def _element(e: Json, names: Names, allowed: set[str]) -> str:
    kind = e.get("type")
    if kind not in allowed:
        raise UnsupportedBlock(f"no rendering for element type {kind!r} here (allowed: {sorted(allowed)})")
    if kind == "button":
        _keys(e, "button", {"action_id", "text", "style", "value", "confirm", "url"})
        style = e.get("style")
        if style not in (None, "primary", "danger"):
            raise UnsupportedBlock(f"button style {style!r}")
        title = _attr(_confirm_text(e["confirm"])) if "confirm" in e else ""
        cls = f"button {style}" if style else "button"
        return f'<span class="{cls}"{title}>{_text(e["text"], names, plain_only=True)}</span>'
    if kind == "checkboxes":
        _keys(e, "checkboxes", {"action_id", "options", "initial_options"})
        ticked = {o["value"] for o in e.get("initial_options", [])}
        rows = []
        for o in e["options"]:
            _keys(o, "option", {"value", "text", "description"}, typed=False)
            on = o["value"] in ticked
            box = '<span class="box on">\u2713</span>' if on else '<span class="box"></span>'
            desc = f' <span class="context">{_text(o["description"], names)}</span>' if "description" in o else ""
            rows.append(f'<label class="checkbox">{box}<span>{_text(o["text"], names)}</span>{desc}</label>')
        return f'<div class="checkboxes">{"".join(rows)}</div>'
    if kind == "static_select":
        _keys(e, "static_select", {"action_id", "options", "initial_option", "placeholder"})
        for o in e["options"]:
            _keys(o, "option", {"value", "text"}, typed=False)
        choices = " | ".join(_plain(o["text"]) for o in e["options"])
        placeholder = _plain(e["placeholder"]) if "placeholder" in e else ""
        if "initial_option" in e:
            shown = _text(e["initial_option"]["text"], names, plain_only=True)
        else:
            shown = f'<span class="placeholder">{_esc(placeholder)}</span>'
        title = _attr(f"{placeholder}: {choices}" if placeholder else choices)
        return f'<span class="select"{title}><span>{shown}</span><span class="chevron">\u2304</span></span>'
    # plain_text_input: an empty box, taller when multiline
    _keys(e, "plain_text_input", {"action_id", "multiline", "max_length", "min_length", "placeholder"})
    placeholder = _esc(_plain(e["placeholder"])) if "placeholder" in e else ""
    cls = "box-in multiline" if e.get("multiline") else "box-in"
    return f'<div class="{cls}"><span class="placeholder">{placeholder}</span></div>'


def _confirm_text(c: Json) -> str:
    _keys(c, "confirm", {"title", "text", "confirm", "deny", "style"}, typed=False)
    return " · ".join(_plain(c[k]) for k in ("title", "text", "confirm", "deny") if k in c)


def _keys(obj: Json, what: str, allowed: set[str], typed: bool = True) -> None:
    """Refuse a key this renderer would not draw (block_id and type are never drawn)."""
    known = allowed | ({"type", "block_id"} if typed else set())
    extra = set(obj) - known
    if extra:
        raise UnsupportedBlock(f"{what}: no rendering for {sorted(extra)}")


# ----------------------------------------------------------------------------- text


def _plain(t: Json) -> str:
    """The raw words of a text object, as text (mrkdwn left as typed): for attributes."""
    if t.get("type") == "mrkdwn":
        return _unslack(t["text"])
    return str(t["text"])


def _text(t: Json, names: Names, plain_only: bool = False) -> str:
    kind = t.get("type")
    _keys(t, "text object", {"type", "text", "emoji", "verbatim"}, typed=False)
    if kind == "plain_text":
        return _esc(str(t["text"])).replace("\n", "<br>")
    if kind == "mrkdwn" and not plain_only:
        return mrkdwn(str(t["text"]), names)
    raise UnsupportedBlock(f"no rendering for text object type {kind!r} here")


_TOKEN = re.compile(r"<([^<>\n]*)>")
_CODE = re.compile(r"`([^`\n]+)`")
_EMPHASIS = [
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), "b"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), "i"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), "s"),
]
_EMOJI = re.compile(r":([a-z0-9_+-]+):")
_HOLE = "\x00"  # marks where an already-rendered piece goes back; removed from the input first


def mrkdwn(text: str, names: Names) -> str:
    """Slack's mrkdwn as HTML: ```pre```, `code`, *bold*, _italic_, ~strike~, <links>, <@mentions>,
    <#channels>, <!date^…|fallback> (drawn as its fallback text), :emoji:, line breaks."""
    text = text.replace(_HOLE, "")
    parts = text.split("```")
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 1 and i < len(parts) - 1:  # between an opening and a closing fence
            out.append(f"<pre>{_esc(_unslack(part.strip(chr(10))))}</pre>")
        else:
            prefix = "```" if i % 2 == 1 else ""  # an unclosed fence is shown as typed
            out.append(_inline(prefix + part, names))
    return "".join(out)


def _inline(text: str, names: Names) -> str:
    pieces: list[str] = []

    def hole(rendered: str) -> str:
        pieces.append(rendered)
        return f"{_HOLE}{len(pieces) - 1}{_HOLE}"

    text = _CODE.sub(lambda m: hole(f"<code>{_esc(_unslack(m.group(1)))}</code>"), text)
    text = _TOKEN.sub(lambda m: hole(_token(m.group(1), names)), text)
    out = _esc(_unslack(text))
    for pattern, tag in _EMPHASIS:
        out = pattern.sub(rf"<{tag}>\1</{tag}>", out)
    out = _EMOJI.sub(lambda m: EMOJI.get(m.group(1), m.group(0)), out)
    out = out.replace("\n", "<br>")
    return re.sub(f"{_HOLE}(\\d+){_HOLE}", lambda m: pieces[int(m.group(1))], out)


def _token(inner: str, names: Names) -> str:
    """One `<…>`: a date, a special mention, a user, a channel, or a link."""
    target, _, label = inner.partition("|")
    if target.startswith("!date^"):
        if not label:
            raise UnsupportedBlock(f"a date without fallback text: <{inner}>")
        return _esc(_unslack(label))
    if target in ("!here", "!channel", "!everyone"):
        return f'<span class="mention">@{_esc(target[1:])}</span>'
    if target.startswith("!subteam^"):
        return f'<span class="mention">{_esc(_unslack(label) or "@group")}</span>'
    if target.startswith("@"):
        uid = target[1:]
        return f'<span class="mention">@{_esc(names.users.get(uid, _unslack(label) or uid))}</span>'
    if target.startswith("#"):
        cid = target[1:]
        return f'<span class="mention">#{_esc(names.channels.get(cid, _unslack(label) or cid))}</span>'
    if target.startswith("!"):
        raise UnsupportedBlock(f"no rendering for <{inner}>")
    return f'<span class="link">{_esc(_unslack(label or target))}</span>'


def _unslack(text: str) -> str:
    """Slack's three escapes back to characters (then _esc escapes them for HTML)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _attr(text: str) -> str:
    return f' title="{_esc(text)}"'
