"""The Slack front end: slack-bolt `AsyncApp` on the project's aiohttp server (or Socket Mode).

Thin: Slack payload -> cards/ parser -> `Approvals` facade -> cards/effects.py -> Block Kit
renderer -> Web API. The house: `slack_config.py` (read once), `slack_ingress.py` (signature,
fast ack), `slack_web.py` (the Web API calls), this module (listeners, turns, clicks, commands).
Every request is acknowledged at once; turns, resumes and revocations run afterwards in tasks
this module owns (so shutdown and tests can wait for them). Event dedupe is durable, in the
store (`first_delivery`), so a retry reaching another replica does not start a second turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web
from slack_sdk.web.async_client import AsyncWebClient

import chat_approvals.core.protocol.wording as wording
from chat_approvals.bots.admission import Admission
from chat_approvals.bots.slack_commands import SlackCommands
from chat_approvals.bots.slack_config import COMMAND, SlackConfig, web_client
from chat_approvals.bots.slack_ingress import bolt_app, clicker, http_handler
from chat_approvals.bots.slack_oauth import SlackOAuth
from chat_approvals.bots.slack_socket import CheckedSocketModeHandler
from chat_approvals.bots.slack_timers import show_timer
from chat_approvals.bots.slack_web import SlackWeb, Workspace, payload_workspace
from chat_approvals.bots.turn_limits import turn_refusal
from chat_approvals.cards import effects as fx
from chat_approvals.cards import slack_blocks as sb
from chat_approvals.cards import slack_edit
from chat_approvals.cards.slack_answer import (
    BlockActions,
    SlackClick,
    SlackPayloadError,
    ToldRefusal,
    parse_click,
)
from chat_approvals.cards.slack_chat import SlackCardLocation, chat_key, parse_chat_key
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.identity import parse_slack_user
from chat_approvals.core.models import CardOffer, ResumeResult, StoreFault, TurnResult
from chat_approvals.core.protocol import Claimed
from chat_approvals.core.protocol.timers import TimerFired

__all__ = ["COMMAND", "SLACK", "SlackConfig", "SlackFrontEnd", "mount_slack", "web_client"]

log = logging.getLogger("chat_approvals.slack")

UNAVAILABLE = f":warning: {wording.STORE_UNAVAILABLE}"
BUSY = f":warning: {wording.TOO_MANY_CLICKS}"
WELCOME_KEPT = 10 * 365 * 86400.0  # "once per chat": long enough to mean never again


@dataclass
class _Resuming:
    """A won claim's "Resuming…" update. It goes out only once the turn has run for the Slack
    config's `resuming_after` seconds: a quicker turn goes straight to its outcome, with one Slack
    call less and no flash of "Resuming…" (chat.update is rate-limited per workspace)."""

    holders: int  # clicks of this person on this card still waiting for their resume
    # Until it starts, a timer: dropped by a cancel that wakes nothing (a sleeping task cancelled
    # took the loop twice a click, and most turns end before their update is due).
    timer: asyncio.TimerHandle | None = None
    task: asyncio.Task[bool] | None = None  # the update, once started: whoever shows an outcome waits for it

    def drop(self) -> None:
        """Never sent: the update is not started (its timer cancelled)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None


