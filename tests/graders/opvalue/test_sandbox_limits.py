"""The sandbox's limits bind the whole sandbox and cannot be escaped from inside it."""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import struct
import subprocess
from pathlib import Path

import orjson
import pytest

from graders.families.opvalue import sandbox as sandbox_module
from graders.families.opvalue import seccomp
from graders.families.opvalue.cgroup import SandboxCgroup, find_parent
from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
from graders.families.opvalue.sandbox import NOBODY, SandboxOptions, run_evaluator
from tests.graders.opvalue.conftest import evaluator

OK = """echo '[{"id":"ok","value":1}]'"""


def error_of(body: str, opts: SandboxOptions) -> str:
    with pytest.raises(OperationalValueError) as info:
        run_evaluator(evaluator(body), b"{}", opts)
    assert not isinstance(info.value, SandboxUnavailableError), info.value
    return str(info.value)


def py(code: str) -> str:
    """A python3 one-liner inside the sandbox (the launcher's interpreter is there anyway)."""
    return "python3 -c '" + code.replace("'", "'\\''") + "'"


SYSCALL_PROBE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def probe(name, *args):
    r = libc.syscall(*args)
    print(name, "ok" if r >= 0 else os.strerror(ctypes.get_errno()), file=__import__("sys").stderr)
