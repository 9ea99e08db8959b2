"""The Teams front end: botbuilder-core's TeamsActivityHandler at `/api/messages` on the project's
aiohttp server. A thin adapter: activity -> `cards.adaptive` parser -> `Approvals` facade ->
`cards.adaptive` renderer -> Teams. It never touches the store or the agent.

- A message runs one agent turn; a pause posts the approval card and records where it is (the
  conversation reference), so whichever process finishes the resume can update it. A turn longer
  than `message_budget` is answered at once (typing) and its end is posted from that reference.
- An `adaptiveCard/action` invoke (Action.Execute) is answered within Teams' limits with the card
  that replaces the clicked one: the outcome when the resume finishes inside `invoke_budget`,
  else the resolved ("resuming…") state, and the outcome later from the stored reference.
- Text commands: `approvals`, `revoke HOST_OR_PACKAGE`, `revoke all`, `help`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

from aiohttp import web
from botbuilder.core import InvokeResponse, MessageFactory, TurnContext
from botbuilder.core.teams import TeamsActivityHandler, TeamsInfo
from botbuilder.integration.aiohttp import CloudAdapter
from botbuilder.schema import Activity, ActivityTypes, Attachment, ResourceResponse
from pydantic import BaseModel, ConfigDict

from chat_approvals.bots import teams_compat
from chat_approvals.bots.admission import Admission
from chat_approvals.bots.teams_auth import TokenValidator
from chat_approvals.bots.teams_compat import TeamsAuth, TeamsCardLocation
from chat_approvals.cards import adaptive
from chat_approvals.cards.identity import TeamsUser, parse_teams_user, unverified
from chat_approvals.core import wording
from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import ApprovalCard, ResumeResult, StoreFault, TurnResult

log = logging.getLogger(__name__)

PLATFORM = "teams"
ROUTE = "/api/messages"

HELP = (
    "I pause an agent's turn when its sandbox needs a site or a package you have not approved, and "
    "ask you here. Commands: 'approvals' lists what you approved in this chat (with a Revoke button "
    "each); 'revoke HOST_OR_PACKAGE' (or 'revoke tool:NAME') takes one back; 'revoke all' takes back "
    "everything; 'help' "
    "shows this. Anything else goes to the agent."
)
NO_IDENTITY = (
    "I cannot tell who you are from this message (Teams sent no tenant or Entra object id), so I run nothing for it."
)
WAITING = "Waiting for your approval: this chat already has an open request. Answer that card first."


class TeamsConfig(BaseModel):
    """The Teams front end's settings, from `CHAT_APPROVALS_TEAMS_*` (see `from_env`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auth: TeamsAuth = TeamsAuth()
    invoke_budget: float = 2.0  # seconds the click waits for the resume before answering "resuming…"
    message_budget: float = 5.0  # seconds a message waits for its turn before the reply goes out proactively

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TeamsConfig:
        def get(name: str) -> str:
            return env.get(f"CHAT_APPROVALS_TEAMS_{name}", "").strip()

        _check_names(get)
        key = get("CERT_KEY")
        if not key and get("CERT_KEY_FILE"):
            try:
                key = Path(get("CERT_KEY_FILE")).read_text()
            except OSError as e:
                raise ValueError(f"CHAT_APPROVALS_TEAMS_CERT_KEY_FILE: cannot read it ({e.strerror})") from None
        app_type = get("APP_TYPE") or "MultiTenant"
        if app_type not in ("MultiTenant", "SingleTenant"):
            raise ValueError(f"CHAT_APPROVALS_TEAMS_APP_TYPE must be MultiTenant or SingleTenant, not {app_type!r}")
        auth = TeamsAuth(
            app_id=get("APP_ID"),
            app_password=get("APP_PASSWORD"),
            certificate_thumbprint=get("CERT_THUMBPRINT"),
            certificate_private_key=key,
            tenant_id=get("TENANT_ID"),
            app_type=app_type,  # type: ignore[arg-type]
        )
        auth.check()
        budget, message = _seconds(get, "INVOKE_BUDGET"), _seconds(get, "MESSAGE_BUDGET")
        return cls(
            auth=auth,
            invoke_budget=2.0 if budget is None else budget,
            message_budget=5.0 if message is None else message,
        )


