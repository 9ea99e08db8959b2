"""The Slack front end: slack-bolt `AsyncApp` on the project's aiohttp server (or Socket Mode).

Thin: Slack payload -> cards/ parser -> `Approvals` facade -> cards/ renderer -> Web API.
Every request is acknowledged at once; turns, resumes and revocations run afterwards in tasks
this module owns (so shutdown and tests can wait for them). Event dedupe is durable, in the
store (`first_delivery`), so a retry reaching another replica does not start a second turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
import yarl
from aiohttp import web
from pydantic import BaseModel, ConfigDict
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots.admission import Admission
from chat_approvals.bots.approvers import ApproverDirectory, SlackGroups
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards.slack_answer import (
    SlackClick,
    SlackPayloadError,
    command_actor,
    event_actor,
    message_text,
    parse_click,
    parse_command,
    parse_revoke_click,
    read_block_actions,
)
from chat_approvals.cards.slack_chat import SlackCardLocation, chat_key, in_workspace, parse_chat_key
from chat_approvals.core import wording
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import ApprovalCard, CardOffer, Grant, ResumeResult, StoreFault, TurnResult

log = logging.getLogger("chat_approvals.slack")


class _NoTokenNotice(logging.Filter):
    """Bolt warns that SLACK_BOT_TOKEN is unused when a client is given: by design here (see below)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "will be unused" not in record.getMessage()


bolt_log = logging.getLogger("chat_approvals.slack.bolt")
bolt_log.addFilter(_NoTokenNotice())

DEFAULT_API_URL = "https://slack.com/api/"
COMMAND = "/approvals"  # as in manifest/slack*.yaml
UNAVAILABLE = f":warning: {wording.STORE_UNAVAILABLE}"
BUSY = f":warning: {wording.TOO_MANY_CLICKS}"
CLICK_ACTIONS = frozenset({sb.ACTION_APPROVE, sb.ACTION_APPROVE_ONCE, sb.ACTION_DENY})