"""


def test_ptrace_of_the_launcher_and_parent_is_denied(sandbox):
    code = SYSCALL_PROBE + "probe('attach-1', 101, 16, 1, 0, 0); probe('attach-parent', 101, 16, os.getppid(), 0, 0)"
    message = error_of(f"{py(code)}; exit 1", sandbox)
    assert message.splitlines() == ["attach-1 Operation not permitted", "attach-parent Operation not permitted"]


def test_launcher_memory_cannot_be_written_from_inside(sandbox):
    message = error_of(f"echo x > /proc/1/mem && {OK}", sandbox)
    assert "/proc/1/mem: Permission denied" in message


def test_namespaces_and_unmapped_memory_are_denied(sandbox):
    code = SYSCALL_PROBE + (
        "probe('unshare', 272, 0x10000000); probe('unshare-net', 272, 0x40000000);"
        "probe('memfd', 319, b'x', 0); probe('shmget', 29, 0, 1 << 20, 0o1600);"
        "probe('clone-newpid', 56, 0x20000000 | 17, 0, 0, 0, 0)"
    )
    message = error_of(f"{py(code)}; unshare -n true; exit 1", sandbox)
    lines = message.splitlines()
    assert lines[:5] == [f"{name} Operation not permitted"
                         for name in ("unshare", "unshare-net", "memfd", "shmget", "clone-newpid")]
    assert "unshare failed: Operation not permitted" in lines[5]


def test_dev_and_root_are_read_only(sandbox):
    for target in ("/dev/big", "/dev/shm/big", "/big", "/evaluator/big"):
        message = error_of(f"set -e; dd if=/dev/zero of={target} bs=1M count=200 status=none; {OK}",
                           sandbox)
        assert "Read-only file system" in message or "Permission denied" in message, (target, message)


def test_tmp_is_capped(sandbox):
    opts = dataclasses.replace(sandbox, tmp_size_bytes=8 * 1024 * 1024)
    message = error_of(f"set -e; dd if=/dev/zero of=/tmp/big bs=1M count=200 status=none; {OK}", opts)
    assert "No space left on device" in message


def test_total_memory_of_all_processes_is_capped(sandbox):
    # Four children of 80 MB each stay under a 200 MB per-process limit, but not in total.
    opts = dataclasses.replace(sandbox, memory_bytes=200_000_000)
    hold = py("import time; b = b'a' * (80 << 20); time.sleep(25)")
    message = error_of(f"for i in 1 2 3 4; do {hold} & done; wait; {OK}", opts)
    assert message == "operational-value evaluator exceeded the 200000000-byte memory limit"


def test_two_children_within_the_total_are_fine(sandbox):
    opts = dataclasses.replace(sandbox, memory_bytes=400_000_000)
    hold = py("import time; b = b'a' * (60 << 20); time.sleep(0.5)")
    out = run_evaluator(evaluator(f"{hold} & {hold} & wait; {OK}"), b"{}", opts)
    assert out.strip() == '[{"id":"ok","value":1}]'


def test_limits_bind_the_launcher_too(sandbox):
    opts = dataclasses.replace(sandbox, max_open_files=77)
    message = error_of("grep -E '^Max open files' /proc/1/limits >&2; exit 1", opts)
    assert re.fullmatch(r"Max open files\s+77\s+77\s+files", message), message


def test_launcher_refuses_to_start_without_the_limits(sandbox, monkeypatch, tmp_path):
    marker = tmp_path / "ran"
    monkeypatch.setattr(SandboxOptions, "prlimit_argv", lambda self, timeout: ["--core=0:0"])
    with pytest.raises(SandboxUnavailableError, match=r"the cpu limit was not set before the sandbox started"):
        run_evaluator(evaluator(f"touch '{marker}'; {OK}"), b"{}", dataclasses.replace(sandbox, allow_unsandboxed=True))
    assert not marker.exists()


def test_missing_prlimit_fails_closed(sandbox, monkeypatch, tmp_path):
    marker = tmp_path / "ran"
    real_which = sandbox_module.shutil.which
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None if name == "prlimit" else real_which(name))
    with pytest.raises(SandboxUnavailableError, match="prlimit"):
        run_evaluator(evaluator(f"touch '{marker}'; {OK}"), b"{}", dataclasses.replace(sandbox, allow_unsandboxed=True))
    assert not marker.exists()


def test_architecture_without_a_seccomp_table_fails_closed(sandbox, monkeypatch):
    monkeypatch.setattr(seccomp, "supported", lambda: False)
    with pytest.raises(SandboxUnavailableError, match="no seccomp table"):
        run_evaluator(evaluator(OK), b"{}", sandbox)


def test_configured_cgroup_without_controllers_fails_closed(sandbox, tmp_path):
    (tmp_path / "cgroup.subtree_control").write_text("cpu\n")
    opts = dataclasses.replace(sandbox, cgroup_parent=str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match=r"does not delegate the memory and pids controller"):
        run_evaluator(evaluator(OK), b"{}", opts)


def test_cgroup_is_made_with_its_limits_joined_and_removed(sandbox, tmp_path, monkeypatch):
    # A plain folder stands in for a delegated cgroup (this host may have none): the plumbing is real.
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert find_parent(str(tmp_path)) == tmp_path
    seen: dict[str, str] = {}

    def remove(self: SandboxCgroup) -> None:
        seen.update({p.name: p.read_text() for p in self.path.iterdir()})
        for p in self.path.iterdir():
            p.unlink()
        self.path.rmdir()

    monkeypatch.setattr(SandboxCgroup, "remove", remove)
    opts = dataclasses.replace(sandbox, cgroup_parent=str(tmp_path), memory_bytes=300_000_000, max_processes=40,
                               cpu_quota=0.5)
    real_mkdir = Path.mkdir

    def mkdir(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if self.name.startswith("fleetgrade-sandbox-"):  # files the kernel makes in a real cgroup
            for name in ("memory.swap.max", "memory.oom.group", "cpu.max"):
                (self / name).write_text("max\n")

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert run_evaluator(evaluator(OK), b"{}", opts).strip() == '[{"id":"ok","value":1}]'
    assert seen["memory.max"] == "300000000"
    assert seen["pids.max"] == "40"
    assert seen["memory.swap.max"] == "0"
    assert seen["cpu.max"] == "50000 100000"
    assert seen["memory.oom.group"] == "1"
    assert seen["cgroup.procs"].strip() == "0"  # the sandbox's first process joined before exec
    assert [p.name for p in tmp_path.iterdir()] == ["cgroup.subtree_control"]


def test_cgroup_parent_can_come_from_the_environment(sandbox, tmp_path, monkeypatch):
    (tmp_path / "cgroup.subtree_control").write_text("pids\n")
    monkeypatch.setenv("FLEETGRADE_SANDBOX_CGROUP", str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match=r"does not delegate the memory controller"):
        run_evaluator(evaluator(OK), b"{}", sandbox)


def test_cgroup_oom_is_read_from_memory_events(tmp_path):
    group = SandboxCgroup(tmp_path)
    assert not group.oom_killed()
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 0\noom_kill 0\n")
    assert not group.oom_killed()
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_killed()


# --- the seccomp program, run by a small classic-BPF interpreter ------------------------------

def _run_bpf(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


EPERM = seccomp.RET_ERRNO | errno.EPERM
ENOSYS = seccomp.RET_ERRNO | errno.ENOSYS
X86, ARM = seccomp.AUDIT_ARCH_X86_64, seccomp.AUDIT_ARCH_AARCH64


@pytest.mark.parametrize("arch, table", [(X86, "x86_64"), (ARM, "aarch64")])
def test_seccomp_program_denies_the_listed_calls_and_allows_others(arch, table):
    program = seccomp.filter_bytes()
    numbers = seccomp.SYSCALLS[table]
    for name in seccomp.DENIED:
        assert _run_bpf(program, numbers[name], arch) == EPERM, name
    write, fork_flags = (1, 17) if table == "x86_64" else (64, 17)
    assert _run_bpf(program, write, arch) == seccomp.RET_ALLOW
    assert _run_bpf(program, numbers["clone"], arch, (fork_flags,)) == seccomp.RET_ALLOW
    assert _run_bpf(program, numbers["clone"], arch, (0x10000000 | fork_flags,)) == EPERM
    assert _run_bpf(program, numbers["clone3"], arch) == ENOSYS


def test_seccomp_program_refuses_x32_and_unknown_architectures():
    program = seccomp.filter_bytes()
    assert _run_bpf(program, 0x40000000 | 1, X86) == ENOSYS
    assert _run_bpf(program, 1, 0x40000003) == seccomp.RET_KILL_PROCESS  # i386


@pytest.mark.parametrize("table, header", [
    ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    ("aarch64", "/usr/include/asm-generic/unistd.h"),
])
def test_seccomp_numbers_match_the_kernel_headers(table, header):
    path = Path(header)
    if not path.exists():
        pytest.skip(f"{header} is not installed")
    defined = dict(re.findall(r"^#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", path.read_text(), re.M))
    for name, number in seccomp.SYSCALLS[table].items():
        assert int(defined[name]) == number, name


def test_watchdog_tolerates_bwraps_brief_unreadable_set_up(sandbox):
    # Polling every 5 ms catches bwrap's set-up phase (its child is not readable then) most runs.
    from concurrent.futures import ThreadPoolExecutor

    opts = dataclasses.replace(sandbox, watch_interval_s=0.005)
    with ThreadPoolExecutor(max_workers=4) as pool:
        outs = list(pool.map(lambda _: run_evaluator(evaluator(OK), b"{}", opts), range(16)))
    assert set(outs) == {'[{"id":"ok","value":1}]\n'}


def test_a_sandbox_that_stays_unreadable_fails_closed(sandbox, monkeypatch):
    def denied(child_pid: int) -> int:
        raise PermissionError(13, "Permission denied", f"/proc/{child_pid}/root/proc")

    monkeypatch.setattr(sandbox_module, "sandbox_memory", denied)
    monkeypatch.setattr(sandbox_module, "_WATCH_DENIED_S", 0.2)
    with pytest.raises(SandboxUnavailableError, match=r"cannot watch the sandbox's memory: .*Permission denied"):
        run_evaluator(evaluator(f"sleep 20; {OK}"), b"{}", sandbox)


def test_process_limit_counts_this_sandbox_not_every_sandbox_of_the_host(sandbox):
    if os.geteuid() != 0:
        pytest.skip("needs root to hold processes as nobody")
    # Other sandboxes' processes (here: plain ones as nobody) must not use up this one's limit.
    held = [subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                              "sleep", "60"]) for _ in range(12)]
    try:
        opts = dataclasses.replace(sandbox, max_processes=8)
        body = f'for i in 1 2 3; do sleep 0.1 & done; wait; {OK}'
        assert run_evaluator(evaluator(body), b"{}", opts).strip() == '[{"id":"ok","value":1}]'
        limit = run_evaluator(evaluator('echo "[{\\"id\\":\\"u\\",\\"value\\":$(ulimit -u)}]"'), b"{}", opts)
        assert limit.strip() == '[{"id":"u","value":8}]'
    finally:
        for proc in held:
            proc.kill()
            proc.wait()


# ---- bounds on objects, not bytes (issue 40): each kernel object the evaluator can make is counted

OBJECTS = """
import errno, os, socket
def fill(make):
    n = 0
    try:
        while n < 100000:
            make(n)
            n += 1
    except OSError as e:
        return [n, errno.errorcode.get(e.errno)]
    return [n, None]
