"""The Teams front end's configuration, read once from `CHAT_APPROVALS_TEAMS_*` and checked: a
half-set identity names the variable that is missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from chat_approvals.bots.teams_compat import TeamsAuth

ROUTE = "/api/messages"


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