_T = "CHAT_APPROVALS_TEAMS_"


def _check_names(get: Callable[[str], str]) -> None:
    """A half-set Teams identity names the variable that is missing (TeamsAuth.check then catches
    the rest): otherwise the front end would refuse every message, or be silently unauthenticated."""
    secret = [n for n in ("APP_PASSWORD", "CERT_THUMBPRINT", "CERT_KEY", "CERT_KEY_FILE") if get(n)]
    if secret and not get("APP_ID"):
        raise ValueError(f"{_T}{secret[0]} is set but {_T}APP_ID (the bot's Microsoft App id) is not")
    if get("APP_ID") and not secret:
        raise ValueError(f"{_T}APP_ID is set but neither {_T}APP_PASSWORD nor {_T}CERT_THUMBPRINT (with its key) is")
    if get("CERT_THUMBPRINT") and not (get("CERT_KEY") or get("CERT_KEY_FILE")):
        raise ValueError(f"{_T}CERT_THUMBPRINT is set but neither {_T}CERT_KEY nor {_T}CERT_KEY_FILE is")
    if (get("CERT_KEY") or get("CERT_KEY_FILE")) and not get("CERT_THUMBPRINT") and not get("APP_PASSWORD"):
        raise ValueError(f"{_T}CERT_KEY is set but {_T}CERT_THUMBPRINT is not")
    if get("APP_TYPE") == "SingleTenant" and not get("TENANT_ID"):
        raise ValueError(f"{_T}APP_TYPE is SingleTenant but {_T}TENANT_ID is not set")