def sock(n):
    s = socket.socket(socket.AF_UNIX)
    s.bind(f"/tmp/a/s{n}")
    s.close()
def clear():
    for p in os.listdir("/tmp/a"):
        os.unlink("/tmp/a/" + p) if not os.path.isdir("/tmp/a/" + p) else os.rmdir("/tmp/a/" + p)
os.mkdir("/tmp/a")
open("/tmp/f", "w").close()
out = []
for make in (lambda n: os.mkdir(f"/tmp/a/d{n}"), lambda n: os.link("/tmp/f", f"/tmp/a/l{n}"),
             lambda n: os.mkfifo(f"/tmp/a/p{n}"), sock, lambda n: os.symlink("x" * 200, f"/tmp/a/y{n}"),
             lambda n: os.setxattr("/tmp/f", f"user.k{n}", b"v" * 60000)):
    out.append(fill(make))
    clear()
import json
print(json.dumps([{"id": str(i), "value": n, "message": str(e)} for i, (n, e) in enumerate(out)]))
"""


def test_tmp_is_capped_in_inodes_for_every_kind_of_entry(sandbox):
    """Folders, hard links, FIFOs, sockets, symbolic links and extended attributes all take from
    one kernel budget (nr_inodes): 1.2 million empty folders in a 64 MiB /tmp held 1.2 GiB."""
    if sandbox_module._private_tmpfs(*_unshare_and_setpriv()) is False:
        pytest.skip("no private tmpfs here: the watchdog's count is tested below")
    opts = dataclasses.replace(sandbox, tmp_inodes=100)
    made = orjson.loads(run_evaluator(evaluator(py(OBJECTS)), b"{}", opts))
    # 100 inodes: the root, /tmp/a, /tmp/f and what each kind could make before the kernel said no.
    assert [(m["value"], m["message"]) for m in made] == [(97, "ENOSPC")] * 5 + [(1, "ENOSPC")], made
    df = run_evaluator(evaluator('echo "[{\\"id\\":\\"i\\",\\"value\\":$(stat -f -c %c /tmp)}]"'), b"{}", opts)
    assert orjson.loads(df) == [{"id": "i", "value": 100}]


def _unshare_and_setpriv() -> tuple[str, tuple[str, ...]]:
    import shutil

    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare is part of the sandbox's set-up"
    return unshare, tuple(sandbox_module._setpriv_argv()) if os.geteuid() == 0 else ()


def test_without_a_private_tmpfs_the_watchdog_counts_its_inodes(sandbox, monkeypatch):
    monkeypatch.setattr(sandbox_module, "_private_tmpfs", lambda *args: False)
    opts = dataclasses.replace(sandbox, tmp_inodes=100)
    message = error_of(py("import os, time\nfor n in range(5000): os.mkdir(f'/tmp/d{n}')\ntime.sleep(20)"), opts)
    assert message == "operational-value evaluator made more than 100 files and folders in /tmp"
    # Under the limit, nothing is said (the host's own /tmp, seen before bwrap mounts the sandbox's, is not counted).
    assert run_evaluator(evaluator(f"mkdir /tmp/a /tmp/b; {OK}"), b"{}", opts).strip() == '[{"id":"ok","value":1}]'


def test_open_files_are_capped(sandbox):
    opts = dataclasses.replace(sandbox, max_open_files=64)
    message = error_of(py("fs = [open('/dev/null') for _ in range(200)]"), opts)
    assert "Too many open files" in message


def test_processes_are_capped_quickly(sandbox):
    opts = dataclasses.replace(sandbox, max_processes=16)
    count = py("import json, os, time\nn = 0\n"
               "try:\n    while n < 100:\n        if os.fork() == 0:\n            time.sleep(2)\n            os._exit(0)\n"
               "        n += 1\nexcept BlockingIOError:\n    pass\n"
               "print(json.dumps([{'id': 'n', 'value': n}]))")
    made = orjson.loads(run_evaluator(evaluator(count), b"{}", opts))[0]["value"]
    assert 0 < made < 16  # bash, python and the launcher count too


def test_a_huge_argument_list_is_refused_by_the_kernel(sandbox):
    message = error_of('/bin/true "$(head -c 50000000 /dev/zero | tr "\\0" a)"', sandbox)
    assert "Argument list too long" in message