@dataclass
class _Click:
    """A click of this front end's, between the resume call and its outcome: where to show
    "Resuming…" when the claim is won, and that update (the outcome waits for it once sent)."""

    here: SlackCardLocation | None
    resuming: list[_Resuming] = field(default_factory=list)


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
        # Many workspaces (issue 31): Bolt's OAuth flow, and each call with its workspace's token.
        self.oauth = SlackOAuth.build(cfg, approvals) if cfg.oauth else None
        self.web = SlackWeb(cfg, client, tokens=self.oauth.tokens if self.oauth is not None else None)
        self.admission = admission or Admission(approvals.metrics)
        self.commands = SlackCommands(approvals, self.web, self.oauth)
        self._tasks: set[asyncio.Task[None]] = set()
        self._clicks: dict[tuple[str, str], list[_Click]] = {}  # (card id, actor) -> its clicks in flight
        self._socket: CheckedSocketModeHandler | None = None

        self.bolt = bolt_app(cfg, self.web, self, self.oauth)
        self.handle_http = http_handler(cfg.signing_secret, self.bolt, self.admit_click)
        self._unsubscribe = approvals.on_claimed(self._on_claimed)
        self._unsubscribe_timers = approvals.on_timer(self._on_timer)  # issue 33
        policy = approvals.policy
        self.route_to: str | None = policy.routing.slack_channel if policy is not None else None

    # ------------------------------------------------------------------ plumbing

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run after the ack; keep a strong reference (the loop holds only weak ones)."""
        task = asyncio.ensure_future(self._guarded(work, what))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def admit_click(self, body: dict[str, Any], shaped: BlockActions | None = None) -> None:
        """Queue a click's resume (bots/admission.py); when the queue is full, tell the clicker to
        click again (nothing was changed: the card stays answerable). `shaped`: the payload as the
        ack read it (`shaped_click`), so the click does not read it again."""
        if (
            self.admission.submit(
                lambda: self._guarded(self.click(body, shaped), "click"), platform="slack", acked=True
            )
            is None
        ):
            self.approvals.metrics.resumes.labels("slack", "busy").inc()
            self.spawn(self._tell_clicker(body, sb.reply_message(BUSY)), "busy refusal")

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

    async def start_socket_mode(self) -> None:
        self._socket = CheckedSocketModeHandler(self.bolt, app_token=self.cfg.app_token)
        await self._socket.connect_async()

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close_async()
            self._socket = None
        with contextlib.suppress(TimeoutError):
            await self.drain(timeout=10.0)
        self._unsubscribe()  # after the drain: a click still resuming shows "Resuming…" too
        self._unsubscribe_timers()
        for task in list(self._tasks):
            task.cancel()
        await self.web.close()

    # ------------------------------------------------------------------ turns

    async def turn(
        self,
        *,
        event_id: str | None,
        team: str,
        channel: str,
        user: str,
        text: str,
        thread_ts: str,
        enterprise: str | None = None,
    ) -> None:
        ws = Workspace(team, enterprise)
        try:
            if event_id and not await self.approvals.first_delivery(f"slack:event:{event_id}"):
                log.info("slack event %s already delivered: no second turn", event_id)
                return
            chat = chat_key(team, channel, thread_ts)
            refusal = turn_refusal(text)  # what a turn may carry, before it takes a lease (issue 27.2)
            if refusal is not None:
                await self.web.post(channel, thread_ts, sb.reply_message(refusal), workspace=ws)
                return
            user = await self.person(user)
            result = await self.approvals.run_turn(chat=chat, user=user, text=text, platform="slack")
        except StoreFault as e:
            log.warning("slack turn: store fault: %s", e)
            await self.web.post(channel, thread_ts, sb.reply_message(UNAVAILABLE), workspace=ws)
            return
        await self.show_turn(chat, channel, thread_ts, result, workspace=ws)

    async def welcome(self, team: str, channel: str, enterprise: str | None = None) -> None:
        """Two example prompts, once per chat: the key is kept for years, on every replica."""
        try:
            if not await self.approvals.first_delivery(f"slack:welcome:{team}:{channel}", keep=WELCOME_KEPT):
                return
        except StoreFault as e:
            log.warning("slack welcome: store fault: %s", e)
            return  # no welcome rather than a second one later
        await self.web.post(channel, None, sb.welcome_message(), workspace=Workspace(team, enterprise))

    async def uninstalled(self, enterprise_id: str | None, team_id: str | None) -> None:
        """app_uninstalled, or the bot token revoked: forget the installation (OAuth mode)."""
        if self.oauth is None:
            log.warning("slack says the app was removed from team %s; set a new SLACK_BOT_TOKEN", team_id)
            return
        await self.oauth.uninstalled(enterprise_id, team_id)

    async def person(self, key: str) -> str:
        """R17's identity of a message's writer, as an org-wide install has it (bots/slack_oauth.py)."""
        if self.oauth is None:
            return key
        who = parse_slack_user(key)
        if who is None:
            return key
        return await self.oauth.person(key, who.enterprise, who.user) or key

    async def show_turn(
        self, chat: str, channel: str, thread_ts: str, result: TurnResult, *, workspace: Workspace | None = None
    ) -> None:
        """The turn's reply in the thread; a card (first or chained) as a new message there."""
        effect = fx.turn_effect(result)
        if isinstance(effect, fx.PostCard):
            await self._post_card(chat, channel, thread_ts, effect.offer, workspace)
        elif isinstance(effect, fx.Waiting):
            await self.web.post(channel, thread_ts, sb.waiting_message(effect.hint), workspace=workspace)
        else:
            await self.web.post(channel, thread_ts, sb.reply_message(effect.text), workspace=workspace)

    async def _post_card(
        self, chat: str, channel: str, thread_ts: str, offer: CardOffer, ws: Workspace | None = None
    ) -> None:
        route = self.route_to if offer.card.policy is not None and self.route_to != channel else None
        msg = sb.card_message(offer.card, offer.secret, offer.votes, routed_to=route)
        ts = await self.web.post(channel, thread_ts, msg, workspace=ws)
        if ts is None:  # not posted after retries: a card nobody sees must not hold the chat
            await self.approvals.withdraw(chat=chat, card_id=offer.card.card_id, why="slack post failed")
            await self.web.post(channel, thread_ts, sb.reply_message(wording.WITHDRAWN), workspace=ws)
            return
        # Many workspaces: the location names the card's own, whose token every later call uses.
        where = {"team": ws.team, "enterprise": ws.enterprise} if ws is not None and self.oauth is not None else {}
        loc = SlackCardLocation.of(channel, ts, thread_ts, **where)
        if loc is not None and route is not None:
            loc = replace(loc, routed=await self._route(route, channel, ts, offer, ws))
        if loc is not None:
            await self.approvals.record_card_location(chat=chat, card_id=offer.card.card_id, location=loc.stored())
        # A card shown again: its earlier copies (both, if routed) become read-only. After the
        # new post, so they never point "below" at a card that failed to appear.
        await self.web.update(SlackCardLocation.parse(offer.replaces), sb.shown_again_message(offer.card), workspace=ws)

    async def _route(
        self, route: str, channel: str, ts: str, offer: CardOffer, ws: Workspace | None = None
    ) -> SlackCardLocation | None:
        """Routing: the card also goes to the approvers' channel, with a link to the requesting
        thread. Returns where it went (kept with the card's location, so both update in place)."""
        link = await self.web.permalink(channel, ts, workspace=ws)
        msg = sb.card_message(offer.card, offer.secret, offer.votes, link=link)
        routed = await self.web.post(route, None, msg, workspace=ws)
        return SlackCardLocation.of(route, routed, None)

    async def _on_timer(self, event: TimerFired) -> None:
        """A reminder, an escalation or an expiry (bots/slack_timers.py), after the timer loop's
        emit returns: a Slack round trip must not hold the other timers up."""
        self.spawn(show_timer(self.web, event, self.approvals, self._show_in_chat), f"timer {event.kind}")

    async def _show_in_chat(self, chat: str, result: TurnResult, workspace: Workspace | None = None) -> None:
        where = parse_chat_key(chat)
        if where is not None:
            await self.show_turn(chat, where.channel, where.thread_ts, result, workspace=workspace)

    # ------------------------------------------------------------------ clicks

    async def _on_claimed(self, event: Claimed) -> None:
        """ "Resuming…" goes out once the turn has run `cfg.resuming_after` seconds, never before the
        claim is won; a sent one is waited for by the outcome's update, so it can never land last
        (`_settle_resuming`). Only this front end's own clicks: another front end (or process)
        shows its own."""
        clicks = self._clicks.get((event.card.card_id, event.user))
        if not clicks:
            return
        # The same person may click twice (two windows): which click won is not told, so every
        # one of them holds this update; it is dropped unsent only when none is still waiting.
        loc = SlackCardLocation.parse(event.location) or clicks[0].here
        resuming = _Resuming(holders=len(clicks))
        card, user = event.card, event.user

        async def update() -> bool:
            # built only when sent: most turns end first, and their update is never made
            return await self.web.update(loc, sb.resuming_message(card, user))

        def start() -> None:
            resuming.timer = None
            resuming.task = asyncio.ensure_future(update())

        if self.cfg.resuming_after > 0:
            resuming.timer = asyncio.get_running_loop().call_later(self.cfg.resuming_after, start)
        else:
            start()
        for click in clicks:
            click.resuming.append(resuming)

    async def click(self, body: dict[str, Any], shaped: BlockActions | None = None) -> None:
        try:
            c = parse_click(body, shaped)
        except SlackPayloadError as e:
            log.info("slack click refused: %s", e)
            self.approvals.metrics.resumes.labels("slack", "invalid").inc()  # never reaches the facade
            await self._tell_clicker(body, sb.refusal_invalid(str(e) if isinstance(e, ToldRefusal) else None))
            return
        await self.answer(c, body)

    async def open_edit(self, body: dict[str, Any]) -> None:
        """Approve with edits… (issue 32): open the modal with the card's input, for an open card
        whose secret the button carries; anything else is told to the clicker."""
        value = ((body.get("actions") or [{}])[0] or {}).get("value")
        trigger = body.get("trigger_id")
        try:
            ref = json.loads(value) if isinstance(value, str) else None
        except ValueError:
            ref = None
        if not isinstance(ref, dict) or not isinstance(trigger, str):
            await self._tell_clicker(body, sb.refusal_invalid())
            return
        card = await self.approvals.card_to_edit(card_id=str(ref.get("card")), secret=str(ref.get("secret")))
        _, channel, thread_ts = clicker(body)
        where = {"channel": channel, "ts": (body.get("container") or {}).get("message_ts"), "thread": thread_ts}
        view = slack_edit.edit_view(card, str(ref.get("secret")), where) if card is not None else None
        if view is None:
            await self._tell_clicker(body, sb.refusal_unknown() if card is None else sb.refusal_invalid())
            return
        await self.web.open_view(trigger, view, workspace=payload_workspace(body))

    async def answer(self, c: SlackClick, body: dict[str, Any]) -> None:
        """A readable click (or a submitted edit, `body` its payload): resume, then carry out what
        the result says."""
        ws = payload_workspace(body)
        try:
            actor = await self._clicker(c, ws, body)
        except StoreFault as e:  # the installation could not be read: told without a token
            log.warning("slack click: store fault: %s", e)
            await self.web.respond(_response_url(body), sb.reply_message(UNAVAILABLE))
            return
        if actor is None:
            return  # not installed (or no fresh token): told through the response_url, nothing changed
        here = SlackCardLocation.of(c.channel, c.message_ts, c.thread_ts, team=ws.team, enterprise=ws.enterprise)
        key, mine = (c.card_id, actor), _Click(here)
        self._clicks.setdefault(key, []).append(mine)
        res: ResumeResult | None = None
        try:
            res = await self.approvals.resume(
                card_id=c.card_id, user=actor, secret=c.secret, answer=c.answer, platform="slack"
            )  # platform: metrics and logs only
        except StoreFault as e:
            log.warning("slack click: store fault: %s", e)
            await self.web.ephemeral(c.channel, c.user, c.thread_ts, sb.reply_message(UNAVAILABLE), workspace=ws)
            return
        finally:
            self._forget(key, mine)
            if mine.resuming:
                # "resumed": this click ran the claimed turn, so it is over whatever other clicks wait
                await self._settle_resuming(mine, turn_over=res is not None and res.outcome == "resumed")
        loc = SlackCardLocation.parse(res.card_location) or here
        for effect in fx.resume_effects(res):
            await self._carry_out(c, effect, loc)

    async def _clicker(self, c: SlackClick, ws: Workspace, body: dict[str, Any]) -> str | None:
        """Who clicked (R17); None when the click's workspace has no usable installation (OAuth,
        issue 31): the clicker is told why through the response_url (no token needed), and
        nothing changes. StoreFault when the installations cannot be read."""
        if self.oauth is None:
            return c.actor
        actor, refusal = await self.oauth.clicker(c.actor, ws, c.user)
        if refusal is not None:
            self.approvals.metrics.resumes.labels("slack", "not_installed").inc()
            await self.web.respond(_response_url(body), sb.reply_message(f":warning: {refusal}"))
        return actor

    async def _settle_resuming(self, click: _Click, *, turn_over: bool = False) -> None:
        """Before a click shows its outcome: a "Resuming…" already sent is waited for, so it can
        never land last; one not sent yet is dropped once the turn is over (`turn_over`: this is
        the click that ran it; its outcome is next, and another click of the same person may
        still be waiting on a slow store) or no click of its claim is still waiting. update()
        logs its own faults: nothing here may skip the outcome."""
        sent = []
        for r in click.resuming:
            r.holders -= 1
            if r.task is not None:
                sent.append(r.task)
            elif turn_over or r.holders <= 0:
                r.drop()
        if sent:
            await asyncio.gather(*sent, return_exceptions=True)

    def _forget(self, key: tuple[str, str], click: _Click) -> None:
        clicks = self._clicks.get(key, [])
        if click in clicks:
            clicks.remove(click)
        if not clicks:
            self._clicks.pop(key, None)

    async def _carry_out(self, c: SlackClick, effect: fx.ClickEffect, loc: SlackCardLocation | None) -> None:
        ws = Workspace.of(loc)
        if isinstance(effect, fx.ShowVotes):
            await self._show_votes(c, effect, loc)
        elif isinstance(effect, fx.ShowOutcome):
            msg = sb.outcome_message(effect.card, effect.answer, effect.by, effect.at)
            await self.web.update(loc, msg, or_post=effect.repair)
        elif isinstance(effect, fx.ShowExpired):
            await self.web.update(loc, sb.expired_message(effect.card))
        elif isinstance(effect, fx.ShowTurn):
            where = parse_chat_key(effect.chat)
            if where is not None:
                await self.show_turn(effect.chat, where.channel, where.thread_ts, effect.result, workspace=ws)
        else:
            await self.web.ephemeral(c.channel, c.user, c.thread_ts, sb.refusal_message(effect), workspace=ws)

    async def _show_votes(self, c: SlackClick, votes: fx.ShowVotes, loc: SlackCardLocation | None) -> None:
        """A vote that did not complete the quorum: both copies of the card show the votes so far,
        re-rendered with the secret the click carried (the server never holds it, R19)."""
        if loc is None:
            return
        routed = loc.routed
        routed_to = routed.channel if routed is not None else None
        await self.web.update(loc.here, sb.card_message(votes.card, c.secret, votes.votes, routed_to=routed_to))
        if routed is not None:
            link = await self.web.permalink(loc.channel, loc.ts, workspace=Workspace.of(loc))
            await self.web.update(routed, sb.card_message(votes.card, c.secret, votes.votes, link=link))

    async def _tell_clicker(self, body: dict[str, Any], msg: sb.SlackMessage) -> None:
        """A click we could not read or queue: tell the clicker, if the payload says who and where."""
        user, channel, thread_ts = clicker(body)
        if user and channel:
            await self.web.ephemeral(channel, user, thread_ts, msg, workspace=payload_workspace(body))


def _response_url(body: dict[str, Any]) -> str | None:
    url = body.get("response_url")
    return url if isinstance(url, str) else None


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
        log.debug(
            "Slack is off: set SLACK_BOT_TOKEN with SLACK_SIGNING_SECRET (HTTP) or SLACK_APP_TOKEN (Socket Mode), "
            "or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET with SLACK_SIGNING_SECRET (many workspaces)"
        )
        return None
    front = SlackFrontEnd(approvals, cfg, client=client, admission=admission)
    app[SLACK] = front
    if cfg.http_mode:
        app.router.add_post(cfg.path, front.handle_http)
    if front.oauth is not None and front.bolt.oauth_flow is not None:
        front.oauth.mount(app, front.bolt.oauth_flow)  # GET /slack/install and /slack/oauth_redirect

    async def lifecycle(_: web.Application) -> Any:
        await front.web.warm_up()
        if cfg.socket_mode:
            await front.start_socket_mode()
        yield
        await front.close()

    app.cleanup_ctx.append(lifecycle)
    return front
