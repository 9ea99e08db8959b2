"""Issue 29: attacks from inside the real bubblewrap sandbox that got out, each replayed through
`GatedLocalSandbox` (the class `run_script` and `sandbox run` use) behind a real gate."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from strands.sandbox import ExecutionResult

import chat_approvals.core.sandbox.cgroup as sandbox_cgroup
from chat_approvals.core.sandbox.cgroup import RunCgroups
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.runner import GatedLocalSandbox, Limits, detect_confinement
from tests.support.gate_support import FakeGrants, origin_app, start_site
from tests.support.serve_process import ROOT

CONF = detect_confinement()
AS_ROOT = CONF.confined and CONF.setpriv is not None


@pytest.fixture(autouse=True)
def need_confinement() -> None:
    if not CONF.confined:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the sandbox cannot be confined here: {CONF.note}")
        pytest.skip(CONF.note)


@pytest.fixture
async def gated() -> AsyncIterator[tuple[Gate, FakeGrants, GatedLocalSandbox]]:
    runner, port = await start_site(origin_app("http"))
    grants = FakeGrants()
    gate = await Gate(GateConfig(resolve=[f"files.test=127.0.0.1:{port}"]), backend=grants).start()
    box = GatedLocalSandbox(gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF)
    try:
        yield gate, grants, box
    finally:
        await gate.close()
        await runner.cleanup()


def fetch_with(proxy: str, url: str) -> str:
    """A script that fetches `url` through `proxy` and prints the status (or the error code)."""
    return f"""
