"""Bolt's `AsyncInstallationStore` and `AsyncOAuthStateStore` on this project's own store (issue 31):
the installations of an app installed by OAuth in many workspaces, and the single-use OAuth `state`.

An installation is one opaque record per workspace (or per Enterprise Grid org, for an org-wide
install) in the store's installation records (store/base.py); its tokens are sealed with Fernet
under a key from the environment (R19: the store alone holds no usable token). The app asks only
for a bot token, so one record per workspace is the whole of it: the bot and the latest
installation are the same row, and a revoked bot token or an uninstall removes it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from slack_sdk.oauth.installation_store import Bot, Installation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from chat_approvals.core.approvals import Approvals
from chat_approvals.core.models import Clock
from chat_approvals.core.ports import InstallationRecords

log = logging.getLogger("chat_approvals.slack.install")

TOKEN_KEY_ENV = "CHAT_APPROVALS_SLACK_TOKEN_KEY"
SEALED = ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token", "incoming_webhook_url")
ORG_WIDE = "*"  # the team part of an org-wide install's key: every workspace of the enterprise
NONE = "-"


class TokenKeyError(ValueError):
    """CHAT_APPROVALS_SLACK_TOKEN_KEY is missing or is not a Fernet key."""


class TokenBox:
    """Seals tokens at rest. `keys`: Fernet keys, the first seals, every one opens (rotation: put the
    new key first, keep the old ones until every record was rewritten, see docs/slack.md)."""

    def __init__(self, keys: Sequence[str]) -> None:
        if not keys:
            raise TokenKeyError(f"{TOKEN_KEY_ENV} is not set (how to make one: docs/slack.md)")
        try:
            fernets = [Fernet(k.encode()) for k in keys]
        except (ValueError, TypeError) as e:
            raise TokenKeyError(
                f"{TOKEN_KEY_ENV} holds a value that is not a Fernet key (32 url-safe base64 bytes)"
            ) from e
        self._first = fernets[0]
        self._all = MultiFernet(fernets)

    @classmethod
    def parse(cls, value: str) -> TokenBox:
        return cls([k.strip() for k in value.split(",") if k.strip()])

    @staticmethod
    def new_key() -> str:
        return Fernet.generate_key().decode()

    def seal(self, token: str) -> str:
        return self._first.encrypt(token.encode()).decode()

    def open(self, sealed: str) -> str | None:
        """The token, or None when no key opens it (a key removed too early)."""
        try:
            return self._all.decrypt(sealed.encode()).decode()
        except InvalidToken:
            return None

    def is_current(self, sealed: str) -> bool:
        """Sealed under the first key (else it is re-sealed when next read)."""
        try:
            self._first.decrypt(sealed.encode())
            return True
        except InvalidToken:
            return False


def record_key(enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None) -> str:
    """`slack:E|-:T|*`: an org-wide install is the enterprise's, whatever workspace asks."""
    team = ORG_WIDE if is_enterprise_install else (team_id or NONE)
    return f"slack:{enterprise_id or NONE}:{team}"


def _plain(name: str, value: Any) -> Any:
    """JSON for a record field: a time as seconds (whole ones for an expiry, as Slack's models read it)."""
    if isinstance(value, datetime):
        return int(value.timestamp()) if name.endswith("expires_at") else value.timestamp()
    return value


