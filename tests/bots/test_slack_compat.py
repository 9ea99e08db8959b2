"""bots/slack_compat.py workaround 1: Block Kit's `to_dict` with slack_sdk's per-class work done once.

No rule covers how a model becomes JSON; R22 needs the card a person reads unchanged by a
character, so every message the renderers make (and each model read back from it) is serialised by
slack_sdk's own code and by the workaround's: the same dicts, and for an invalid model the same
error. The originals are taken from the installed slack_sdk, so a slack_sdk that changes what
`to_dict` makes fails here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.basic_objects import JsonObject, JsonValidator
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    MarkdownTextObject,
    PlainTextObject,
    RichTextBlock,
    RichTextSectionElement,
    SectionBlock,
)

from chat_approvals.bots import slack_compat
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_chat import chat_key
from chat_approvals.core.models import Answer, ApprovalCard, Grant, Vote
from tests.support.card_pictures import download_card, download_card_with, tool_card

NOW = 1_800_000_000.0
SECRET = "s" * 43


@contextmanager
def sdk_own() -> Iterator[None]:
    """slack_sdk's own `validate_json` and `get_non_null_attributes` for the duration."""
    saved = JsonObject.validate_json, JsonObject.get_non_null_attributes
    JsonObject.validate_json = slack_compat.SDK_VALIDATE  # type: ignore[method-assign]
    JsonObject.get_non_null_attributes = slack_compat.SDK_NON_NULL  # type: ignore[method-assign]
    try:
        yield
    finally:
        JsonObject.validate_json, JsonObject.get_non_null_attributes = saved  # type: ignore[method-assign]


def both(make: Callable[[], Any]) -> tuple[Any, Any]:
    """What `make()` gives (or raises) with slack_sdk's own code, and with the workaround's."""

    def run() -> Any:
        try:
            return make()
        except SlackObjectFormationError as e:
            return ("raised", str(e))

    with sdk_own():
        own = run()
    slack_compat.apply()
    return own, run()


def card(**kw: Any) -> ApprovalCard:
    """The tour's download card without its policy, a reason that needs escaping, and `kw`."""
    return download_card_with(**{"reason": "fetch the data set <b> & *this*", "packages": [], **kw})


def messages() -> list[sb.SlackMessage]:
    many = card(packages=[f"pkg{i}" for i in range(23)], sites=[f"h{i}.org" for i in range(30)])
    votes = [Vote(user="slack:T0APPROV1:U0A", at=NOW), Vote(user="slack:T0APPROV1:U0B", at=NOW + 5)]
    grants = [
        Grant(user="U0OWNER", chat=chat_key("T0APPROV1", f"C{i % 3}", "1.1"), kind="site", name=f"h{i}.org",
              card_id="c_x", created_at=NOW, expires_at=NOW + 9)
        for i in range(12)
    ]  # fmt: skip
    out = []
    for c in (download_card(), tool_card(), card(), card(packages=["numpy"]), many):
        out += [
            sb.card_message(c, SECRET, ()),
            sb.card_message(c, SECRET, votes, routed_to="C0APPROVERS"),
            sb.card_message(c, SECRET, (), link="https://example.slack.com/archives/C1/p1"),
            sb.resuming_message(c, "slack:T0APPROV1:U0OWNER"),
            sb.outcome_message(c, Answer(approved=True), "slack:T0APPROV1:U0OWNER", NOW),
            sb.outcome_message(c, Answer(approved=False, reason="not today"), "slack:T0APPROV1:U0B", NOW),
            sb.outcome_message(c, Answer(approved=True), "slack:T0APPROV1:U0A", NOW, votes),
            sb.expired_message(c),
            sb.shown_again_message(c),
            sb.reminder_message(c, votes, escalated=True),
            sb.expired_unanswered_message(c),
        ]
    return [
        *out,
        sb.reply_message("done: <b> & " + "y" * 7000),
        sb.reply_message(""),
        sb.waiting_message(),
        sb.waiting_message("still waiting"),
        sb.welcome_message(),
        sb.help_message(),
        sb.usage_message(),
        sb.grants_message(grants),
        sb.grants_message([]),
        sb.revoked_message("all", grants[:2]),
        sb.refusal_forbidden("slack:T0APPROV1:U0OWNER"),
        sb.refusal_invalid("bad"),
        sb.vote_recorded(votes, 3),
    ]


def test_workaround_1_every_message_serialises_as_slack_sdk_does() -> None:
    msgs = messages()
    assert len(msgs) > 60
    for m in msgs:
        own, ours = both(m.block_dicts)
        assert own == ours
        assert not (isinstance(own, tuple) and own[0] == "raised")
        # every model Block Kit reads back from it (more of slack_sdk's classes than the renderers use)
        own_again, ours_again = both(lambda own=own: [b.to_dict() for b in Block.parse_all(own)])
        assert own_again == ours_again == own
    assert slack_compat.is_applied()