def _seconds(get: Callable[[str], str], name: str) -> float | None:
    text = get(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{_T}{name} must be a number of seconds, not {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{_T}{name} must be a positive number of seconds, not {text!r}")
    return value


# --------------------------------------------------------------------------- identity


def chat_key(activity: Activity) -> str:
    """Tenant + conversation. A channel reply chain is part of its conversation id (`;messageid=`)."""
    tenant = teams_compat.tenant_of(activity) or "unknown"
    conv = activity.conversation.id if activity.conversation is not None else ""
    return f"teams:{tenant}:{conv}"


def user_of(activity: Activity) -> str | None:
    """R17: tenant + Entra object id (cards.identity). None without either: the channel's `from.id`
    is never a fallback, so such an activity can neither start a turn nor answer a card."""
    who = activity.from_property
    user = TeamsUser.of(teams_compat.tenant_of(activity), who.aad_object_id if who is not None else None)
    return user.key if user is not None else None


def name_of(activity: Activity) -> str:
    who = activity.from_property
    return str((who.name if who is not None else None) or "someone")


class Command(NamedTuple):
    name: Literal["approvals", "revoke", "help"]
    arg: str = ""


def parse_command(text: str) -> Command | None:
    """The text commands (listed in the app manifest). Anything else is a message for the agent."""
    words = text.strip().split(maxsplit=1)
    if not words:
        return Command("help")
    head = words[0].lower().lstrip("/")
    rest = words[1].strip() if len(words) > 1 else ""
    if head in ("approvals", "grants") and not rest:
        return Command("approvals")
    if head == "help" and not rest:
        return Command("help")
    if head == "revoke":
        return Command("revoke", rest)
    return None


def _card_activity(card: dict[str, Any], *, activity_id: str | None = None) -> Activity:
    attachment = Attachment(content_type=adaptive.CONTENT_TYPE, content=card)
    if activity_id is None:
        return MessageFactory.attachment(attachment)
    return Activity(type=ActivityTypes.message, id=activity_id, attachments=[attachment])


# --------------------------------------------------------------------------- the bot


class ApprovalsTeamsBot(TeamsActivityHandler):
    def __init__(
        self, approvals: Approvals, adapter: CloudAdapter, cfg: TeamsConfig, admission: Admission | None = None
    ) -> None:
        super().__init__()
        self.approvals = approvals
        self.adapter = adapter
        self.cfg = cfg
        self.admission = admission or Admission(approvals.metrics)
        self._background: set[asyncio.Task[None]] = set()
        policy = getattr(approvals, "policy", None)
        self.route_to: str | None = policy.routing.teams_conversation if policy is not None else None

    # --- messages -------------------------------------------------------------------
    async def on_message_activity(self, turn_context: TurnContext) -> None:
        try:
            await self._message(turn_context)
        except StoreFault as e:  # the one place a message maps a store fault: a card saying so
            log.warning("teams message: store fault: %s", e)
            await turn_context.send_activity(
                _card_activity(adaptive.message_card("Store unavailable", wording.STORE_UNAVAILABLE))
            )

    async def _message(self, turn_context: TurnContext) -> None:
        act = turn_context.activity
        if act.value is not None and not act.text:
            await turn_context.send_activity("That card needs a Teams client with Universal Actions.")
            return
        text = (TurnContext.remove_recipient_mention(act) or act.text or "").strip()
        chat, user = chat_key(act), user_of(act)
        if user is None:
            await turn_context.send_activity(NO_IDENTITY)
            return
        if act.id and not await self.approvals.first_delivery(f"teams:activity:{chat}:{act.id}"):
            log.info("teams: redelivered activity %s ignored", act.id)
            return
        command = parse_command(text)
        if command is not None:
            await self._command(turn_context, command, chat, user)
            return
        location = TeamsCardLocation.of(act)
        task = asyncio.ensure_future(self.approvals.run_turn(chat=chat, user=user, text=text, platform=PLATFORM))
        await asyncio.wait({task}, timeout=self.cfg.message_budget)
        if task.done():
            await self._deliver(turn_context, chat, task.result(), location)
            return
        # Teams redelivers a message it got no answer to within ~15 s: answer now, post the end later.
        with contextlib.suppress(Exception):
            await turn_context.send_activity(Activity(type=ActivityTypes.typing))
        self._spawn(self._deliver_later(task, chat, location))

    async def _deliver_later(self, task: asyncio.Future[TurnResult], chat: str, location: TeamsCardLocation) -> None:
        result = await task

        async def work(turn: TurnContext) -> None:
            await self._deliver(turn, chat, result, location)

        await teams_compat.continue_conversation(self.adapter, location, work, app_id=self.cfg.auth.app_id)

    async def _command(self, ctx: TurnContext, command: Command, chat: str, user: str) -> None:
        if command.name == "help":
            await ctx.send_activity(_card_activity(adaptive.message_card("Chat Approvals", HELP)))
        elif command.name == "approvals":
            grants = await self.approvals.grants(user=user, chat=chat)
            await ctx.send_activity(_card_activity(adaptive.grants_card(grants)))
        elif not command.arg:
            await ctx.send_activity("Say what to revoke: `revoke HOST_OR_PACKAGE` or `revoke all`.")
        else:
            revoked = await self.approvals.revoke(user=user, chat=chat, subject=command.arg)
            remaining = await self.approvals.grants(user=user, chat=chat)
            await ctx.send_activity(_card_activity(adaptive.revoked_card(revoked, remaining)))

    async def _deliver(self, ctx: TurnContext, chat: str, result: TurnResult, location: TeamsCardLocation) -> None:
        """Send what a turn (or a resume) ended with. A new card's location is stored for later updates."""
        if result.status in ("answered", "busy"):
            await ctx.send_activity(MessageFactory.text(result.text or "(the agent gave no text)"))
        elif result.status == "waiting":
            await ctx.send_activity(MessageFactory.text(WAITING))
        elif result.offer is not None:
            offer = result.offer
            try:
                sent: ResourceResponse | None = await ctx.send_activity(
                    _card_activity(adaptive.approval_card(offer.card, offer.secret))
                )
            except Exception as e:  # not posted after retries: a card nobody sees must not hold the chat
                log.warning("teams: card %s could not be posted: %s", offer.card.card_id, e)
                await self.approvals.withdraw(chat=chat, card_id=offer.card.card_id, why="teams post failed")
                await ctx.send_activity(MessageFactory.text(wording.WITHDRAWN))
                return
            if sent is None or not sent.id:
                log.warning("teams: card %s posted without an activity id; it cannot be updated", offer.card.card_id)
                return
            posted = location.here.posted_as(str(sent.id))
            if offer.card.policy is not None and self.route_to and self.route_to != posted.conversation_id:
                posted = replace(posted, routed=await self._route(posted, offer.card, offer.secret))
            where = posted.stored()
            if not await self.approvals.record_card_location(chat=chat, card_id=offer.card.card_id, location=where):
                log.warning("teams: card %s location not recorded (no longer open)", offer.card.card_id)
            # A card shown again: its earlier copies (both, if routed) become read-only. After the
            # new post, so they never point "below" at a card that failed to appear.
            old = TeamsCardLocation.parse(offer.replaces)
            if old is not None:
                await self._replace_in(old.here, adaptive.shown_again_card(offer.card))
                await self._replace_in(old.routed, adaptive.shown_again_card(offer.card))

    # --- routing: a copy of the card in the approvers' conversation ---------------------
    async def _route(self, where: TeamsCardLocation, card: ApprovalCard, secret: str) -> TeamsCardLocation | None:
        """Post the card to the policy's approvers' conversation too, with a link to the requesting
        one; returns where it went (kept with the card's location, so both update in place)."""
        assert self.route_to is not None
        target = where.in_conversation(self.route_to)
        sent: list[str] = []

        async def work(turn: TurnContext) -> None:
            r = await turn.send_activity(_card_activity(adaptive.approval_card(card, secret, link=where.deep_link)))
            if r is not None and r.id:
                sent.append(str(r.id))

        try:
            await teams_compat.continue_conversation(self.adapter, target, work, app_id=self.cfg.auth.app_id)
        except Exception as e:  # the requester's card stands; the approvers' copy is a convenience
            log.warning("teams: card %s not posted to the approvers' conversation: %s", card.card_id, e)
            return None
        return target.posted_as(sent[0]) if sent else None

    async def _replace_in(self, location: TeamsCardLocation | None, card: dict[str, Any]) -> None:
        """Replace a posted card for everyone in its conversation (from any process)."""
        if location is None or not location.activity_id:
            return
        activity_id = location.activity_id

        async def work(turn: TurnContext) -> None:
            await turn.update_activity(_card_activity(card, activity_id=activity_id))

        try:
            await teams_compat.continue_conversation(self.adapter, location, work, app_id=self.cfg.auth.app_id)
        except Exception as e:
            log.warning("teams: a card could not be updated: %s", e)

    async def _show_votes(self, ctx: TurnContext, r: ResumeResult, secret: str) -> dict[str, Any]:
        """A vote that did not complete the quorum: every copy shows the votes so far, re-rendered
        with the secret the click carried (the server never holds it, R19)."""
        assert r.card is not None
        act, names = ctx.activity, []
        for v in r.votes or []:
            if v.user == user_of(act):
                names.append(name_of(act))
            else:
                names.append(await self._display_name(ctx, v.user) or "an approver")
        location = TeamsCardLocation.parse(r.card_location)
        card = adaptive.approval_card(r.card, secret, voters=names)
        link = location.deep_link if location is not None else None
        routed_card = adaptive.approval_card(r.card, secret, voters=names, link=link)
        if location is not None:
            await self._replace_in(location.here, card)
            await self._replace_in(location.routed, routed_card)
        here = act.conversation.id if act.conversation else None
        return card if location is None or here == location.conversation_id else routed_card

    # --- invokes --------------------------------------------------------------------
    async def on_invoke_activity(self, turn_context: TurnContext) -> InvokeResponse | None:
        if turn_context.activity.name == "adaptiveCard/action":
            try:
                return await self._card_action(turn_context)
            except StoreFault as e:  # the one place an invoke maps a store fault
                log.warning("teams card action: store fault: %s", e)
                return teams_compat.invoke_response(503, adaptive.invoke_error_body(503, wording.STORE_UNAVAILABLE))
            except Exception:  # answer Teams with a clear error, not a hung card
                log.exception("teams: card action failed")
                return teams_compat.invoke_response(500, adaptive.invoke_error_body(500, "The app failed; try again."))
        result: InvokeResponse | None = await super().on_invoke_activity(turn_context)
        return result

    async def _card_action(self, ctx: TurnContext) -> InvokeResponse:
        act = ctx.activity
        try:
            click = adaptive.parse_invoke(act.value)
        except adaptive.InvalidInvoke as exc:
            self.approvals.metrics.resumes.labels(PLATFORM, "invalid").inc()  # never reaches the facade
            return teams_compat.invoke_response(400, adaptive.invoke_error_body(400, str(exc)))
        chat, user = chat_key(act), user_of(act) or unverified(PLATFORM)  # unverified: refused like a stranger
        if isinstance(click, adaptive.RevokeClick):
            revoked = await self.approvals.revoke(user=user, chat=chat, subject=click.subject)
            remaining = await self.approvals.grants(user=user, chat=chat)
            return self._card(adaptive.revoked_card(revoked, remaining))

        claimed = asyncio.Event()
        asked: list[ApprovalCard] = []

        async def on_claimed(card: ApprovalCard, location: dict[str, str] | None) -> None:
            asked.append(card)  # what the resolved card repeats
            claimed.set()

        def resume() -> Coroutine[Any, Any, ResumeResult]:
            return self.approvals.resume(
                card_id=click.card_id,
                user=user,
                secret=click.secret,
                answer=click.answer,
                on_claimed=on_claimed,
                platform=PLATFORM,  # metrics and logs only
            )

        # Queued behind the clicks before it (bots/admission.py); the wait counts in the budget.
        task = self.admission.submit(resume, platform=PLATFORM)
        if task is None:  # the queue is full: an error answer leaves the card in place, answerable
            self.approvals.metrics.resumes.labels(PLATFORM, "busy").inc()
            return teams_compat.invoke_response(503, adaptive.invoke_error_body(503, wording.TOO_MANY_CLICKS))
        await asyncio.wait({task}, timeout=self.cfg.invoke_budget)
        if not task.done() and not claimed.is_set():
            # Not even claimed yet: give the claim (one store write) a little longer, within Teams' limit.
            waiter: asyncio.Future[Any] = asyncio.ensure_future(claimed.wait())
            await asyncio.wait({task, waiter}, timeout=self.cfg.invoke_budget, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        if not task.done():
            self._finish_later(task, name_of(act))
            if not asked:
                return self._card(adaptive.message_card("Answer recorded", "Resuming the agent's turn…"))
            return self._card(adaptive.resolved_card(asked[0], click.answer, name_of(act)))
        r = task.result()
        if r.outcome == "invalid":
            return teams_compat.invoke_response(400, adaptive.invoke_error_body(400, r.message))
        if r.outcome == "vote_recorded" and r.card is not None:
            return self._card(await self._show_votes(ctx, r, click.secret))
        if r.outcome == "resumed":
            await self._after_resume(ctx, r, name_of(act), in_invoke=True)
        elif r.outcome == "replayed" and r.result is not None and r.result.offer is not None:
            # the replay re-offered the still-open chained card with a new secret: post it
            await self._deliver(ctx, r.result.offer.card.chat, r.result, TeamsCardLocation.of(act))
        return self._card(await self._outcome_card(ctx, r))

    def _card(self, card: dict[str, Any]) -> InvokeResponse:
        return teams_compat.invoke_response(200, adaptive.invoke_response_body(card))

    async def _outcome_card(self, ctx: TurnContext, r: ResumeResult) -> dict[str, Any]:
        by = name_of(ctx.activity) if r.answered_by == user_of(ctx.activity) else "someone else"
        if r.outcome == "resumed" and r.card is not None and r.answer is not None:
            return adaptive.outcome_card(r.card, r.answer, by, r.answered_at or self.approvals.clock.now(), r.result)
        if r.outcome == "replayed" and r.card is not None and r.answer is not None:
            when = adaptive.format_time(r.answered_at) if r.answered_at else "earlier"
            verdict = "approved" if r.answer.approved else "denied"
            return adaptive.refusal_card("answered", f"It was {verdict} by {by} at {when}.", card=r.card)
        if r.outcome == "forbidden":
            if r.card is not None and r.card.policy is not None:  # the policy's own sentence says who may
                return adaptive.refusal_card("forbidden", r.message, card=r.card)
            owner = await self._display_name(ctx, r.owner) if r.owner else None  # None: "the person who asked"
            return adaptive.refusal_card("forbidden", card=r.card, owner=owner)
        if r.outcome in ("expired", "in_progress"):
            return adaptive.refusal_card(r.outcome, r.message, card=r.card)
        return adaptive.refusal_card("unknown", r.message or "This card is not known here.")

    async def _display_name(self, ctx: TurnContext, user: str) -> str | None:
        """Who may answer, as a name when Teams can tell us quickly (by Entra object id)."""
        who = parse_teams_user(user)
        if who is None:
            return None
        try:
            member = await asyncio.wait_for(TeamsInfo.get_member(ctx, who.aad_object_id), timeout=2.0)
            return str(member.name) if member.name else None
        except Exception as e:  # a lookup failure only costs the nicer wording
            log.info("teams: member name lookup failed: %s", e)
            return None

    # --- after the resume: the card's outcome and the agent's reply --------------------
    async def _after_resume(self, ctx: TurnContext | None, r: ResumeResult, by: str, *, in_invoke: bool) -> None:
        """Post the agent's reply (or the chained card). When the click was answered earlier with
        "resuming…", or others share the conversation, also replace the card itself for everyone."""
        location = TeamsCardLocation.parse(r.card_location)
        if location is None and ctx is not None:
            location = TeamsCardLocation.of(ctx.activity)
        result = r.result or TurnResult(status="answered")
        chat = r.card.chat if r.card is not None else ""
        personal = self._is_personal(location)
        if ctx is not None and chat and chat_key(ctx.activity) != chat:
            # answered from the approvers' conversation: the reply belongs to the requesting one
            ctx, in_invoke = None, False
        if r.card is not None and r.answer is not None and location is not None:
            outcome = adaptive.outcome_card(r.card, r.answer, by, r.answered_at or 0.0, result)
            await self._replace_in(location.routed, outcome)

        async def work(turn: TurnContext) -> None:
            here = location or TeamsCardLocation.of(turn.activity)
            replace_card = bool(here.activity_id) and (not in_invoke or not personal)
            if replace_card and r.card is not None and r.answer is not None:
                card = adaptive.outcome_card(r.card, r.answer, by, r.answered_at or 0.0, result)
                await turn.update_activity(_card_activity(card, activity_id=here.activity_id))
            await self._deliver(turn, chat, result, here.here)

        if ctx is not None:
            await work(ctx)
        elif location is not None:
            await teams_compat.continue_conversation(self.adapter, location, work, app_id=self.cfg.auth.app_id)
        else:
            log.warning("teams: card %s resumed but has no stored location to answer in", r.card and r.card.card_id)

    @staticmethod
    def _is_personal(location: TeamsCardLocation | None) -> bool:
        """A one-to-one chat with the bot, read from the parsed conversation reference."""
        if location is None:
            return False
        try:
            return location.is_personal
        except ValueError as e:  # a stored reference we cannot read: treat the chat as shared
            log.warning("teams: stored conversation reference unreadable: %s", e)
            return False

    def _finish_later(self, task: asyncio.Future[ResumeResult], by: str) -> None:
        async def finish() -> None:
            r = await task
            if r.outcome == "resumed":
                await self._after_resume(None, r, by, in_invoke=False)
            else:
                log.info("teams: late resume ended %s: %s", r.outcome, r.message)

        self._spawn(finish())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        bg = asyncio.ensure_future(work)
        self._background.add(bg)
        bg.add_done_callback(self._done)

    def _done(self, bg: asyncio.Task[None]) -> None:
        self._background.discard(bg)
        if not bg.cancelled() and bg.exception() is not None:
            log.error("teams: finishing a resume failed", exc_info=bg.exception())

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for resumes still finishing after their click was answered (shutdown, tests)."""
        await self.admission.drain(timeout)
        if self._background:
            await asyncio.wait(set(self._background), timeout=timeout)

    # Nothing to do on install/membership events; skip botbuilder's member lookups for them.
    async def on_conversation_update_activity(self, turn_context: TurnContext) -> None:
        return None

    async def on_installation_update(self, turn_context: TurnContext) -> None:
        return None


# --------------------------------------------------------------------------- mounting


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TeamsFrontEnd(NamedTuple):
    bot: ApprovalsTeamsBot
    adapter: CloudAdapter
    startup_note: str


async def _on_error(context: TurnContext, error: Exception) -> None:
    log.error("teams: turn failed: %s", error, exc_info=error)
    if context.activity.type == ActivityTypes.message:
        with contextlib.suppress(Exception):
            await context.send_activity("Sorry: the app failed on that message.")


TEAMS: web.AppKey[TeamsFrontEnd] = web.AppKey("teams", TeamsFrontEnd)


def mount_teams(
    app: web.Application,
    approvals: Approvals,
    cfg: TeamsConfig,
    *,
    host: str,
    say: Callable[[str], Any] = print,
    validator: TokenValidator | None = None,
    admission: Admission | None = None,
) -> TeamsFrontEnd | None:
    """Add `POST /api/messages` to the server. With no Microsoft App id the endpoint would be
    unauthenticated, so it is served only when the server binds a loopback address (and it refuses
    non-loopback clients); it says which at start-up."""
    auth = cfg.auth
    auth.check()
    if not auth.enabled and not _is_loopback(host):
        say(
            f"Teams: {ROUTE} is OFF: no Microsoft App id is configured and {host} is not a loopback address "
            "(set CHAT_APPROVALS_TEAMS_APP_ID with its password or certificate, or bind to 127.0.0.1)"
        )
        return None
    if auth.enabled and validator is None:
        validator = TokenValidator(auth.app_id)  # Bot Framework's own OpenID configuration
    adapter = teams_compat.make_adapter(auth, validator if auth.enabled else None)
    adapter.on_turn_error = _on_error
    bot = ApprovalsTeamsBot(approvals, adapter, cfg, admission)

    async def messages(request: web.Request) -> web.StreamResponse:
        if not auth.enabled and not _is_loopback(request.remote):
            raise web.HTTPForbidden(text="unauthenticated Teams endpoint: local clients only")
        return await teams_compat.process(adapter, request, bot, auth_enabled=auth.enabled)

    async def drain(_app: web.Application) -> None:
        await bot.drain()

    async def close_clients(_app: web.Application) -> None:
        await teams_compat.close_clients(adapter)  # on cleanup: after drain, so no turn still posts

    app.router.add_post(ROUTE, messages)
    app.on_shutdown.append(drain)
    app.on_cleanup.append(close_clients)
    if auth.enabled and validator is not None:
        keys = validator

        async def signing_keys(_app: web.Application) -> AsyncIterator[None]:
            await keys.start()  # bounded: a slow key endpoint delays start-up by fetch_timeout at most
            yield
            await keys.close()

        app.cleanup_ctx.append(signing_keys)
    if auth.enabled:
        tenant = f", tenant {auth.tenant_id}" if auth.app_type == "SingleTenant" else ""
        kind = "certificate" if auth.certificate_thumbprint else "password"
        note = f"Teams: {ROUTE} authenticated as Microsoft App {auth.app_id} ({auth.app_type}{tenant}, {kind})"
    else:
        note = f"Teams: {ROUTE} is UNAUTHENTICATED (no Microsoft App id): local clients on {host} only"
    say(note)
    front = TeamsFrontEnd(bot, adapter, note)
    app[TEAMS] = front
    return front