class SlackConfig(BaseModel):
    """Slack credentials and endpoints. HTTP mode needs the signing secret and the bot token;
    Socket Mode needs the app-level token (`xapp-`) and the bot token."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str = ""
    signing_secret: str = ""
    app_token: str = ""
    api_url: str = DEFAULT_API_URL
    path: str = "/slack/events"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlackConfig:
        env = os.environ if env is None else env
        return cls(
            bot_token=env.get("SLACK_BOT_TOKEN", ""),
            signing_secret=env.get("SLACK_SIGNING_SECRET", ""),
            app_token=env.get("SLACK_APP_TOKEN", ""),
            api_url=env.get("CHAT_APPROVALS_SLACK_API_URL", "") or DEFAULT_API_URL,
        )

    def check(self) -> None:
        """A half-configured Slack says which variable is missing or malformed (serve calls this
        before it starts): otherwise it would be silently off, or fail at the first event."""
        if (self.signing_secret or self.app_token) and not self.bot_token:
            given = "SLACK_SIGNING_SECRET" if self.signing_secret else "SLACK_APP_TOKEN"
            raise ValueError(f"{given} is set but SLACK_BOT_TOKEN is not (the bot token, xoxb-...)")
        if self.bot_token and not (self.signing_secret or self.app_token):
            raise ValueError(
                "SLACK_BOT_TOKEN is set but neither SLACK_SIGNING_SECRET (HTTP events) nor SLACK_APP_TOKEN "
                "(Socket Mode, xapp-...) is"
            )
        shapes = (("SLACK_BOT_TOKEN", self.bot_token, "xoxb-"), ("SLACK_APP_TOKEN", self.app_token, "xapp-"))
        for name, value, prefix in shapes:
            if value and (not value.startswith(prefix) or any(c.isspace() for c in value)):
                raise ValueError(f"{name} does not look like a Slack token: it should start with {prefix} (no spaces)")
        if self.signing_secret and (self.signing_secret != self.signing_secret.strip() or " " in self.signing_secret):
            raise ValueError("SLACK_SIGNING_SECRET holds whitespace: copy it again from Basic Information")

    @property
    def http_mode(self) -> bool:
        return bool(self.bot_token and self.signing_secret)

    @property
    def socket_mode(self) -> bool:
        return bool(self.bot_token and self.app_token)

    @property
    def enabled(self) -> bool:
        return self.http_mode or self.socket_mode

    def describe(self) -> str:
        modes = [f"HTTP at {self.path}"] * self.http_mode + ["Socket Mode"] * self.socket_mode
        if not modes:
            return "off (set SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET, or with SLACK_APP_TOKEN)"
        return " and ".join(modes) + f", Web API {self.base_url}"

    @property
    def base_url(self) -> str:
        # slack_sdk joins with urljoin(base_url, method): without the trailing "/" the calls
        # would silently go to the host's root.
        return self.api_url if self.api_url.endswith("/") else self.api_url + "/"


def web_client(cfg: SlackConfig, token: str | None = None) -> AsyncWebClient:
    """Retries only where it is safe: a 429 was not processed, a refused connection sent nothing."""
    return AsyncWebClient(
        token=token,
        base_url=cfg.base_url,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )


class SlackFrontEnd:
    def __init__(
        self,
        approvals: Approvals,
        cfg: SlackConfig,
        *,
        client: AsyncWebClient | None = None,
        admission: Admission | None = None,
    ) -> None:
        self.approvals = approvals
        self.cfg = cfg
        self.client = client or web_client(cfg, cfg.bot_token)
        self.admission = admission or Admission(approvals.metrics)
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._auth: dict[str, Any] | None = None
        self._auth_lock = asyncio.Lock()
        self._socket: AsyncSocketModeHandler | None = None

        # Bolt passes arguments by name (a bound method's `self` would confuse it).
        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            return await self._authorize(enterprise_id, team_id)

        self.bolt = AsyncApp(
            logger=bolt_log,
            # Bolt's own client carries no token: `authorize` supplies it per request.
            client=web_client(cfg),
            # Socket Mode skips verification; HTTP mode always verifies (never turned off).
            signing_secret=cfg.signing_secret,
            authorize=authorize,
            # Our listeners only spawn work and ack, so running them before the response costs
            # nothing and spares Bolt's 10 ms ack polling; the work itself runs after the ack.
            process_before_response=True,
        )
        self._register()
        directory = getattr(approvals, "approvers", None)
        if isinstance(directory, ApproverDirectory):  # the policy's Slack user groups, through this client
            directory.attach_slack(SlackGroups(self.client, approvals.clock), self.installed_team)
        policy = getattr(approvals, "policy", None)
        self.route_to: str | None = policy.routing.slack_channel if policy is not None else None

    async def installed_team(self) -> str | None:
        """The workspace this app is installed in (auth.test, cached): bare approver ids are its users."""
        auth = await self._authorize(None, None)
        return auth.team_id

    # ------------------------------------------------------------------ plumbing

    async def _authorize(self, enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
        """One auth.test per process, behind a lock (Bolt's own has none), then cached."""
        if self._auth is None:
            async with self._auth_lock:
                if self._auth is None:
                    self._auth = dict((await self.client.auth_test()).data)  # type: ignore[arg-type]
        auth = self._auth
        return AuthorizeResult(
            enterprise_id=enterprise_id or auth.get("enterprise_id"),
            team_id=team_id or auth.get("team_id"),
            bot_token=self.cfg.bot_token,
            bot_id=auth.get("bot_id"),
            bot_user_id=auth.get("user_id"),
        )

    async def warm_up(self) -> None:
        """auth.test at startup, so the first request's ack does not wait for a round trip to Slack."""
        if self.client.session is None:
            # One pooled session for every Web API call: without it slack_sdk opens a new session, a
            # new connection (and a TLS handshake, against slack.com) for each call, and closes it.
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.client.timeout))
            self.client.session = self._session
        try:
            await self._authorize(None, None)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack auth.test failed at startup (will retry on the first request): %s", e)

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run after the ack; keep a strong reference (the loop holds only weak ones)."""
        task = asyncio.ensure_future(self._guarded(work, what))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def admit_click(self, body: dict[str, Any]) -> None:
        """Queue a click's resume (bots/admission.py); when the queue is full, tell the clicker to
        click again (nothing was changed: the card stays answerable)."""
        if self.admission.submit(lambda: self._guarded(self.click(body), "click"), platform="slack") is None:
            self.approvals.metrics.resumes.labels("slack", "busy").inc()
            self.spawn(self._refuse_busy(body), "busy refusal")

    async def _guarded(self, work: Coroutine[Any, Any, None], what: str) -> None:
        try:
            await work
        except Exception:
            log.exception("slack %s failed", what)

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until every turn/resume started or queued so far has finished."""
        async with asyncio.timeout(timeout):
            while True:
                for _ in range(3):  # let listeners that were just scheduled spawn their work
                    await asyncio.sleep(0)
                await self.admission.drain(timeout)
                if not self._tasks and not self.admission.depth():
                    return
                await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def handle_http(self, request: web.Request) -> web.Response:
        raw = await request.read()
        if not self.cfg.signing_secret:  # Socket Mode only: nothing here can be verified
            return _plain(404, "Slack is not served over HTTP here")
        refused = refuse_unsigned(self.cfg.signing_secret, raw, request.headers)
        if refused is not None:
            return refused
        click = _card_click(raw)
        if click is not None:
            # The ack is this request's only job: signature checked, payload read once, the resume
            # queued. Bolt's middleware chain adds nothing to an Approve/Deny click, so it is skipped.
            self.admit_click(click)
            return web.Response(status=200)
        refused = _unreadable(raw, request.headers)
        if refused is not None:
            return refused
        bolt_request = AsyncBoltRequest(body=raw.decode(), query=request.query_string, headers=request.headers)  # type: ignore[arg-type]
        response: web.Response = await to_aiohttp_response(await self.bolt.async_dispatch(bolt_request))
        return response

    async def start_socket_mode(self) -> None:
        self._socket = AsyncSocketModeHandler(self.bolt, app_token=self.cfg.app_token)
        await self._socket.connect_async()

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close_async()
            self._socket = None
        with contextlib.suppress(TimeoutError):
            await self.drain(timeout=10.0)
        for task in list(self._tasks):
            task.cancel()
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _call(self, what: str, fn: Callable[..., Awaitable[Any]], **kwargs: Any) -> Any:
        """A Web API call whose failure must not stop the rest (the answer is already stored)."""
        try:
            return await fn(**kwargs)
        except (SlackApiError, aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack %s failed: %s", what, e)
            return None

    async def post(self, channel: str, thread_ts: str | None, msg: sb.SlackMessage) -> str | None:
        kwargs: dict[str, Any] = {"channel": channel, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        r = await self._call("chat.postMessage", self.client.chat_postMessage, **kwargs)
        return str(r["ts"]) if r is not None else None

    async def update(self, loc: SlackCardLocation | None, msg: sb.SlackMessage, *, or_post: bool = False) -> bool:
        """chat.update in place; with `or_post`, a message that is gone gets a new one in its thread.
        A card also posted to the approvers' channel (routing) has that copy updated too."""
        if loc is None:
            return False
        if loc.routed is not None:
            await self.update(loc.routed, msg)
            loc = loc.here
        try:
            await self.client.chat_update(channel=loc.channel, ts=loc.ts, text=msg.text, blocks=msg.block_dicts())
            return True
        except SlackApiError as e:
            log.warning("slack chat.update failed: %s", e.response.get("error"))
            if or_post and e.response.get("error") in ("message_not_found", "cant_update_message"):
                await self.post(loc.channel, loc.thread_ts, msg)
        except (aiohttp.ClientError, TimeoutError) as e:
            log.warning("slack chat.update failed: %s", e)
        return False

    async def ephemeral(self, channel: str | None, user: str, thread_ts: str | None, msg: sb.SlackMessage) -> None:
        if not channel:
            return
        kwargs: dict[str, Any] = {"channel": channel, "user": user, "text": msg.text, "blocks": msg.block_dicts()}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        await self._call("chat.postEphemeral", self.client.chat_postEphemeral, **kwargs)

    # ------------------------------------------------------------------ listeners

    def _register(self) -> None:
        bolt = self.bolt

        @bolt.event("app_mention")
        async def on_mention(event: dict[str, Any], body: dict[str, Any], context: dict[str, Any]) -> None:
            self._on_message(event, body, context)

        @bolt.event("message")
        async def on_message(event: dict[str, Any], body: dict[str, Any], context: dict[str, Any]) -> None:
            # Only plain DMs from people; edits, joins and bot posts are acknowledged and dropped.
            if event.get("channel_type") == "im" and not event.get("subtype") and not event.get("bot_id"):
                self._on_message(event, body, context)

        @bolt.action(sb.ACTION_APPROVE)
        async def on_approve(ack: AsyncAck, body: dict[str, Any]) -> None:
            self.admit_click(body)  # Socket Mode; over HTTP, clicks are acknowledged before Bolt
            await ack()

        @bolt.action(sb.ACTION_APPROVE_ONCE)
        async def on_approve_once(ack: AsyncAck, body: dict[str, Any]) -> None:
            self.admit_click(body)  # Socket Mode; over HTTP, clicks are acknowledged before Bolt
            await ack()

        @bolt.action(sb.ACTION_DENY)
        async def on_deny(ack: AsyncAck, body: dict[str, Any]) -> None:
            self.admit_click(body)  # Socket Mode; over HTTP, clicks are acknowledged before Bolt
            await ack()

        @bolt.action(re.compile("^" + re.escape(sb.ACTION_PACKAGES)))
        async def on_package_toggle(ack: AsyncAck) -> None:
            await ack()  # the choice is read from `state` when Approve is clicked

        @bolt.action(sb.ACTION_DURATION)
        async def on_duration_choice(ack: AsyncAck) -> None:
            await ack()  # read from `state` when Approve is clicked

        @bolt.action(sb.ACTION_REVOKE)
        async def on_revoke(ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond) -> None:
            self.spawn(self.revoke_click(body, respond), "revoke")
            await ack()

        @bolt.command(COMMAND)
        async def on_command(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
            cmd = parse_command(command.get("text"))
            if cmd.verb in ("usage", "help"):
                msg = sb.help_message() if cmd.verb == "help" else sb.usage_message()
                await ack(text=msg.text, blocks=msg.block_dicts(), response_type="ephemeral")
                return
            self.spawn(self.command(command, cmd.verb, cmd.subject, respond), "/approvals")
            await ack()

    def _on_message(self, event: dict[str, Any], body: dict[str, Any], context: Mapping[str, Any]) -> None:
        team = context.get("team_id") or body.get("team_id") or event.get("team")
        channel, user, ts = event.get("channel"), event_actor(context, body, event), event.get("ts")
        if not (team and channel and user and ts):
            log.info("slack event without team/channel/user identity/ts dropped")
            return
        self.spawn(
            self.turn(
                event_id=body.get("event_id"),
                team=str(team),
                channel=str(channel),
                user=str(user),
                text=message_text(str(event.get("text") or "")),
                thread_ts=str(event.get("thread_ts") or ts),
            ),
            "turn",
        )

    # ------------------------------------------------------------------ turns

    async def turn(
        self, *, event_id: str | None, team: str, channel: str, user: str, text: str, thread_ts: str
    ) -> None:
        try:
            if event_id and not await self.approvals.first_delivery(f"slack:event:{event_id}"):
                log.info("slack event %s already delivered: no second turn", event_id)
                return
            chat = chat_key(team, channel, thread_ts)
            result = await self.approvals.run_turn(chat=chat, user=user, text=text, platform="slack")
        except StoreFault as e:
            log.warning("slack turn: store fault: %s", e)
            await self.post(channel, thread_ts, sb.reply_message(UNAVAILABLE))
            return
        await self.show_turn(chat, channel, thread_ts, result)

    async def show_turn(self, chat: str, channel: str, thread_ts: str, result: TurnResult) -> None:
        """The turn's reply in the thread; a card (first or chained) as a new message there."""
        if result.status == "awaiting_approval" and result.offer is not None:
            offer = result.offer
            route = self.route_to if offer.card.policy is not None and self.route_to != channel else None
            ts = await self.post(
                channel, thread_ts, sb.card_message(offer.card, offer.secret, offer.votes, routed_to=route)
            )
            if ts is None:  # not posted after retries: a card nobody sees must not hold the chat
                await self.approvals.withdraw(chat=chat, card_id=offer.card.card_id, why="slack post failed")
                await self.post(channel, thread_ts, sb.reply_message(wording.WITHDRAWN))
                return
            loc = SlackCardLocation.of(channel, ts, thread_ts)
            if loc is not None and route is not None:
                loc = replace(loc, routed=await self._route(route, channel, ts, offer))
            if loc is not None:
                await self.approvals.record_card_location(chat=chat, card_id=offer.card.card_id, location=loc.stored())
            # A card shown again: its earlier copies (both, if routed) become read-only. After the
            # new post, so they never point "below" at a card that failed to appear.
            await self.update(SlackCardLocation.parse(offer.replaces), sb.shown_again_message(offer.card))
        elif result.status == "waiting":
            await self.post(channel, thread_ts, sb.waiting_message())
        else:
            await self.post(channel, thread_ts, sb.reply_message(result.text))

    async def _route(self, route: str, channel: str, ts: str, offer: CardOffer) -> SlackCardLocation | None:
        """Routing: the card also goes to the approvers' channel, with a link to the requesting
        thread. Returns where it went (kept with the card's location, so both update in place)."""
        link = await self._call("chat.getPermalink", self.client.chat_getPermalink, channel=channel, message_ts=ts)
        permalink = str(link["permalink"]) if link is not None and link.get("permalink") else None
        routed = await self.post(route, None, sb.card_message(offer.card, offer.secret, offer.votes, link=permalink))
        return SlackCardLocation.of(route, routed, None)

    # ------------------------------------------------------------------ clicks

    async def click(self, body: dict[str, Any]) -> None:
        try:
            c = parse_click(body)
        except SlackPayloadError as e:
            log.info("slack click refused: %s", e)
            self.approvals.metrics.resumes.labels("slack", "invalid").inc()  # never reaches the facade
            await self._refuse_unreadable(body)
            return
        here = SlackCardLocation.of(c.channel, c.message_ts, c.thread_ts)
        resuming: list[asyncio.Task[bool]] = []

        async def on_claimed(card: ApprovalCard, location: dict[str, str] | None) -> None:
            # "Resuming…" goes out while the turn runs, not before it (a Slack round trip per
            # click); the outcome's update waits for it below, so it can never land last.
            loc = SlackCardLocation.parse(location) or here
            resuming.append(asyncio.ensure_future(self.update(loc, sb.resuming_message(card, c.actor))))

        try:
            res = await self.approvals.resume(
                card_id=c.card_id,
                user=c.actor,
                secret=c.secret,
                answer=c.answer,
                on_claimed=on_claimed,
                platform="slack",  # metrics and logs only
            )
        except StoreFault as e:
            log.warning("slack click: store fault: %s", e)
            await self.ephemeral(c.channel, c.user, c.thread_ts, sb.reply_message(UNAVAILABLE))
            return
        finally:
            if resuming:  # update() logs its own faults; nothing here may skip the outcome
                await asyncio.gather(*resuming, return_exceptions=True)
        await self.show_resume(c, res, SlackCardLocation.parse(res.card_location) or here)

    async def show_resume(self, c: SlackClick, res: ResumeResult, loc: SlackCardLocation | None) -> None:
        refusal: sb.SlackMessage | None = None
        if res.outcome == "vote_recorded" and res.card is not None:
            await self.show_votes(c, res, loc)
            refusal = sb.vote_recorded(res.votes or [], res.needed or 0)
        elif res.outcome in ("resumed", "replayed") and res.card and res.answer and res.answered_by:
            outcome = sb.outcome_message(res.card, res.answer, res.answered_by, res.answered_at or 0.0)
            # On a replay this repeats the update: it repairs a card whose first update was lost.
            await self.update(loc, outcome, or_post=res.outcome == "resumed")
            if res.outcome == "replayed":
                refusal = sb.refusal_answered(res.card, res.answer, res.answered_by, res.answered_at)
            if res.result is not None and (res.outcome == "resumed" or res.result.offer is not None):
                # a replay carries a card only when it re-offers the still-open chained card
                where = parse_chat_key(res.card.chat)
                if where is not None:
                    await self.show_turn(res.card.chat, where.channel, where.thread_ts, res.result)
        elif res.outcome in ("resumed", "replayed"):
            refusal = sb.refusal_answered(None, None, None, None)
        elif res.outcome == "in_progress":
            refusal = sb.refusal_in_progress()
        elif res.outcome == "expired":
            if res.card is not None:
                await self.update(loc, sb.expired_message(res.card))
            refusal = sb.refusal_expired()
        elif res.outcome == "forbidden":
            policy_said = res.message if res.card is not None and res.card.policy is not None else None
            refusal = sb.refusal_forbidden(res.owner, policy_said)
        elif res.outcome == "invalid":
            refusal = sb.refusal_invalid()
        else:  # unknown, unauthorized: a wrong secret looks the same as an unknown card
            refusal = sb.refusal_unknown()
        if refusal is not None:
            await self.ephemeral(c.channel, c.user, c.thread_ts, refusal)

    async def show_votes(self, c: SlackClick, res: ResumeResult, loc: SlackCardLocation | None) -> None:
        """A vote that did not complete the quorum: both copies of the card show the votes so far,
        re-rendered with the secret the click carried (the server never holds it, R19)."""
        assert res.card is not None
        votes = res.votes or []
        if loc is None:
            return
        routed = loc.routed
        routed_to = routed.channel if routed is not None else None
        await self.update(loc.here, sb.card_message(res.card, c.secret, votes, routed_to=routed_to))
        if routed is not None:
            link = await self._call(
                "chat.getPermalink", self.client.chat_getPermalink, channel=loc.channel, message_ts=loc.ts
            )
            permalink = str(link["permalink"]) if link is not None and link.get("permalink") else None
            await self.update(routed, sb.card_message(res.card, c.secret, votes, link=permalink))

    async def _refuse_busy(self, body: dict[str, Any]) -> None:
        user, channel, thread_ts = _clicker(body)
        if user and channel:
            await self.ephemeral(channel, user, thread_ts, sb.reply_message(BUSY))

    async def _refuse_unreadable(self, body: dict[str, Any]) -> None:
        """A click we could not read: tell the clicker, if the payload says who and where."""
        user, channel, thread_ts = _clicker(body)
        if user and channel:
            await self.ephemeral(channel, user, thread_ts, sb.refusal_invalid())

    # ------------------------------------------------------------------ /approvals

    async def _workspace_grants(self, user: str, team: str) -> list[Grant]:
        return [g for g in await self.approvals.grants(user=user) if in_workspace(g.chat, team)]

    async def _revoke_here(self, user: str, team: str, subject: str) -> list[Grant]:
        """Revoke in every chat of this workspace (a user's other workspaces are not touched)."""
        chats = sorted({g.chat for g in await self._workspace_grants(user, team)})
        revoked: list[Grant] = []
        for chat in chats:
            revoked += await self.approvals.revoke(user=user, chat=chat, subject=subject)
        return revoked

    async def command(self, command: dict[str, Any], verb: str, subject: str | None, respond: AsyncRespond) -> None:
        user, team = command_actor(command), str(command.get("team_id") or "")
        try:
            if user is None:  # no full identity: nothing of anyone's can be listed or revoked
                msg = sb.reply_message("Your workspace could not be told from this command; nothing was changed.")
            elif verb == "revoke" and subject:
                msg = sb.revoked_message(subject, await self._revoke_here(user, team, subject))
            else:
                msg = sb.grants_message(await self._workspace_grants(user, team))
        except StoreFault as e:
            log.warning("slack /approvals: store fault: %s", e)
            msg = sb.reply_message(UNAVAILABLE)
        await self._call("response_url", respond, text=msg.text, blocks=msg.block_dicts(), response_type="ephemeral")

    async def revoke_click(self, body: dict[str, Any], respond: AsyncRespond) -> None:
        try:
            r = parse_revoke_click(body)
        except SlackPayloadError as e:
            log.info("slack revoke refused: %s", e)
            await self._call("response_url", respond, text=sb.refusal_invalid().text, response_type="ephemeral",
                             replace_original=False)  # fmt: skip
            return
        team = r.team or read_block_actions(body).team_id or ""
        try:
            if not in_workspace(r.chat, team):
                revoked: list[Grant] = []
            else:
                revoked = await self.approvals.revoke(user=r.user, chat=r.chat, subject=r.subject)
            notice = sb.revoked_message(r.subject, revoked).text
            msg = sb.grants_message(await self._workspace_grants(r.user, team), notice=sb.escape(notice))
        except StoreFault as e:
            log.warning("slack revoke: store fault: %s", e)
            msg = sb.reply_message(UNAVAILABLE)
        # The list is ephemeral: only its response_url can replace it.
        await self._call("response_url", respond, text=msg.text, blocks=msg.block_dicts(), replace_original=True)


# ---------------------------------------------------------------------- HTTP requests

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
SIGNATURE_WINDOW = 300  # seconds either side of now, as Slack and Bolt have it


def _plain(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _signature(secret: str, timestamp: str, raw: bytes) -> str:
    """Slack's recipe (as slack_sdk's SignatureVerifier, which would first decode the body as UTF-8)."""
    base = b"v0:" + timestamp.encode() + b":" + raw
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def refuse_unsigned(secret: str, raw: bytes, headers: Mapping[str, str]) -> web.Response | None:
    """Bolt parses a body, and reads ids out of it, before it checks the signature, and fails with a
    500 on what it cannot read (a non-numeric timestamp, a body that is not UTF-8, a JSON array,
    `payload=` that is not JSON, `{"team": 5}`). So the signature is checked here first, on the raw
    bytes, and (`_unreadable`) only a signed body whose shape Bolt can read reaches it. A refusal is
    a plain 4xx."""
    timestamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    signed = (
        _TIMESTAMP.fullmatch(timestamp) is not None
        and _SIGNATURE.fullmatch(signature) is not None
        and abs(time.time() - int(timestamp)) <= SIGNATURE_WINDOW
        and hmac.compare_digest(_signature(secret, timestamp, raw), signature)
    )
    if not signed:
        if _is_ssl_check(raw):
            return web.Response(status=200, text="")  # Slack's certificate probe is not signed
        return _plain(401, "invalid request")
    return None


def _unreadable(raw: bytes, headers: Mapping[str, str]) -> web.Response | None:
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        return _plain(400, "the body is not UTF-8")
    if not _readable_shape(body, headers.get("Content-Type", "")):
        return _plain(400, "the body is not a JSON object, a form, or a form with a JSON object as payload")
    return None


def _card_click(raw: bytes) -> dict[str, Any] | None:
    """A signed, readable body that is exactly one Approve/Deny click (`payload=` a block_actions
    object with one action of ours): the payload. Anything else: None (it goes through Bolt)."""
    if not raw.startswith(b"payload="):
        return None
    # yarl's C unquoter: the same result as parse_qsl (tested), ~100x faster on a 4 KB payload.
    try:
        query = yarl.URL.build(query_string=raw.decode("utf-8"), encoded=True).query
        if len(query) != 1:
            return None
        payload = json.loads(query["payload"])
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(payload, dict) or payload.get("type") != "block_actions":
        return None
    actions = payload.get("actions")
    if not (isinstance(actions, list) and len(actions) == 1 and isinstance(actions[0], dict)):
        return None
    return payload if actions[0].get("action_id") in CLICK_ACTIONS else None


def _clicker(body: dict[str, Any]) -> tuple[str | None, str | None, str | None]:
    """Who clicked, where (channel, thread), as far as an unchecked payload says."""

    def part(name: str) -> dict[str, Any]:
        value = body.get(name)
        return value if isinstance(value, dict) else {}

    user, container = part("user").get("id"), part("container")
    channel = container.get("channel_id") or part("channel").get("id")
    thread_ts = container.get("thread_ts")
    return (
        user if isinstance(user, str) else None,
        channel if isinstance(channel, str) else None,
        thread_ts if isinstance(thread_ts, str) else None,
    )


def _is_ssl_check(raw: bytes) -> bool:
    try:
        return dict(parse_qsl(raw.decode("ascii"), keep_blank_values=True)).get("ssl_check") == "1"
    except (UnicodeDecodeError, ValueError):
        return False


def _readable_shape(body: str, content_type: str) -> bool:
    """What bolt's `parse_body` will make of it must be a JSON object (or a plain form)."""
    try:
        if content_type.split(";")[0].strip() == "application/json" or body.startswith("{"):
            return isinstance(json.loads(body), dict)
        if "payload" in body:
            payload = dict(parse_qsl(body, keep_blank_values=True)).get("payload")
            return payload is None or isinstance(json.loads(payload), dict)
        parse_qsl(body, keep_blank_values=True)
        return True
    except (ValueError, RecursionError):
        return False


# ---------------------------------------------------------------------- mounting

SLACK: web.AppKey[SlackFrontEnd] = web.AppKey("slack", SlackFrontEnd)


def mount_slack(
    app: web.Application,
    approvals: Approvals,
    cfg: SlackConfig | None = None,
    *,
    client: AsyncWebClient | None = None,
    admission: Admission | None = None,
) -> SlackFrontEnd | None:
    """Serve Slack from `app`: POST `cfg.path` in HTTP mode, a Socket Mode connection otherwise.
    Returns None (and mounts nothing) when Slack is not configured."""
    cfg = cfg or SlackConfig.from_env()
    if not cfg.enabled:
        log.debug("Slack is off: set SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET (HTTP) or SLACK_APP_TOKEN (Socket Mode)")
        return None
    front = SlackFrontEnd(approvals, cfg, client=client, admission=admission)
    app[SLACK] = front
    if cfg.http_mode:
        app.router.add_post(cfg.path, front.handle_http)

    async def lifecycle(_: web.Application) -> Any:
        await front.warm_up()
        if cfg.socket_mode:
            await front.start_socket_mode()
        yield
        await front.close()

    app.cleanup_ctx.append(lifecycle)
    return front