class StoreInstallations(AsyncInstallationStore):
    """Installations in the project's store, tokens sealed (R19). Lookups try the workspace's own
    record, then its enterprise's org-wide one, as Slack's own stores do."""

    def __init__(self, records: InstallationRecords, box: TokenBox) -> None:
        self.records = records
        self.box = box
        self._logger = log

    @property
    def logger(self) -> logging.Logger:
        return self._logger

    # ------------------------------------------------------------------ writes

    async def async_save(self, installation: Installation) -> None:
        await self._put(installation.to_dict_for_copying())

    async def async_save_bot(self, bot: Bot) -> None:
        """A rotated bot token: the record keeps everything else it held."""
        key = record_key(bot.enterprise_id, bot.team_id, bot.is_enterprise_install)
        old = await self._read(key)
        fields = {**(old or {}), **bot.to_dict_for_copying()}
        await self._put(fields)

    async def _put(self, fields: Mapping[str, Any]) -> None:
        plain = {k: _plain(k, v) for k, v in fields.items() if k != "custom_values"}
        for name in SEALED:
            if plain.get(name):
                plain[name] = self.box.seal(str(plain[name]))
        key = record_key(plain.get("enterprise_id"), plain.get("team_id"), plain.get("is_enterprise_install"))
        await self.records.put_installation(key, json.dumps(plain, sort_keys=True))

    # ------------------------------------------------------------------ reads

    async def _read(self, key: str) -> dict[str, Any] | None:
        raw = await self.records.installation(key)
        if raw is None:
            return None
        fields: dict[str, Any] = json.loads(raw)
        stale = False
        for name in SEALED:
            sealed = fields.get(name)
            if sealed:
                token = self.box.open(sealed)
                if token is None:
                    log.error("slack installation %s: no key in %s opens its tokens", key, TOKEN_KEY_ENV)
                    return None
                stale = stale or not self.box.is_current(sealed)
                fields[name] = token
        if stale:  # sealed under an older key: sealed again under the first one
            await self._put(fields)
        return fields

    async def _find(
        self, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None
    ) -> dict[str, Any] | None:
        if not is_enterprise_install and team_id:
            found = await self._read(record_key(enterprise_id, team_id, False))
            if found is not None:
                return found
        if enterprise_id:
            return await self._read(record_key(enterprise_id, None, True))
        return None

    async def async_find_bot(
        self, *, enterprise_id: str | None, team_id: str | None, is_enterprise_install: bool | None = False
    ) -> Bot | None:
        fields = await self._find(enterprise_id, team_id, is_enterprise_install)
        if fields is None or not fields.get("bot_token"):
            return None
        return Installation(**fields).to_bot()

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        fields = await self._find(enterprise_id, team_id, is_enterprise_install)
        if fields is None or (user_id is not None and fields.get("user_id") != user_id):
            return None  # only the bot is kept: no other user's installation
        return Installation(**fields)

    # ------------------------------------------------------------------ removals

    async def _delete(self, enterprise_id: str | None, team_id: str | None) -> None:
        """Slack's uninstall and revocation events name the workspace (team) or, for an org-wide
        install, the enterprise alone."""
        keys = [record_key(enterprise_id, team_id, False)] if team_id else []
        if enterprise_id and not team_id:
            keys.append(record_key(enterprise_id, None, True))
        for key in keys:
            if await self.records.delete_installation(key):
                log.info("slack installation %s removed", key)

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self._delete(enterprise_id, team_id)

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        if user_id is None:
            await self._delete(enterprise_id, team_id)
        # a user's own token is never kept: nothing else to remove

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self._delete(enterprise_id, team_id)


class SignedStates(AsyncOAuthStateStore):
    """The OAuth `state`: a random nonce and its expiry, HMAC'd with a key only this app holds, and
    single-use (the store's delivery dedupe claims it once, on every replica)."""

    def __init__(self, approvals: Approvals, key: str, clock: Clock, expiration_seconds: int = 600) -> None:
        self.approvals = approvals
        self._key = hashlib.sha256(b"chat-approvals oauth state\x00" + key.encode()).digest()
        self.clock = clock
        self.expiration_seconds = expiration_seconds

    @property
    def logger(self) -> logging.Logger:
        return log

    def _mac(self, body: str) -> str:
        digest = hmac.new(self._key, body.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        body = f"{secrets.token_urlsafe(18)}.{int(self.clock.now()) + self.expiration_seconds}"
        return f"{body}.{self._mac(body)}"

    async def async_consume(self, state: str) -> bool:
        parts = state.split(".") if isinstance(state, str) and len(state) <= 200 else []
        if len(parts) != 3 or not parts[1].isdigit():
            log.info("slack oauth state refused: not one of ours")
            return False
        body = f"{parts[0]}.{parts[1]}"
        if not hmac.compare_digest(self._mac(body), parts[2]):
            log.info("slack oauth state refused: forged")
            return False
        if int(parts[1]) < self.clock.now():
            log.info("slack oauth state refused: expired")
            return False
        if not await self.approvals.first_delivery(f"slack:oauth-state:{parts[0]}", keep=self.expiration_seconds + 60):
            log.info("slack oauth state refused: used before")
            return False
        return True
