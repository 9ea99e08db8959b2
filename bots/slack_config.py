"""The Slack front end's configuration, read once (`SlackConfig.from_env`), and the Web API
client it makes (retries only where they are safe)."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web import async_base_client as _sdk_client
from slack_sdk.web import internal_utils as _sdk_utils
from slack_sdk.web.async_client import AsyncWebClient

from chat_approvals.bots import slack_compat

DEFAULT_API_URL = "https://slack.com/api/"
COMMAND = "/approvals"  # as in manifest/slack*.yaml
DEFAULT_RESUMING_AFTER = 0.5  # seconds: well inside the second after which a wait is felt
# What the app asks for when installed by OAuth (as in manifest/slack.yaml; docs/slack.md says why each).
DEFAULT_SCOPES = "app_mentions:read,im:history,chat:write,commands,usergroups:read,channels:read,groups:read"


class SlackConfig(BaseModel):
    """Slack credentials and endpoints. HTTP mode needs the signing secret and the bot token;
    Socket Mode needs the app-level token (`xapp-`) and the bot token. Many workspaces (issue 31):
    the OAuth app's client id and secret instead of a bot token, with the signing secret (HTTP
    only: the install's redirect is a web page) and the key that seals tokens at rest."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bot_token: str = ""
    signing_secret: str = ""
    app_token: str = ""
    api_url: str = DEFAULT_API_URL
    path: str = "/slack/events"
    # OAuth (many workspaces): Bolt's usual variables, and ours for the sealing key and rotation.
    client_id: str = ""
    client_secret: str = ""
    scopes: str = DEFAULT_SCOPES
    redirect_uri: str = ""
    token_key: str = ""  # Fernet key(s), comma-separated, the first seals (bots/slack_install.py)
    token_rotation_minutes: int = Field(default=120, ge=1)  # Bolt refreshes a token this long before expiry
    # A claimed card shows "Resuming…" only once its turn has run this long: a quicker turn goes
    # straight to its outcome (one chat.update less per click); 0 shows it at once.
    resuming_after: float = Field(default=DEFAULT_RESUMING_AFTER, ge=0, le=60)
    install_path: str = "/slack/install"
    redirect_path: str = "/slack/oauth_redirect"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SlackConfig:
        env = os.environ if env is None else env
        minutes = env.get("CHAT_APPROVALS_SLACK_TOKEN_ROTATION_MINUTES", "").strip() or "120"
        if not minutes.isdigit() or int(minutes) < 1:
            raise ValueError(
                "CHAT_APPROVALS_SLACK_TOKEN_ROTATION_MINUTES must be a whole number of minutes, at least 1"
            )
        resuming = env.get("CHAT_APPROVALS_SLACK_RESUMING_AFTER", "").strip() or str(DEFAULT_RESUMING_AFTER)
        try:
            resuming_after = float(resuming)
        except ValueError:
            resuming_after = -1.0
        if not 0 <= resuming_after <= 60:  # also refuses nan and inf
            raise ValueError("CHAT_APPROVALS_SLACK_RESUMING_AFTER must be a number of seconds from 0 to 60")
        return cls(
            bot_token=env.get("SLACK_BOT_TOKEN", ""),
            signing_secret=env.get("SLACK_SIGNING_SECRET", ""),
            app_token=env.get("SLACK_APP_TOKEN", ""),
            api_url=env.get("CHAT_APPROVALS_SLACK_API_URL", "") or DEFAULT_API_URL,
            client_id=env.get("SLACK_CLIENT_ID", ""),
            client_secret=env.get("SLACK_CLIENT_SECRET", ""),
            scopes=env.get("SLACK_SCOPES", "") or DEFAULT_SCOPES,
            redirect_uri=env.get("SLACK_REDIRECT_URI", ""),
            token_key=env.get("CHAT_APPROVALS_SLACK_TOKEN_KEY", ""),
            token_rotation_minutes=int(minutes),
            resuming_after=resuming_after,
        )

    @property
    def oauth(self) -> bool:
        """Installed by OAuth in many workspaces (each click uses its workspace's token)."""
        return bool(self.client_id and self.client_secret)

    def _check_oauth(self) -> None:
        if bool(self.client_id) != bool(self.client_secret):
            given, missing = (
                ("SLACK_CLIENT_ID", "SLACK_CLIENT_SECRET")
                if self.client_id
                else ("SLACK_CLIENT_SECRET", "SLACK_CLIENT_ID")
            )
            raise ValueError(f"{given} is set but {missing} is not (both are on the app's Basic Information page)")
        if not self.oauth:
            return
        if self.bot_token:
            raise ValueError(
                "SLACK_BOT_TOKEN and SLACK_CLIENT_ID are both set: one workspace with its bot token, or many "
                "installed by OAuth; unset one"
            )
        if self.app_token or not self.signing_secret:
            raise ValueError("OAuth installs need SLACK_SIGNING_SECRET (HTTP events) and no SLACK_APP_TOKEN")
        from chat_approvals.bots.slack_install import TokenBox  # the key's shape, checked at start-up

        TokenBox.parse(self.token_key)

    def check(self) -> None:
        """A half-configured Slack says which variable is missing or malformed (serve calls this
        before it starts): otherwise it would be silently off, or fail at the first event."""
        self._check_oauth()
        if self.oauth:
            return
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
        return bool((self.bot_token or self.oauth) and self.signing_secret)

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
        if self.oauth:
            who = f"many workspaces by OAuth (install at {self.install_path}, redirect {self.redirect_path}), "
        else:
            who = "one workspace (SLACK_BOT_TOKEN), "
        return who + " and ".join(modes) + f", Web API {self.base_url}"

    @property
    def base_url(self) -> str:
        # slack_sdk joins with urljoin(base_url, method): without the trailing "/" the calls
        # would silently go to the host's root.
        return self.api_url if self.api_url.endswith("/") else self.api_url + "/"


