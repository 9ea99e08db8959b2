"""Slack installed by OAuth in many workspaces (issue 31) on PostgreSQL: the existing tests, imported
here and run with this file's `rig` fixture, whose installations, state claims and cards live in a
fresh PostgreSQL schema (skipped without a server, as every PostgreSQL test)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.bots.test_slack_grid import (
    POLICY,
    test_org_wide_cards_in_two_workspaces_approved_from_a_third,  # noqa: F401
)
from tests.bots.test_slack_oauth import (
    test_a_token_that_expires_mid_turn_is_refreshed_and_the_click_completes,  # noqa: F401
    test_install_two_workspaces_each_card_uses_its_own_token_and_a_stranger_is_refused,  # noqa: F401
    test_the_oauth_state_forged_replayed_expired_or_from_another_browser_is_refused,  # noqa: F401
    test_uninstall_then_a_click_is_refused_with_a_message_and_the_store_unchanged,  # noqa: F401
)
from tests.support.slack_rig import SlackRig, running
from tests.support.store_backends import pg_schema


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pg_schema() as url:
        yield url


@pytest.fixture
async def rig(pg_url: str, request: pytest.FixtureRequest) -> AsyncIterator[SlackRig]:
    # The org-wide test runs under its own file's policy (its approver), the others under none.
    policy = POLICY if "org_wide" in request.node.name else None
    async with running(SlackRig(oauth=True, policy=policy, store=pg_url)) as r:
        yield r
