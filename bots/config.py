"""Server configuration: CLI flags over `CHAT_APPROVALS_*` environment variables over defaults."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from chat_approvals.bots.admission import DEFAULT_CAPACITY, DEFAULT_HOLD_MAX, DEFAULT_PATIENCE, DEFAULT_WORKERS
from chat_approvals.core.sandbox import Limits
from chat_approvals.core.settings import Settings

LEGACY_OBJECTS = "var/objects"  # the objects default before 2026-12-03, and for non-SQLite stores


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.is_file() for p in folder.rglob("*"))


class ServerConfig(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHAT_APPROVALS_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 3978
    store: str = "sqlite:///var/approvals.db"
    # Empty: the default for the store (objects_url). Set: a folder, sqlite:///PATH or s3://...
    objects: str = ""
    model: str = "scripted"
    agent: str | None = None
    # Tool-name approvals (core/agent/tool_gate.py): these tools ask a person before they run.
    # `write_table,delete_*` or `*,!read_file`; checked against the agent's tools at start-up.
    confirm_tools: str = ""
    notes_dir: str = "var/notes"  # the default agent's save_note writes here, a folder per chat
    api_token: str = ""  # comma-separated bearer tokens; empty = the HTTP front end is off
    sweep_every: float = 600.0
    timer_every: float = Field(default=5.0, gt=0)  # seconds between looks for due reminders/escalations/expiries
    policy: str | None = None  # the approval policy file (TOML, docs/policy.md); None: only the owner answers

    # operating it: docs/operating.md
    metrics: bool = True  # GET /metrics (--no-metrics turns it off)
    log_format: str = "text"  # or "json": one object per line
    log_level: str = "info"  # debug shows the internal start-up lines (heap frozen, ...)
    # Set by scripts/run when it started the Teams Playground: the last start-up line points there.
    playground_url: str = ""
    readyz_timeout: float = Field(default=2.0, gt=0)  # the store's cheap read must answer within this
    cpus: str = ""  # serve: pin the process to these cores, a CPU list (bots/cpus.py); empty: all
    # bots/admission.py: clicks resumed at once (the rest wait in arrival order), how many may wait, and
    # after how many seconds a running resume (waiting on its model) stops counting as one of the workers
    resume_workers: int = Field(default=DEFAULT_WORKERS, ge=1)
    resume_queue: int = Field(default=DEFAULT_CAPACITY, ge=1)
    resume_patience: float | None = Field(default=DEFAULT_PATIENCE, ge=0)
    resume_hold: float = Field(default=DEFAULT_HOLD_MAX, ge=0)  # seconds new resumes may wait for acks; 0: never
    audit_webhook: list[str] = Field(default_factory=list)  # every audit event is POSTed to each
    audit_webhook_secret: str = ""  # HMAC-SHA256 key for X-Chat-Approvals-Signature (required with a webhook)
    audit_webhook_poll: float = Field(default=2.0, gt=0)  # seconds between outbox looks when idle
    audit_webhook_backoff_cap: float = Field(default=60.0, gt=0)  # longest wait between retries, seconds

    # the sandbox (run_script) and its egress gate: docs/egress-gate.md
    sandbox: bool = False
    sandbox_unconfined: bool = False  # run scripts even where bubblewrap cannot confine them (said everywhere)
    sandbox_timeout: float = 60.0  # wall time, seconds
    sandbox_cpu: int = 60  # CPU seconds
    sandbox_memory_mb: int = 2048  # address space per process
    sandbox_nproc: int = 128
    sandbox_file_size_mb: int = 256
    sandbox_disk_mb: int = 512  # bytes written in the run folder and /tmp
    sandbox_open_files: int = 512
    gate_host: str = "127.0.0.1"
    gate_port: int = 0
    gate_allow: list[str] = Field(default_factory=list)
    gate_deny: list[str] = Field(default_factory=list)
    gate_resolve: list[str] = Field(default_factory=list)
    package_index: str = ""
    gate_grant_recheck: float = Field(default=5.0, gt=0)  # seconds between re-checks of an open granted connection

    card_expiry: float = Field(default=Settings().card_expiry)
    max_card_life: float = Field(default=Settings().max_card_life)  # caps a policy's expires_after
    grant_ttl: float = Field(default=Settings().grant_ttl)
    lease: float = Field(default=Settings().lease)
    heartbeat_every: float = Field(default=Settings().heartbeat_every)
    resume_deadline: float = Field(default=Settings().resume_deadline)
    claim_cap: int = Field(default=Settings().claim_cap)
    retention: float = Field(default=Settings().retention)
    history: bool = Field(default=Settings().history)

    @field_validator("api_token")
    @classmethod
    def _tokens_well_formed(cls, value: str) -> str:
        """A value that names no token (only commas or spaces), or a token with a space or a control
        character in it, is a mistake: refused, rather than a front end silently off or unusable."""
        if value and not value.strip(" ,"):
            raise ValueError("it holds no token (only commas or spaces)")
        for token in (t.strip() for t in value.split(",")):
            if token and not all(c.isprintable() and not c.isspace() and c.isascii() for c in token):
                raise ValueError("a token holds a space, a control or a non-ASCII character")
        return value

    def objects_url(self) -> str:
        """Where snapshots, answers and chat histories go when --objects is not given. On a SQLite
        store: that same file, so a step's objects and rows commit together (issue 12: one fsync'd
        commit per step, about 2.5x the cycles of a folder). A folder left by an earlier version
        (LEGACY_OBJECTS, not empty) is kept, since its open cards' snapshots live there. Any other
        store keeps the folder default."""
        if self.objects:
            return self.objects
        if self.store.startswith("sqlite:///") and not _has_files(Path(LEGACY_OBJECTS)):
            return self.store
        if self.store.startswith(("postgresql://", "postgres://")):
            return self.store  # a table of their own in that database (store/postgres_objects.py)
        return LEGACY_OBJECTS

    def sandbox_limits(self) -> Limits:
        return Limits(
            wall=self.sandbox_timeout,
            cpu=self.sandbox_cpu,
            memory=self.sandbox_memory_mb << 20,
            nproc=self.sandbox_nproc,
            file_size=self.sandbox_file_size_mb << 20,
            disk=self.sandbox_disk_mb << 20,
            open_files=self.sandbox_open_files,
        )

    def secrets(self) -> list[str]:
        """Every secret value this configuration holds: the logs redact them."""
        return [*self.tokens(), self.audit_webhook_secret]

    def tokens(self) -> list[str]:
        return [t.strip() for t in self.api_token.split(",") if t.strip()]

    def protocol(self) -> Settings:
        return Settings(**self.model_dump(include=set(Settings.model_fields)))
