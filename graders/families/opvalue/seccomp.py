"""The seccomp program bubblewrap installs on every process of an evaluator sandbox.

A classic BPF program (``struct sock_filter`` array, as ``bwrap --seccomp FD`` reads it), built
here so the sandbox needs no libseccomp. It denies with ``EPERM`` the calls an evaluator never
needs and that reach across processes or widen the kernel surface: debugging other processes
(``ptrace``, ``process_vm_*``, ``pidfd_getfd``, ``kcmp``), namespaces and mounts, keyrings, BPF,
perf, module and kexec loading, ``userfaultfd``, ``io_uring``, and memory that no process maps
(``memfd_*``, System V shared memory and message queues), which would escape the memory limit.
``clone`` with a namespace flag is denied too, and ``clone3`` answers ``ENOSYS`` (its flags sit
behind a pointer the filter cannot read; the C library then falls back to ``clone``).

The program checks the architecture first: x86_64 (no x32 calls) and aarch64 have tables here;
any other architecture is killed, so a missing table fails closed.
"""

from __future__ import annotations

import errno
import platform
import struct
from typing import Final

# <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>
_LD_W_ABS: Final = 0x20
_JEQ_K: Final = 0x15
_JGE_K: Final = 0x35
_JSET_K: Final = 0x45
_RET_K: Final = 0x06
RET_ALLOW: Final = 0x7FFF0000
RET_ERRNO: Final = 0x00050000
RET_KILL_PROCESS: Final = 0x80000000
AUDIT_ARCH_X86_64: Final = 0xC000003E
AUDIT_ARCH_AARCH64: Final = 0xC00000B7
_X32_BIT: Final = 0x40000000
_OFFSET_NR: Final = 0
_OFFSET_ARCH: Final = 4
_OFFSET_ARG0_LOW: Final = 16  # args[0] of struct seccomp_data; both architectures are little-endian
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
CLONE_NAMESPACE_FLAGS: Final = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 \
    | 0x40000000 | 0x00000080

DENIED: Final = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "memfd_create", "memfd_secret", "shmget", "shmat", "shmctl", "shmdt",
    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open",
    "acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "vhangup", "lookup_dcookie",
    "name_to_handle_at", "open_by_handle_at", "fanotify_init",
)

# System call numbers: x86_64 from asm/unistd_64.h, aarch64 from asm-generic/unistd.h.
SYSCALLS: Final[dict[str, dict[str, int]]] = {
    "x86_64": {
        "shmget": 29, "shmat": 30, "shmctl": 31, "clone": 56, "shmdt": 67, "msgget": 68, "msgsnd": 69,
        "msgrcv": 70, "msgctl": 71, "ptrace": 101, "syslog": 103, "vhangup": 153, "pivot_root": 155,
        "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
        "reboot": 169, "init_module": 175, "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212,
        "mq_open": 240, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
        "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
        "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
        "kcmp": 312, "finit_module": 313, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321,
        "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442, "memfd_secret": 447,
    },
    "aarch64": {
        "lookup_dcookie": 18, "umount2": 39, "mount": 40, "pivot_root": 41, "chroot": 51, "vhangup": 58,
        "quotactl": 60, "acct": 89, "unshare": 97, "kexec_load": 104, "init_module": 105,
        "delete_module": 106, "syslog": 116, "ptrace": 117, "reboot": 142, "mq_open": 180,
        "msgget": 186, "msgctl": 187, "msgrcv": 188, "msgsnd": 189, "shmget": 194, "shmctl": 195,
        "shmat": 196, "shmdt": 197, "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220,
        "swapon": 224, "swapoff": 225, "perf_event_open": 241, "fanotify_init": 262,
        "name_to_handle_at": 264, "open_by_handle_at": 265, "setns": 268, "process_vm_readv": 270,
        "process_vm_writev": 271, "kcmp": 272, "finit_module": 273, "memfd_create": 279, "bpf": 280,
        "userfaultfd": 282, "kexec_file_load": 294, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442,
        "memfd_secret": 447,
    },
}
_AUDIT_ARCH: Final = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}

Insn = tuple[int, int, int, int]


def _stmt(code: int, k: int) -> Insn:
    return (code, 0, 0, k)


def _jump(code: int, k: int, jt: int, jf: int) -> Insn:
    return (code, jt, jf, k)


def _arch_block(arch: str) -> list[Insn]:
    table = SYSCALLS[arch]
    eperm = RET_ERRNO | errno.EPERM
    block = [_stmt(_LD_W_ABS, _OFFSET_NR)]
    if arch == "x86_64":  # x32 calls share the architecture value; none is needed
        block += [_jump(_JGE_K, _X32_BIT, 0, 1), _stmt(_RET_K, RET_ERRNO | errno.ENOSYS)]
    for name in DENIED:
        block += [_jump(_JEQ_K, table[name], 0, 1), _stmt(_RET_K, eperm)]
    block += [
        _jump(_JEQ_K, table["clone3"], 0, 1), _stmt(_RET_K, RET_ERRNO | errno.ENOSYS),
        _jump(_JEQ_K, table["clone"], 0, 3),
        _stmt(_LD_W_ABS, _OFFSET_ARG0_LOW),
        _jump(_JSET_K, CLONE_NAMESPACE_FLAGS, 0, 1), _stmt(_RET_K, eperm),
        _stmt(_RET_K, RET_ALLOW),
    ]
    return block


def program() -> list[Insn]:
    """The filter as (code, jt, jf, k) instructions: architecture dispatch, then one block each."""
    blocks = [(arch, _arch_block(arch)) for arch in SYSCALLS]
    insns: list[Insn] = [_stmt(_LD_W_ABS, _OFFSET_ARCH)]
    # One dispatch jump per architecture, then KILL; each jump skips to its block.
    dispatch_len = len(blocks) + 1
    offset = 0
    for i, (arch, block) in enumerate(blocks):
        skip = (dispatch_len - i - 1) + offset
        if skip > 255:
            raise ValueError("seccomp program: jump too long")
        insns.append(_jump(_JEQ_K, _AUDIT_ARCH[arch], skip, 0))
        offset += len(block)
    insns.append(_stmt(_RET_K, RET_KILL_PROCESS))
    for _, block in blocks:
        insns += block
    return insns


def filter_bytes() -> bytes:
    """The program as ``struct sock_filter[]`` in native byte order."""
    return b"".join(struct.pack("=HBBI", code, jt, jf, k) for code, jt, jf, k in program())


def supported() -> bool:
    """Whether this machine's architecture has a table (else the sandbox fails closed)."""
    return platform.machine() in SYSCALLS
