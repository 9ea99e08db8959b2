"""The egress gate's launch-time settings (the server fills them from the --gate-* flags)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GateConfig(BaseModel):
    """Launch-time settings (the server fills these from --gate-* flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    listen_host: str = "127.0.0.1"
    port: int = 0
    unix_socket: str | None = None  # created in a private temp dir when None and unix=True
    unix: bool = True  # the network-namespace sandbox reaches the gate through this socket
    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)
    resolve: list[str] = Field(default_factory=list)
    package_index: str | None = None  # upstream PEP 503 simple index, e.g. https://pypi.org/simple/
    grant_ports: tuple[int, ...] = (80, 443)  # a site grant covers these; other ports need --gate-allow
    connect_timeout: float = 10.0
    idle_timeout: float = 120.0
    head_timeout: float = 5.0  # a connection that has not authenticated by then is closed
    grant_recheck: float = 5.0  # an open connection a grant allowed is re-checked this often: a revoke ends it
    max_conns_per_run: int = 64
    max_unauth_per_source: int = 32  # not yet authenticated, per peer: an IP, or a uid on the unix socket
    max_unauth_total: int = 256  # not yet authenticated, from everyone together
    head_limit: int = 16 * 1024  # bytes of a request head: what an unauthenticated peer can make us hold
    fd_reserve: int = 256  # descriptors the gate leaves for the server's own work (store, sockets, logs)
    package_file_hosts: list[str] = Field(default_factory=list)  # more hosts the index's file links may point at
