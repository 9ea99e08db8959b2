"""The default local sandbox: every command runs confined by bubblewrap, and its only way out is
the egress gate (R18).

Built on Strands' `Sandbox` abstraction (a `PosixShellSandbox`). Each command runs under `bwrap`
in its own mount, PID, IPC, UTS and network namespaces:

- its user: when the server runs as root, a fresh unprivileged uid per run (no capabilities,
  `no_new_privs`, no supplementary groups); otherwise a user namespace mapping it to uid 65534;
- its filesystem: read-only `/usr`, `/etc`, `/bin`, `/lib*` and the interpreter's prefix (and
  virtualenv), a private size-limited `/tmp` holding its fresh run folder (HOME and working
  folder), a fresh `/proc` of its own PID namespace, a minimal `/dev`, and the gate's unix
  socket. Nothing else: not the store, the objects, the project, other runs, other sockets;
- its network: an empty namespace with loopback only, where `core/sandbox/first_process.py` forwards
  127.0.0.1:PORT to the gate's socket;
- its lifetime: `--die-with-parent` and the PID namespace, so the whole tree (double-forked
  `setsid` daemons too) dies with the run;
- its system calls: a seccomp filter (`core/sandbox/seccomp.py`) refuses nested user
  namespaces, memfd and SysV shared memory; its kernel session keyring is a fresh, empty one;
- its resources: wall and CPU time, address space, processes, file size, bytes written (the
  size of its `/tmp`), open files (`Limits`), and where the host delegates cgroup v2, the
  memory of the run as a whole (`core/sandbox/cgroup.py`). A run that hits one is stopped and its stderr ends
  with `[sandbox limit hit: ...]`, which the tool puts on a `limit hit:` line.

Where bubblewrap cannot run, `detect_confinement()` says why; the server then refuses to start
with `--sandbox` unless the operator passes `--sandbox-unconfined`, and every result says what
is not confined.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from strands.sandbox import ExecutionResult, PosixShellSandbox, StreamChunk
from strands.sandbox.errors import SandboxTimeoutError
from strands.sandbox.posix_shell import validate_env_keys

import chat_approvals.core.sandbox.cgroup as sandbox_cgroup
import chat_approvals.core.sandbox.seccomp as sandbox_seccomp
from chat_approvals.core.sandbox.cgroup import RunCgroups

log = logging.getLogger(__name__)

_INIT = Path(__file__).with_name("first_process.py")
INSIDE = "/run/sandbox"  # where the init, the script and the gate's socket appear in the sandbox
GATE_SOCKET = f"{INSIDE}/gate.sock"
_SYSTEM_DIRS = ("/usr", "/etc")
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
UID_BASE, UID_SPAN = 200_000, 65_536  # as root: each run gets its own unprivileged uid from here
UID_LOCKS = "/run/chat-approvals-sandbox-uids"  # one lock file per uid in use, shared by the host's replicas
LIMIT_MARK = "[sandbox limit hit: "
SHM_SIZE = 16 << 20  # /dev/shm of a run: POSIX semaphores and the like, not a way around the memory limit


@dataclass(frozen=True)
class Limits:
    """Per run. Defaults are safe for a short data-fetching script and pip."""

    wall: float = 60.0  # seconds
    cpu: int = 60  # seconds of CPU
    memory: int = 2048 << 20  # address space per process, bytes
    nproc: int = 128  # processes (and threads) of the run
    file_size: int = 256 << 20  # largest file, bytes
    disk: int = 512 << 20  # everything written in the run folder and /tmp, bytes
    open_files: int = 512
    run_memory: int | None = None  # the run as a whole, where a cgroup leaf can cap it; None: `memory`

    def describe(self, name: str) -> str:
        return {
            "wall": f"wall time ({self.wall:g} s)",
            "cpu": f"CPU time ({self.cpu} s)",
            "memory": f"address space ({self.memory >> 20} MiB)",
            "nproc": f"processes ({self.nproc})",
            "file_size": f"file size ({self.file_size >> 20} MiB)",
            "disk": f"bytes written in the run folder and /tmp ({self.disk >> 20} MiB)",
            "open_files": f"open files ({self.open_files})",
            "run_memory": f"memory of the whole run ({(self.run_memory or self.memory) >> 20} MiB)",
        }[name]


@dataclass(frozen=True)
class Confinement:
    mode: Literal["bwrap", "none"]
    note: str
    bwrap: str | None = None
    setpriv: str | None = None  # set when the server is root: the run drops to its own uid
    cgroups: RunCgroups | None = None  # where the host delegates cgroup v2: a leaf per run

    @property
    def confined(self) -> bool:
        return self.mode == "bwrap"


UNCONFINED = (
    "sandbox NOT confined ({why}): the script runs as the server's user and sees the server's whole "
    "filesystem (the store, the objects, other runs' folders), the server's processes and environment "
    "in /proc, and the network directly if it ignores the proxy settings; only the time and resource "
    "limits apply"
)
CONFINED = (
    "sandbox confined (bubblewrap): {user}, no capabilities; own filesystem view, process, IPC and "
    "network namespaces; the only way out is the egress gate; {memory}"
)
MEMORY_CGROUP = (
    "memory: the run as a whole is capped by a cgroup v2 leaf (memory.max with shared memory counted, "
    "pids.max), each process's address space too, and a seccomp filter refuses memfd, SysV shared "
    "memory and nested user namespaces"
)
MEMORY_SECCOMP = (
    "memory: each process's address space is capped and a seccomp filter refuses memfd, SysV shared "
    "memory and nested user namespaces, but the run as a whole is not capped ({why})"
)
MEMORY_NO_SECCOMP = "memory: each process's address space is capped; no seccomp filter on this architecture"


def system_binds() -> list[str]:
    args: list[str] = []
    for d in _SYSTEM_DIRS:
        if os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for d in _SYSTEM_LINKS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def interpreter_dirs(extra: list[str] | None = None) -> list[str]:
    """Folders the interpreter needs, bound read-only: its prefix and the virtualenv (never the
    project itself). Those under /usr are already there."""
    dirs = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), sys.prefix, sys.base_prefix}
    for path in extra or []:
        real = os.path.realpath(path)
        dirs.add(str(Path(real).parent.parent))
    out: list[str] = []
    for d in sorted(dirs):
        if any(d == s or d.startswith(s + "/") for s in (*_SYSTEM_DIRS, *_SYSTEM_LINKS)) or not os.path.isdir(d):
            continue
        if any(d.startswith(o + "/") for o in out):
            continue
        out.append(d)
    return out


def _dirs_for(path: str) -> list[str]:
    """Create the mount point's parents 0755 (bwrap would copy a 0700 parent's mode)."""
    args: list[str] = []
    parts = Path(path).parts[1:-1]
    for i in range(len(parts)):
        args += ["--perms", "0755", "--dir", "/" + "/".join(parts[: i + 1])]
    return args


@functools.cache
def _probe() -> Confinement:
    bwrap = shutil.which("bwrap")
    if bwrap is None or not sys.platform.startswith("linux"):
        return Confinement("none", UNCONFINED.format(why="bubblewrap (`bwrap`) is not installed"))
    setpriv = None
    argv = [bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
            "--new-session", *system_binds(), "--proc", "/proc", "--dev", "/dev"]  # fmt: skip
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return Confinement("none", UNCONFINED.format(why="`setpriv` (util-linux) is missing"))
        argv += [setpriv, f"--reuid={UID_BASE}", f"--regid={UID_BASE}", "--clear-groups", "--inh-caps=-all",
                 "--bounding-set=-all", "--no-new-privs", "--", "true"]  # fmt: skip
        user = "its own unprivileged uid per run"
    else:
        argv[1:1] = ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--disable-userns"]
        argv.append("true")
        user = "uid 65534 in its own user namespace"
    try:
        p = subprocess.run(argv, capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Confinement("none", UNCONFINED.format(why=f"bubblewrap failed: {e}"))
    if p.returncode != 0:
        why = p.stderr.decode(errors="replace").strip() or f"bwrap exited {p.returncode}"
        return Confinement("none", UNCONFINED.format(why=f"bubblewrap cannot make namespaces here: {why}"))
    cgroups, why = sandbox_cgroup.detect()
    if not sandbox_seccomp.supported():
        memory = MEMORY_NO_SECCOMP
    else:
        memory = MEMORY_CGROUP if cgroups is not None else MEMORY_SECCOMP.format(why=why)
    return Confinement("bwrap", CONFINED.format(user=user, memory=memory), bwrap, setpriv, cgroups)


def detect_confinement(*, allow: bool = True) -> Confinement:
    """Try bubblewrap once per process (a real run of `true` inside it)."""
    if not allow:
        return Confinement("none", UNCONFINED.format(why="confinement disabled by configuration"))
    return _probe()


def limits_hit(limits: Limits, status: dict[str, Any] | None, stderr: str) -> list[str]:
    """Which limit stopped the run, from the init's status and the script's own error text
    (an address-space, process or open-files limit shows as a failed call, not a signal)."""
    hit: list[str] = []
    sig = (status or {}).get("signal")
    if sig in (signal.SIGXCPU, signal.SIGKILL) and (status or {}).get("cpu", 0) >= limits.cpu - 0.5:
        hit.append("cpu")
    if sig == signal.SIGXFSZ or "File too large" in stderr:
        hit.append("file_size")
    if (status or {}).get("disk_full") or "No space left on device" in stderr:
        hit.append("disk")
    if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
        hit.append("memory")
    if "Resource temporarily unavailable" in stderr or "fork: retry" in stderr or "Cannot fork" in stderr:
        hit.append("nproc")
    if "Too many open files" in stderr:
        hit.append("open_files")
    return hit


class GatedLocalSandbox(PosixShellSandbox):
    """Runs commands on this host, confined by bubblewrap (see module doc)."""

    def __init__(
        self,
        *,
        gate_unix_socket: str | None,
        gate_port: int,
        confinement: Confinement | None = None,
        limits: Limits | None = None,
        timeout: float | None = None,
        output_limit: int = 64 * 1024,
        interpreters: dict[str, str] | None = None,
    ) -> None:
        self.gate_unix_socket = gate_unix_socket
        self.gate_port = gate_port
        conf = confinement or detect_confinement()
        if conf.confined and not gate_unix_socket:
            conf = Confinement("none", UNCONFINED.format(why="the gate has no unix socket to reach it through"))
        self.confinement = conf
        self.limits = limits or Limits()
        if timeout is not None:
            self.limits = Limits(**{**asdict(self.limits), "wall": timeout})
        self.output_limit = output_limit
        py = sys.executable
        self.interpreters = interpreters or {"python": py, "python3": py, "sh": "/bin/sh", "bash": "/bin/bash"}
        self._uids: dict[int, int] = {}  # the run uids in use here, each with its lock's descriptor
        self._dirs = interpreter_dirs(list(self.interpreters.values()))

    @property
    def timeout(self) -> float:
        return self.limits.wall

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
        self._no_cwd(cwd)
        async for item in self._run(["/bin/sh", "-c", command], None, "", timeout, env):
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
        self._no_cwd(cwd)
        name = "main.py" if "python" in language else "main.sh"
        extra = [str(x) for x in kwargs.get("args") or []]  # the script's own arguments (`sandbox run`)
        async for item in self._run([interp, name, *extra], code, name, timeout, env):
            yield item

    def _no_cwd(self, cwd: str | None) -> None:
        if cwd is not None:
            raise ValueError("every sandbox command runs in its own fresh folder; a cwd cannot be given")

    # ---- internals ----

    def _env(self, home: str, extra: dict[str, str] | None) -> dict[str, str]:
        if extra:
            validate_env_keys(extra)
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": "/tmp" if self.confinement.confined else home,
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONUNBUFFERED": "1",
            "PIP_NO_CACHE_DIR": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1",
        }
        env.update(extra or {})
        return env

    def _uid(self) -> int:
        """A uid no other run on this host has right now, in this process or another replica's:
        each is claimed by an exclusive lock on its own file, held until the run ends (the kernel
        drops it if the process dies)."""
        os.makedirs(UID_LOCKS, mode=0o700, exist_ok=True)
        start = secrets.randbelow(UID_SPAN)
        for i in range(UID_SPAN):
            uid = UID_BASE + (start + i) % UID_SPAN
            if uid in self._uids:
                continue
            fd = os.open(f"{UID_LOCKS}/{uid}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self._uids[uid] = fd
            return uid
        raise RuntimeError("every sandbox uid is in use")

    def _release_uid(self, uid: int) -> None:
        fd = self._uids.pop(uid, None)
        if fd is not None:
            os.close(fd)

    def _bwrap_argv(
        self, uid: int | None, init_fd: int, script_fd: int | None, config: str, seccomp_fd: int | None = None
    ) -> list[str]:
        conf = self.confinement
        assert conf.bwrap is not None and self.gate_unix_socket
        a = [conf.bwrap, "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
             "--die-with-parent", "--new-session", "--hostname", "sandbox"]  # fmt: skip
        if uid is None:  # not root: a user namespace, and nothing further may be unshared in it
            a[1:1] = ["--unshare-user", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL", "--disable-userns"]
        a += system_binds()
        a += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(self.limits.disk), "--tmpfs", "/tmp"]
        # /dev/shm is a tmpfs as large as half the host's memory otherwise, and uncounted by RLIMIT_AS
        a += ["--perms", "1777", "--size", str(SHM_SIZE), "--tmpfs", "/dev/shm"]
        if seccomp_fd is not None:
            a += ["--seccomp", str(seccomp_fd)]
        for d in self._dirs:
            a += [*_dirs_for(d + "/x"), "--ro-bind", d, d]
        a += [*_dirs_for(GATE_SOCKET), "--bind", self.gate_unix_socket, GATE_SOCKET]
        a += ["--perms", "0444", "--ro-bind-data", str(init_fd), f"{INSIDE}/init.py"]
        if script_fd is not None:
            a += ["--perms", "0444", "--ro-bind-data", str(script_fd), f"{INSIDE}/script"]
        a += ["--chdir", "/tmp"]
        if uid is not None:
            assert conf.setpriv is not None
            a += [conf.setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all", "--no-new-privs", "--"]  # fmt: skip
        return [*a, sys.executable, "-I", "-S", f"{INSIDE}/init.py", config]

    async def _run(
        self, argv: list[str], code: str | None, name: str, timeout: float | None, env: dict[str, str] | None
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
        limit = timeout if timeout is not None else self.limits.wall
        confined = self.confinement.confined
        uid = self._uid() if confined and self.confinement.setpriv else None
        host_dir = None if confined else tempfile.mkdtemp(prefix="sandbox-run-")
        home = f"/tmp/run-{secrets.token_hex(6)}" if confined else str(host_dir)
        if uid is not None:
            _bind_token(self.gate_unix_socket, env, uid)
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        files: list[Any] = []
        leaf: Path | None = None  # the run's cgroup leaf, where the host has them
        join_leaf = None
        try:
            cfg: dict[str, Any] = {
                "workdir": home,
                "disk_path": "/tmp" if confined else home,
                "argv": argv,
                "limits": {k: v for k, v in asdict(self.limits).items() if k not in ("wall", "disk", "run_memory")},
                "status_fd": status_w,
                "socket": GATE_SOCKET if confined else None,
                "port": self.gate_port,
                "script_name": name,
                "own_uid": uid is not None,
            }
            pass_fds = [status_w]
            if confined:
                init = open(_INIT, "rb")  # noqa: SIM115 - closed below, after the child has it
                files.append(init)
                script_fd = None
                if code is not None:
                    tmp = tempfile.TemporaryFile()  # noqa: SIM115
                    tmp.write(code.encode("utf-8"))
                    tmp.seek(0)
                    files.append(tmp)
                    script_fd = tmp.fileno()
                    cfg["script"] = f"{INSIDE}/script"
                seccomp_fd = None
                if sandbox_seccomp.supported():
                    bpf = tempfile.TemporaryFile()  # noqa: SIM115
                    bpf.write(sandbox_seccomp.program())
                    bpf.seek(0)
                    files.append(bpf)
                    seccomp_fd = bpf.fileno()
                pass_fds += [f.fileno() for f in files]
                full = self._bwrap_argv(uid, init.fileno(), script_fd, json.dumps(cfg), seccomp_fd)
                cg = self.confinement.cgroups
                if cg is not None:
                    leaf = cg.leaf(self.limits.run_memory or self.limits.memory, self.limits.nproc)
                    join_leaf = functools.partial(sandbox_cgroup.join, leaf)
            else:
                if code is not None:
                    (Path(home) / name).write_text(code, encoding="utf-8")
                full = [sys.executable, "-I", "-S", str(_INIT), json.dumps(cfg)]
            proc = await asyncio.create_subprocess_exec(
                *full,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd="/" if confined else home,
                env=self._env(home, env),
                pass_fds=pass_fds,
                start_new_session=True,  # one process group: the time limit kills the whole tree
                preexec_fn=join_leaf,  # into the run's cgroup before bubblewrap, so all it starts is in
            )
        except BaseException:
            if leaf is not None:
                RunCgroups.remove(leaf)
            os.close(status_r)
            os.close(status_w)
            for f in files:
                f.close()
            if uid is not None:
                self._release_uid(uid)
            raise
        os.close(status_w)
        for f in files:
            f.close()
        try:
            async for item in self._collect(proc, limit, status_r, leaf):
                yield item
        finally:
            os.close(status_r)
            if leaf is not None:
                await asyncio.to_thread(RunCgroups.remove, leaf)
            if uid is not None:
                self._release_uid(uid)
            if host_dir is not None:
                await asyncio.to_thread(shutil.rmtree, host_dir, True)

    async def _collect(
        self, proc: asyncio.subprocess.Process, limit: float, status_r: int, leaf: Path | None = None
    ) -> AsyncGenerator[StreamChunk | ExecutionResult, None]:
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
            # bwrap's own process group; its PID namespace dies with it (--die-with-parent)
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

        status = _read_status(status_r)
        stderr = text("stderr")
        hit = ["wall"] if timed_out else limits_hit(self.limits, status, stderr)
        for h in RunCgroups.hits(leaf) if leaf is not None else []:  # the OOM killer, or pids.max
            if h not in hit:
                hit.append(h)
        if hit:
            stderr += "".join(f"\n{LIMIT_MARK}{self.limits.describe(h)}]" for h in hit) + "\n"
        if timed_out:
            raise SandboxTimeoutError(limit, text("stdout"), stderr)
        rc = proc.returncode if proc.returncode is not None else 1
        code = 128 - rc if rc < 0 else rc
        yield ExecutionResult(exit_code=code, stdout=text("stdout"), stderr=stderr)


def _bind_token(unix_path: str | None, env: dict[str, str] | None, uid: int) -> None:
    """Bind the run's gate token (in its proxy URL) to the uid it runs as, so the token is worth
    nothing to any other run it leaks to (the gate checks the peer's uid by SO_PEERCRED)."""
    from chat_approvals.core.sandbox.egress.gate import gate_at  # the gate imports nothing of the sandbox

    gate = gate_at(unix_path)
    proxy = (env or {}).get("HTTP_PROXY", "")
    user = urlsplit(proxy).username or ""
    if gate is not None and user.startswith("run-"):
        gate.bind_uid(user[4:], uid)


def _read_status(fd: int) -> dict[str, Any] | None:
    try:
        raw = os.read(fd, 4096)
    except (BlockingIOError, OSError):
        return None
    try:
        status = json.loads(raw.decode().splitlines()[0]) if raw else None
    except (ValueError, IndexError):
        return None
    return status if isinstance(status, dict) else None