import urllib.request, urllib.error
op = urllib.request.build_opener(urllib.request.ProxyHandler({{'http': {proxy!r}}}))
try:
    print(op.open({url!r}, timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
"""


# ---- item 9: the gate token is bound to the run's uid ----


@pytest.mark.skipif(not AS_ROOT, reason="runs share the server's kernel uid without root: nothing to bind to")
async def test_token_leaked_to_another_run_carries_no_grants(
    gated: tuple[Gate, FakeGrants, GatedLocalSandbox],
) -> None:
    """Run B (bob's, granted files.test) leaks its token; run A (mallory's, nothing granted) uses it
    from inside its own sandbox: 407, since B's token is bound to B's uid. A's own token works."""
    gate, grants, box = gated
    grants.grant("bob", "chat-b", "site", "files.test")
    grants.grant("mallory", "chat-a", "site", "files.test")
    run_b = gate.open_run(user="bob", chat="chat-b", turn_id="tb")
    run_a = gate.open_run(user="mallory", chat="chat-a", turn_id="ta")
    # B is running in the sandbox under its own uid, which binds its token (as `_run` does for A)
    assert gate.bind_uid(run_b.token, 199_999)
    stolen = gate.proxy_url(run_b)
    res = await box.execute_code(
        fetch_with(stolen, "http://files.test/hello") + fetch_with(gate.proxy_url(run_a), "http://files.test/hello"),
        "python",
        env=gate.sandbox_env(run_a),
    )
    assert res.stdout.split() == ["407", "200"], (res.stdout, res.stderr)
    assert run_a.uid is not None and run_a.uid != 199_999
    # and from outside the sandbox (TCP), a bound token is refused too
    op = urllib.request.build_opener(urllib.request.ProxyHandler({"http": gate.proxy_url(run_a)}))
    with pytest.raises(urllib.error.HTTPError) as e:
        await asyncio.to_thread(op.open, "http://files.test/hello", None, 10)
    assert e.value.code == 407


# ---- item 1: a fresh, empty session keyring per run ----

KEYCTL = """
import ctypes, platform
NR = {'x86_64': 250, 'aarch64': 219}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def keyctl(*args):
    return libc.syscall(ctypes.c_long(NR), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
def read(serial):
    buf = ctypes.create_string_buffer(4096)
    n = keyctl(11, serial, buf, 4096)  # KEYCTL_READ
    return buf.raw[:max(n, 0)]
"""

SERVER = (
    KEYCTL
    + """
import os, struct, subprocess, sys
assert keyctl(1, ctypes.c_char_p(b'server-session')) > 0  # KEYCTL_JOIN_SESSION_KEYRING, named
add_key = {'x86_64': 248, 'aarch64': 217}[platform.machine()]
secret = b'server-secret-K1'
kid = libc.syscall(ctypes.c_long(add_key), b'user', b'chat-approvals-secret', secret, ctypes.c_size_t(len(secret)),
                   ctypes.c_long(-3))  # into the session keyring
assert kid > 0 and read(kid) == secret
sys.exit(subprocess.call(sys.argv[1:]))
"""
)

PROBE = (
    KEYCTL
    + """
import struct
ring = read(-3)  # the session keyring's members, as key serials
ids = struct.unpack(f'{len(ring) // 4}i', ring)
print('members', len(ids), 'secret' if any(b'server-secret' in read(i) for i in ids) else 'none')
"""
)


def test_run_gets_a_fresh_empty_session_keyring(tmp_path: Path) -> None:
    """The server itself starts under a session keyring holding a secret (as systemd gives every
    service one); `sandbox run` scripts then read their session keyring: empty, no secret."""
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    cmd = [sys.executable, "-c", SERVER, sys.executable, "-m", "chat_approvals", "sandbox", "run", "--chat", "c1",
           "--user", "mallory", "--store", f"sqlite:///{tmp_path}/rows.db", "--objects", str(tmp_path / "objects"),
           str(script)]  # fmt: skip
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["members", "0", "none"], (p.stdout, p.stderr)


# ---- items 6 and 3: no nested user namespace, no memory the per-process limit does not count ----

ESCAPES = """
import ctypes, json, os, shutil, subprocess
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def errno_of(rc):
    return 'ALLOWED' if rc >= 0 else os.strerror(ctypes.get_errno())
out['unshare_user'] = errno_of(libc.unshare(0x10000000))  # CLONE_NEWUSER
if shutil.which('unshare'):
    p = subprocess.run(['unshare', '-Ur', 'id', '-u'], capture_output=True, text=True)
    out['unshare_cmd'] = 'ALLOWED' if p.returncode == 0 else 'refused'
try:
    os.memfd_create('hoard'); out['memfd'] = 'ALLOWED'
except OSError as e:
    out['memfd'] = e.strerror
out['shmget'] = errno_of(libc.shmget(0, 256 << 20, 0o1600))  # IPC_PRIVATE, IPC_CREAT|0600
try:
    with open('/dev/shm/hoard', 'wb') as f:
        for _ in range(64):
            f.write(b'x' * (1 << 20))
    out['dev_shm'] = 'ALLOWED'
except OSError as e:
    out['dev_shm'] = e.strerror
pid = os.fork()  # threads and processes still work
if pid == 0:
    os._exit(7)
out['fork'] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
print(json.dumps(out))
"""


async def test_no_nested_user_namespace_and_no_uncounted_memory(
    gated: tuple[Gate, FakeGrants, GatedLocalSandbox],
) -> None:
    """`unshare -Ur` gave a full capability set inside as root; memfd, SysV shm and /dev/shm held
    gigabytes the address-space limit does not count. All refused now; fork still works, and the
    banner says which memory regime is in force."""
    _, _, box = gated
    res = await box.execute_code(ESCAPES, "python")
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["unshare_user"] == "Operation not permitted", out
    assert out.get("unshare_cmd", "refused") == "refused", out
    assert out["memfd"] == "Operation not permitted", out
    assert out["shmget"] == "Operation not permitted", out
    assert out["dev_shm"] == "No space left on device", out
    assert out["fork"] == 7
    assert "seccomp filter refuses memfd" in CONF.note
    if CONF.cgroups is None:  # the banner says the run as a whole is not capped, and why
        assert "run as a whole is not capped (" in CONF.note
    else:
        assert "run as a whole is capped by a cgroup v2 leaf" in CONF.note


@pytest.mark.skipif(CONF.cgroups is None, reason="no cgroup v2 delegation on this host (see the banner)")
async def test_run_memory_as_a_whole_is_capped_and_named(gated: tuple[Gate, FakeGrants, GatedLocalSandbox]) -> None:
    """Three processes each well under the per-process limit hold more than the run's cap
    together, tmpfs pages included: the run is stopped and the result names the run's memory."""
    gate, _, _ = gated
    box = GatedLocalSandbox(
        gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=CONF, limits=Limits(run_memory=192 << 20)
    )
    code = """
import os, time
for i in range(3):
    if os.fork() == 0:
        b = bytearray(96 << 20)
        for j in range(0, len(b), 4096):
            b[j] = 1
        time.sleep(5)
        os._exit(0)
for _ in range(3):
    os.wait()
print('all held')
"""
    res = await box.execute_code(code, "python")
    assert "memory of the whole run (192 MiB)" in res.stderr, (res.stdout, res.stderr)


def test_cgroup_regime_is_detected_and_its_events_are_read(tmp_path: Path) -> None:
    """On this host: detect() either gives a parent whose leaves take both limits, or says why not;
    a leaf's events file naming the OOM killer or pids.max is read as the limit hit."""
    cg, why = sandbox_cgroup.detect()
    assert (cg is None) == (CONF.cgroups is None) and why
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    (tmp_path / "pids.events").write_text("max 0\n")
    assert RunCgroups.hits(tmp_path) == ["run_memory"]
    (tmp_path / "pids.events").write_text("max 2\n")
    assert RunCgroups.hits(tmp_path) == ["run_memory", "nproc"]


# ---- item 10: two replicas never hand out the same run uid ----


@pytest.mark.skipif(not AS_ROOT, reason="run uids are drawn only when the server is root")
def test_two_replicas_never_pick_the_same_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sandbox picks its uids on its own (as two replicas' would); with the random draw forced
    to collide, the lock on the uid still gives the second one another."""
    import chat_approvals.core.sandbox.runner as sandbox_mod

    monkeypatch.setattr(sandbox_mod.secrets, "randbelow", lambda n: 7)
    a = GatedLocalSandbox(gate_unix_socket=None, gate_port=1, confinement=CONF)
    b = GatedLocalSandbox(gate_unix_socket=None, gate_port=1, confinement=CONF)
    ua, ub = a._uid(), b._uid()
    try:
        assert ua != ub
    finally:
        a._release_uid(ua)
        b._release_uid(ub)
    again = b._uid()  # released: free again
    b._release_uid(again)
    assert again == ua


async def test_cgroup_leaf_wiring_on_a_stand_in_hierarchy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gated: tuple[Gate, FakeGrants, GatedLocalSandbox]
) -> None:
    """The kernel's part cannot run on a cgroup v1 host, so a plain folder stands in for
    /sys/fs/cgroup: detect() enables both controllers, a real confined run writes its leaf's
    memory.max and pids.max and joins it ("0" into cgroup.procs) before bubblewrap starts."""
    root = tmp_path / "cg"
    (root / "cgroup.controllers").parent.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    own = next(x[3:] for x in Path("/proc/self/cgroup").read_text().splitlines() if x.startswith("0::")).strip()
    d = root / own.lstrip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.controllers").write_text("cpu memory pids\n")
    monkeypatch.setattr(sandbox_cgroup, "ROOT", root)
    monkeypatch.setattr(RunCgroups, "remove", staticmethod(lambda leaf: None))  # keep the leaf to look at
    cg, why = sandbox_cgroup.detect()
    assert cg is not None and cg.base == d / "sandbox-runs", why
    assert (d / "cgroup.subtree_control").read_text() == "+memory +pids"
    conf = dataclasses.replace(CONF, cgroups=cg)
    gate = gated[0]
    box = GatedLocalSandbox(
        gate_unix_socket=gate.unix_path, gate_port=gate.port, confinement=conf, limits=Limits(run_memory=300 << 20)
    )
    before = set(cg.base.iterdir())  # detect()'s own probe leaf
    res = await box.execute_code("print('ran')", "python")
    assert res.stdout.strip() == "ran", res.stderr
    [leaf] = set(cg.base.iterdir()) - before
    assert (leaf / "memory.max").read_text() == str(300 << 20)
    assert (leaf / "pids.max").read_text() == "128" and (leaf / "cgroup.procs").read_text() == "0"


@pytest.mark.skipif(not AS_ROOT, reason="without root every run is the server's uid: its user keyring is not cleared")
async def test_keys_left_in_the_uid_keyring_are_gone_for_the_next_run(
    gated: tuple[Gate, FakeGrants, GatedLocalSandbox], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 1 leaves a key in its uid's user keyring; run 2 gets the same uid (the draw forced):
    its user keyring is empty."""
    import chat_approvals.core.sandbox.runner as sandbox_mod

    monkeypatch.setattr(sandbox_mod.secrets, "randbelow", lambda n: 11)
    _, _, box = gated
    leave = (
        KEYCTL
        + """
add_key = {'x86_64': 248, 'aarch64': 217}[platform.machine()]
kid = libc.syscall(ctypes.c_long(add_key), b'user', b'left-behind', b'K2', ctypes.c_size_t(2), ctypes.c_long(-4))
print('added', kid > 0, os.getuid())
"""
    )
    look = (
        KEYCTL
        + """
print('members', len(read(-4)) // 4, os.getuid())
"""
    )
    first = await run_to_the_end(box, "import os\n" + leave)
    second = await run_to_the_end(box, "import os\n" + look)
    assert first.stdout.split()[:2] == ["added", "True"], first.stderr
    assert first.stdout.split()[2] == second.stdout.split()[2]  # the same uid
    assert second.stdout.split()[:2] == ["members", "0"], second.stdout


async def run_to_the_end(box: GatedLocalSandbox, code: str) -> ExecutionResult:
    """Drain the stream to its end, so the run's clean-up (its uid's release) has happened."""
    result = None
    async for item in box.execute_code_streaming(code, "python"):
        if isinstance(item, ExecutionResult):
            result = item
    assert result is not None
    return result