if TYPE_CHECKING:
    _Adapter = logging.LoggerAdapter[logging.Logger]
else:
    _Adapter = logging.LoggerAdapter


class SdkLog(_Adapter):
    """slack_sdk's logger as slack_sdk should read it. slack_sdk builds its debug lines (each
    request's whole body and each response, as text) whenever `logger.level <= DEBUG`, and its
    own logger, left at NOTSET (0), always passes that test: about 50 us of CPU a call, for lines
    never written. Here `level` is the level in effect, so they are built only when written."""

    def __init__(self, logger: logging.Logger) -> None:
        super().__init__(logger, None)

    @property
    def level(self) -> int:
        return self.logger.getEffectiveLevel()


SDK_LOG = SdkLog(logging.getLogger("slack_sdk.web.async_base_client"))  # slack_sdk's own name for it


MAX_URLS = 256  # (base URL, method) pairs: a process calls a handful of methods on one or two bases


def remember_urls() -> None:
    """slack_sdk joins its base URL and each call's method with `urljoin` (a parse of both) on every
    Web API call; the URL depends on those two strings alone, so it is made once per pair and kept:
    the same URL, about 15 us less a call. Idempotent."""
    if not (hasattr(_sdk_client, "_get_url") and hasattr(_sdk_utils, "_get_url")):
        return  # a slack_sdk that makes its URLs another way: nothing to keep (the dependency is a range)
    if not isinstance(_sdk_client._get_url, functools._lru_cache_wrapper):
        _sdk_client._get_url = functools.lru_cache(maxsize=MAX_URLS)(_sdk_utils._get_url)


def web_client(cfg: SlackConfig, token: str | None = None) -> AsyncWebClient:
    """Retries only where it is safe: a 429 was not processed, a refused connection sent nothing."""
    remember_urls()
    slack_compat.apply()  # Block Kit's to_dict and the deprecation check, cheaper (bots/slack_compat.py)
    return AsyncWebClient(
        token=token,
        base_url=cfg.base_url,
        logger=SDK_LOG,  # type: ignore[arg-type]  # a Logger's methods, and the level in effect
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=3),
        ],
    )
