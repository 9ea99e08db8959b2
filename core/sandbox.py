"""The default local sandbox: a child process whose only way out is the egress gate.

Built on Strands' `Sandbox` abstraction (a `PosixShellSandbox`, so file operations come from
the SDK). Each command runs in a fresh working folder, with a time limit, an output limit, a
small environment (never the server's: no tokens leak) plus the gate's proxy settings. On
Linux, when the process may create namespaces (root, or unprivileged user namespaces), the
child runs in its own network and PID namespace with only a loopback interface; the one
thing listening there is a forwarder to the gate's unix socket, so a script that ignores
the proxy settings still reaches nothing. When that is not possible it says so at start-up
(a warning in the log) and in every tool result (`isolation.note`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from strands.sandbox import ExecutionResult, PosixShellSandbox, StreamChunk
from strands.sandbox.errors import SandboxTimeoutError
from strands.sandbox.posix_shell import validate_env_keys

log = logging.getLogger(__name__)

_FORWARDER = str(Path(__file__).with_name("egress") / "nsforward.py")
_NS_FLAGS = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
_NET_ONLY = ["--net", "--kill-child", "--fork"]  # where PID/mount namespaces are refused


@dataclass(frozen=True)
class Isolation:
    mode: Literal["netns", "none"]
    prefix: tuple[str, ...]  # argv before the forwarder, e.g. ("unshare", "--net", ...)
    note: str


def detect_isolation(*, allow: bool = True) -> Isolation:
    """Try a real `unshare` once: as root plainly, otherwise inside a user namespace; with PID and
    mount namespaces when allowed, else the network namespace alone."""
    none_note = (
        "network NOT isolated: {why}; the script gets the gate's proxy settings, but a script that "
        "ignores them can reach the network directly"
    )
    if not allow:
        return Isolation("none", (), none_note.format(why="namespaces disabled by configuration"))
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return Isolation("none", (), none_note.format(why="no `unshare` on this host"))
    candidates = [[unshare, *f] for f in (_NS_FLAGS, _NET_ONLY)] if os.geteuid() == 0 else []
    candidates += [[unshare, "--user", "--map-root-user", *f] for f in (_NS_FLAGS, _NET_ONLY)]
    why = ""
    for prefix in candidates:
        try:
            p = subprocess.run([*prefix, "--", "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            why = why or str(e)
            continue
        if p.returncode == 0:
            kind = "root" if "--user" not in prefix else "user namespace"
            return Isolation(
                "netns",
                tuple(prefix),
                f"network isolated ({kind}): own network namespace; the only way out is the egress gate",
            )
        why = why or p.stderr.decode(errors="replace").strip() or f"unshare exited {p.returncode}"
    return Isolation("none", (), none_note.format(why=why or "unshare failed"))


class GatedLocalSandbox(PosixShellSandbox):
    """Runs commands on this host, confined as far as the host allows (see module doc)."""

    def __init__(
        self,
        *,
        gate_unix_socket: str | None,
        gate_port: int,
        isolation: Isolation | None = None,
        timeout: float = 60.0,
        output_limit: int = 64 * 1024,
        base_dir: str | None = None,
        interpreters: dict[str, str] | None = None,
    ) -> None:
        self.gate_unix_socket = gate_unix_socket
        self.gate_port = gate_port
        iso = isolation or detect_isolation()
        if iso.mode == "netns" and not gate_unix_socket:
            iso = Isolation("none", (), "network NOT isolated: the gate has no unix socket to forward to")
        self.isolation = iso
        log.debug("sandbox: %s", iso.note)
        self.timeout = timeout
        self.output_limit = output_limit
        self.base_dir = base_dir
        py = sys.executable
        self.interpreters = interpreters or {
            "python": py,
            "python3": py,
            "sh": "/bin/sh",
            "bash": "/bin/bash",
        }

    # ---- the Strands primitives ----

    async def execute_streaming(
        self,
        command: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        async with self._workdir(cwd) as wd:
            async for item in self._run(["/bin/sh", "-c", command], wd, timeout, env):
                yield item

    async def execute_code_streaming(
        self,
        code: str,
        language: str,
        *,
        timeout: float | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        interp = self.interpreters.get(language)
        if interp is None:
            raise ValueError(f"unsupported language {language!r}; use one of {sorted(self.interpreters)}")
        async with self._workdir(cwd) as wd:
            script = Path(wd) / ("main.py" if "python" in language else "main.sh")
            script.write_text(code, encoding="utf-8")
            async for item in self._run([interp, script.name], wd, timeout, env):
                yield item

    # ---- internals ----

    @contextlib.asynccontextmanager
    async def _workdir(self, cwd: str | None) -> AsyncGenerator[str, None]:
        if cwd is not None:
            yield cwd
            return
        wd = tempfile.mkdtemp(prefix="sandbox-run-", dir=self.base_dir)  # fresh for every run
        try:
            yield wd
        finally:
            await asyncio.to_thread(shutil.rmtree, wd, True)

    def _env(self, wd: str, extra: dict[str, str] | None) -> dict[str, str]:
        if extra:
            validate_env_keys(extra)
        tmp = os.path.join(wd, ".tmp")
        os.makedirs(tmp, exist_ok=True)
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": wd,
            "TMPDIR": tmp,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        env.update(extra or {})
        return env

    def _argv(self, argv: list[str]) -> list[str]:
        if self.isolation.mode != "netns" or not self.gate_unix_socket:
            return argv
        return [*self.isolation.prefix, "--", sys.executable, "-I", _FORWARDER,
                self.gate_unix_socket, str(self.gate_port), "--", *argv]  # fmt: skip

    async def _run(
        self, argv: list[str], wd: str, timeout: float | None, env: dict[str, str] | None
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        limit = timeout if timeout is not None else self.timeout
        proc = await asyncio.create_subprocess_exec(
            *self._argv(argv),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=wd,
            env=self._env(wd, env),
            start_new_session=True,  # one process group: the time limit kills the whole tree
        )
        kept: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        dropped = {"stdout": 0, "stderr": 0}
        queue: asyncio.Queue[StreamChunk | None] = asyncio.Queue()

        async def pump(stream: asyncio.StreamReader | None, name: Literal["stdout", "stderr"]) -> None:
            assert stream is not None
            while data := await stream.read(65536):
                room = self.output_limit - len(kept[name])
                if room > 0:
                    kept[name] += data[:room]
                    await queue.put(StreamChunk(data[:room].decode(errors="replace"), name))
                dropped[name] += max(0, len(data) - max(room, 0))  # keep draining: never block the child

        async def pumps() -> None:
            await asyncio.gather(pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr"))
            await queue.put(None)

        task = asyncio.ensure_future(pumps())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        timed_out = False
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    timed_out = True
                    break
                if item is None:
                    break
                yield item
            if not timed_out:
                try:
                    await asyncio.wait_for(proc.wait(), max(0.1, deadline - loop.time()))
                except TimeoutError:
                    timed_out = True
        finally:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(proc.wait(), 5)
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        def text(name: str) -> str:
            out = kept[name].decode(errors="replace")
            if dropped[name]:
                out += f"\n[output limit: {dropped[name]} more bytes of {name} not shown]\n"
            return out

        if timed_out:
            raise SandboxTimeoutError(limit, text("stdout"), text("stderr"))
        rc = proc.returncode if proc.returncode is not None else 1
        code = 128 - rc if rc < 0 else rc
        yield ExecutionResult(exit_code=code, stdout=text("stdout"), stderr=text("stderr"))
