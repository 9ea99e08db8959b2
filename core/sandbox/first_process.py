"""The first process of a sandbox run, already inside its confinement. Standard library only:
it is handed to the sandbox as a file and run by path, with nothing of the project importable.

It first leaves the server's kernel session keyring for a fresh, empty one. It makes the run's
fresh folder (HOME and working folder), copies the script into it, listens on 127.0.0.1:PORT
inside the run's empty network namespace and copies every connection to the gate's unix socket
(the one socket bound into the sandbox), runs the script with the resource limits set, and at
the end writes one JSON line of status (exit code, signal, CPU seconds, whether the run's disk
was full) to a status descriptor the server reads. It exits with the script's code.

usage: first_process.py CONFIG_JSON
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import platform
import resource
import shutil
import signal
import sys
from typing import Any

_LIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "memory": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "file_size": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}


def _apply_limits(limits: dict[str, int]) -> None:
    """Runs in the child between fork and exec."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for name, res in _LIMITS.items():
        value = limits.get(name)
        if value:
            hard = value + 1 if name == "cpu" else value  # CPU: SIGXCPU at the soft limit, SIGKILL a second later
            resource.setrlimit(res, (value, hard))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # a shell child dies by the signal instead of ignoring it


# keyctl(2): no libc wrapper, so the raw system call, by architecture
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311, "ppc64le": 271, "s390x": 280}
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR = 1, 7
KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -4, -5


def _fresh_keyrings(own_uid: bool) -> str:
    """Leave the server's session keyring for a new, empty, anonymous one, so the run neither
    reads the server's keys nor leaves any for a later run. With a uid of its own (root mode)
    that uid's user keyrings are emptied too: a key a previous run of the uid left there is gone.
    Returns what was done, for the status line."""
    nr = _SYS_KEYCTL.get(platform.machine())
    if nr is None:
        return "unknown architecture"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None)) < 0:
        return f"keyctl failed: {os.strerror(ctypes.get_errno())}"
    if own_uid:
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            libc.syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_CLEAR), ctypes.c_long(ring))
    return "fresh"


async def _pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
    try:
        while data := await r.read(65536):
            w.write(data)
            await w.drain()
        if w.can_write_eof():
            w.write_eof()  # pass the half-close on
            return
    except (ConnectionError, OSError):
        pass
    w.close()  # an error on one side ends the other too, or it would wait for ever


async def _forward(unix_path: str, port: int) -> asyncio.AbstractServer:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_unix_connection(unix_path)
        except OSError:
            w.close()
            return
        try:
            await asyncio.gather(_pipe(r, uw), _pipe(ur, w))
        finally:
            for x in (w, uw):
                with contextlib.suppress(Exception):
                    x.close()

    return await asyncio.start_server(handle, "127.0.0.1", port)


async def main(cfg: dict[str, Any]) -> int:
    keyring = _fresh_keyrings(bool(cfg.get("own_uid")))  # before anything of the script's runs
    wd = cfg["workdir"]
    os.makedirs(wd, mode=0o700, exist_ok=True)
    if cfg.get("script"):
        shutil.copyfile(cfg["script"], os.path.join(wd, cfg["script_name"]))
    os.chdir(wd)
    server = await _forward(cfg["socket"], int(cfg["port"])) if cfg.get("socket") else None
    status_fd = int(cfg["status_fd"]) if cfg.get("status_fd") is not None else None
    proc = await asyncio.create_subprocess_exec(
        *cfg["argv"], preexec_fn=lambda: _apply_limits(cfg["limits"]), close_fds=True
    )
    rc = await proc.wait()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    disk_full = False
    with contextlib.suppress(OSError):
        st = os.statvfs(cfg.get("disk_path") or wd)
        disk_full = st.f_bavail * st.f_frsize < 64 * 1024
    if server is not None:
        server.close()
    if status_fd is not None:
        status = {
            "exit": rc,
            "signal": -rc if rc < 0 else None,
            "cpu": usage.ru_utime + usage.ru_stime,
            "disk_full": disk_full,
            "keyring": keyring,
        }
        with contextlib.suppress(OSError):
            os.write(status_fd, (json.dumps(status) + "\n").encode())
            os.close(status_fd)
    return 128 - rc if rc < 0 else rc


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(json.loads(sys.argv[1]))))