@pytest.mark.parametrize(
    "make",
    [
        lambda: SectionBlock(text=MarkdownTextObject(text="x" * 3001)).to_dict(),
        lambda: SectionBlock(text="x", block_id="b" * 256).to_dict(),
        lambda: ButtonElement(text="x" * 76, action_id="a", value="v").to_dict(),
        lambda: ButtonElement(text="x", action_id="a", value="v" * 2001).to_dict(),
        # several validators fail: the first in slack_sdk's order is the one told
        lambda: ButtonElement(text="x" * 76, action_id="a" * 256, value="v" * 2001, url="u" * 3001).to_dict(),
        lambda: ActionsBlock(elements=[ButtonElement(text="x", action_id=f"a{i}") for i in range(26)]).to_dict(),
        lambda: ActionsBlock(elements=[]).to_dict(),  # an empty list is left out
        lambda: RichTextBlock(elements=[RichTextSectionElement(elements=[])]).to_dict(),  # allowed empty
        lambda: PlainTextObject(text="").to_dict(),
    ],
)
def test_workaround_1_an_invalid_or_empty_model_is_told_as_slack_sdk_tells_it(make: Callable[[], Any]) -> None:
    own, ours = both(make)
    assert own == ours


class _Odd(JsonObject):
    """A model whose instance attributes take part in validation: slack_sdk's own walk serves it."""

    attributes = {"type", "text"}  # type: ignore[assignment]

    def __init__(self, text: str) -> None:
        self.type = "odd"
        self.text = text
        self.extra = JsonValidator("an instance validator failed")(lambda: False)

    @JsonValidator("text too long")
    def _validate_text(self) -> bool:
        return len(self.text) < 5


def test_workaround_1_instance_validators_go_through_slack_sdk() -> None:
    assert both(lambda: _Odd("ok").to_dict()) == (("raised", "an instance validator failed"),) * 2
    odd = _Odd("ok")
    del odd.extra
    assert both(odd.to_dict) == ({"text": "ok", "type": "odd"},) * 2
    assert both(_Odd("too long").to_dict) == (("raised", "text too long"),) * 2


def _warned(check: Callable[[str], None], method: str) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        check(method)
    return [str(w.message) for w in seen]


def test_workaround_2_a_method_warns_of_its_deprecation_as_slack_sdk_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The async client asks slack_sdk's own check only for a method starting with a deprecated
    prefix: every method the front end calls, and each of slack_sdk's prefixes, warn exactly as
    slack_sdk's check warns (also with its SLACKCLIENT_SKIP_DEPRECATION switch)."""
    from slack_sdk.web import async_base_client, deprecation

    slack_compat.apply()
    assert async_base_client.show_deprecation_warning_if_any is slack_compat.show_deprecation_warning_if_any
    prefixes = [
        *deprecation.deprecated_method_prefixes_2020_01,
        *deprecation.deprecated_method_prefixes_2023_07,
        *deprecation.deprecated_method_prefixes_2024_09,
    ]
    ours = ["chat.postMessage", "chat.update", "chat.postEphemeral", "chat.getPermalink", "views.open", "auth.test"]
    methods = [*ours, "usergroups.users.list", "", "conversations.history", *[p + "list" for p in prefixes], *prefixes]
    monkeypatch.delenv("SLACKCLIENT_SKIP_DEPRECATION", raising=False)
    for skip in (False, True):
        if skip:
            monkeypatch.setenv("SLACKCLIENT_SKIP_DEPRECATION", "1")
        for method in methods * 2:  # the second time from what was worked out
            assert slack_compat.SDK_DEPRECATION is not None
            own = _warned(slack_compat.SDK_DEPRECATION, method)
            assert _warned(slack_compat.show_deprecation_warning_if_any, method) == own
            assert bool(own) == (not skip and method in prefixes + [p + "list" for p in prefixes])
    sdk_check = slack_compat.SDK_DEPRECATION
    assert sdk_check is not None
    assert not any(_warned(sdk_check, m) for m in ours)


@pytest.mark.parametrize("missing", range(len(slack_compat.NEEDED)))
def test_a_slack_sdk_without_a_name_the_workarounds_need_keeps_its_own_code(
    monkeypatch: pytest.MonkeyPatch, missing: int
) -> None:
    """slack-sdk is a range (>=3.33,<4): a release that drops or renames a private name the
    workarounds rely on leaves slack_sdk's own code in place (here the name is taken from the
    installed slack_sdk, whose own code then cannot run: only what apply() replaces is checked)."""
    from slack_sdk.web import async_base_client

    module, name = slack_compat.NEEDED[missing]
    monkeypatch.setattr(JsonObject, "validate_json", slack_compat.SDK_VALIDATE)
    monkeypatch.setattr(JsonObject, "get_non_null_attributes", slack_compat.SDK_NON_NULL)
    own_check = async_base_client.show_deprecation_warning_if_any
    monkeypatch.setattr(async_base_client, "show_deprecation_warning_if_any", own_check)
    monkeypatch.delattr(module, name)
    assert not slack_compat.fits()
    slack_compat.apply()
    assert not slack_compat.is_applied()
    assert JsonObject.get_non_null_attributes is slack_compat.SDK_NON_NULL
    assert getattr(async_base_client, "show_deprecation_warning_if_any", None) in (own_check, None)


def test_remember_urls_leaves_a_slack_sdk_that_makes_urls_another_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from slack_sdk.web import async_base_client

    from chat_approvals.bots import slack_config

    monkeypatch.delattr(async_base_client, "_get_url")
    slack_config.remember_urls()  # no AttributeError: nothing to keep
    assert not hasattr(async_base_client, "_get_url")
