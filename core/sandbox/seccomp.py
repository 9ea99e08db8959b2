"""The seccomp filter every sandbox run gets (bubblewrap's `--seccomp FD`), built with the
standard library: no seccomp library is installed here, and the program is a dozen instructions.

It refuses what gets around the per-process limits or the confinement itself:

- `memfd_create`, `memfd_secret`, `shmget`: memory that RLIMIT_AS does not count (one process
  held 16 memfds of 4 GiB in total under a 2 GiB limit); a run keeps its data in its size-capped
  `/tmp` instead;
- `clone`/`unshare` with CLONE_NEWUSER: a nested user namespace gives a full capability set inside
  it (bubblewrap's `--disable-userns` needs `--unshare-user`, which the root mode cannot use since
  the run's uid must exist outside); `clone3` answers ENOSYS, as under Docker, so libc falls back
  to `clone`, whose flags a filter can read;
- any other ABI (x32, i386 system calls on x86_64), whose numbers the filter does not know.
"""

from __future__ import annotations

import errno
import platform
import struct

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16
CLONE_NEWUSER = 0x10000000

# per architecture: (AUDIT_ARCH_*, numbers of memfd_create, memfd_secret, shmget, clone3, unshare, clone)
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {"memfd_create": 319, "memfd_secret": 447, "shmget": 29, "clone3": 435, "unshare": 272, "clone": 56},
    ),
    "aarch64": (
        0xC00000B7,
        {"memfd_create": 279, "memfd_secret": 447, "shmget": 194, "clone3": 435, "unshare": 97, "clone": 220},
    ),
}
REFUSED = ("memfd_create", "memfd_secret", "shmget")


def supported() -> bool:
    return platform.machine() in _ARCHES


def program(machine: str | None = None) -> bytes:
    """The BPF program as `struct sock_filter[]` bytes, for bubblewrap's `--seccomp FD`."""
    arch, nr = _ARCHES[machine or platform.machine()]
    ins: list[tuple[int, str | int, str | int, int]] = []  # (code, jt, jf, k); jumps by label

    def op(code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        ins.append((code, jt, jf, k))

    op(_LD_W_ABS, _OFF_ARCH)
    op(_JEQ, arch, 0, "eperm")
    op(_LD_W_ABS, _OFF_NR)
    if arch == 0xC000003E:
        op(_JGE, 0x40000000, "eperm", 0)  # the x32 ABI
    for name in REFUSED:
        op(_JEQ, nr[name], "eperm", 0)
    op(_JEQ, nr["clone3"], "enosys", 0)
    op(_JEQ, nr["unshare"], "flags", 0)
    op(_JEQ, nr["clone"], "flags", 0)
    op(_RET, _ALLOW)
    labels = {"flags": len(ins)}
    op(_LD_W_ABS, _OFF_ARG0)  # the flags' low 32 bits (little-endian)
    op(_JSET, CLONE_NEWUSER, "eperm", 0)
    op(_RET, _ALLOW)
    labels["eperm"] = len(ins)
    op(_RET, _ERRNO | errno.EPERM)
    labels["enosys"] = len(ins)
    op(_RET, _ERRNO | errno.ENOSYS)

    def rel(i: int, j: str | int) -> int:
        return labels[j] - i - 1 if isinstance(j, str) else j

    return b"".join(struct.pack("=HBBI", c, rel(i, jt), rel(i, jf), k) for i, (c, jt, jf, k) in enumerate(ins))
