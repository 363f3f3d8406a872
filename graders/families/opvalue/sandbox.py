"""Run a frozen Bash evaluator under bubblewrap with limits and timeouts (docs/reference/graders.md §10).

The reference runs ``/bin/bash <file>`` directly on the runner. A fleet grader runs evaluators from
many repositories on shared workers, so each run gets a throw-away sandbox:

- ``bwrap --unshare-all``: new network (no interfaces but a down loopback), PID, IPC, UTS, cgroup
  and user namespaces; nested user namespaces are disabled;
- read-only ``/usr`` (plus the ``/bin``, ``/lib*`` links and three ``/etc`` entries Debian tools
  need), fresh ``/proc``, a minimal read-only ``/dev``, a read-only root and a private ``/tmp``
  capped in bytes and in inodes (the only writable place; mounted in a namespace of its own
  before bwrap starts, as bwrap's tmpfs takes no ``nr_inodes``); no host home, no writable host
  path; the evaluator is copied in read-only;
- a seccomp filter (seccomp.py) on every process inside: no ``ptrace``, ``process_vm_*``,
  namespaces, mounts, keyrings, BPF, ``io_uring``, unmapped shared memory and the like;
- ``--clearenv`` and then only the §10 whitelist, from the caller's explicit values (never from
  this process's environment); HOME and TMPDIR are the private ``/tmp``;
- when we are root, bwrap itself runs as ``nobody`` so the kernel enforces the process limit
  (RLIMIT_NPROC does not apply to root);
- per-process limits on CPU seconds, address space, file size and open files, set with
  ``prlimit`` before bwrap starts so that every process of the sandbox, the launcher included,
  inherits them; the process limit is set by the launcher before it starts anything (see
  ``prlimit_argv``);
- limits on the sandbox as a whole: a cgroup v2 with ``memory.max``, ``pids.max`` and ``cpu.max``
  where a delegated cgroup parent exists (cgroup.py); otherwise a watchdog that sums the
  proportional memory (PSS) of the sandbox's processes every poll and ends the sandbox when the
  sum passes the memory limit (a userspace check: a burst between two polls can overshoot, each
  process still bounded by its address-space limit);
- wall timeouts that kill the whole process group (and with it the PID namespace);
- stdout and stderr capped at 1 MiB each.

If bwrap, prlimit or the seccomp table for this architecture is missing, or bwrap cannot build
the sandbox, or a cgroup that should work cannot be made, we fail closed with
"operational-value sandbox unavailable: …". ``SandboxOptions.allow_unsandboxed=True`` is an explicit
opt-in for trusted local use only: the evaluator then runs on the host with the same environment
whitelist, limits and timeouts but **without** namespace isolation (network and the host filesystem
are reachable). The pipeline never sets it.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Final

import orjson

from graders.families.opvalue import seccomp
from graders.families.opvalue.cgroup import SandboxCgroup, find_parent
from graders.families.opvalue.errors import OperationalValueError, SandboxUnavailableError
from graders.jsrt.jscompat import js_trim

DEFAULT_SYNTAX_CHECK_TIMEOUT_MS: Final = 5_000
DEFAULT_EVALUATOR_TIMEOUT_MS: Final = 120_000
MAX_TIMEOUT_MS: Final = 2**31 - 1
MAX_OUTPUT_BYTES: Final = 1024 * 1024
# The §10 whitelist: nothing else reaches the evaluator, so workflow secrets never do.
ENV_WHITELIST: Final = (
    "PATH", "HOME", "TMPDIR", "TEMP", "TMP", "SystemRoot", "ComSpec",
    "GH_TOKEN", "GH_HOST", "GITHUB_API_URL", "GITHUB_GRAPHQL_URL", "GITHUB_SERVER_URL",
)
SANDBOX_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
EVALUATOR_NAME: Final = "operational-value.sh"
SANDBOX_EVALUATOR: Final = f"/evaluator/{EVALUATOR_NAME}"
SYNTAX_OPERATION: Final = "operational-value evaluator syntax check"
RUN_OPERATION: Final = "operational-value evaluator"
NOBODY: Final = 65534
CGROUP_ENV: Final = "FLEETGRADE_SANDBOX_CGROUP"
_WATCH_DENIED_S: Final = 2.0  # how long the memory watchdog tolerates an unreadable sandbox
_LAUNCHER: Final = Path(__file__).with_name("launcher.py")
_ROOT_LINKS: Final = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Debian's /usr/bin/awk & co. point into /etc/alternatives; the rest of /etc stays out.
_ETC: Final = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime")


def timeout_ms(value: object, default: int) -> int:
    """``getPositiveEnvIntOrDefault``: a positive integer (or digit string), capped at 2^31-1."""
    if isinstance(value, bool):
        return default
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            return default
        value = int(text)
    if not isinstance(value, int) or value <= 0 or value > 2**53 - 1:
        return default
    return min(value, MAX_TIMEOUT_MS)


@dataclass(frozen=True)
class SandboxOptions:
    """Limits and inputs of one evaluator run; overrides come from here, not from our env."""

    syntax_check_timeout_ms: object = DEFAULT_SYNTAX_CHECK_TIMEOUT_MS
    evaluator_timeout_ms: object = DEFAULT_EVALUATOR_TIMEOUT_MS
    max_output_bytes: int = MAX_OUTPUT_BYTES
    cpu_seconds: int | None = None  # default: the evaluator timeout, rounded up, plus 5 s
    memory_bytes: int = 1024 * 1024 * 1024
    max_processes: int = 128
    max_file_bytes: int = 64 * 1024 * 1024
    max_open_files: int = 256
    tmp_size_bytes: int = 64 * 1024 * 1024
    # Files, folders, links, FIFOs and sockets in /tmp (and their extended attributes): each holds
    # kernel memory that neither the byte size nor the memory limit counts (1.2 million empty
    # folders held 1.2 GiB; docs/sandboxing.md).
    tmp_inodes: int = 16384
    env: Mapping[str, str] = field(default_factory=dict)
    allow_unsandboxed: bool = False
    bwrap_path: str | None = None
    # A cgroup v2 folder delegating memory and pids. None: $FLEETGRADE_SANDBOX_CGROUP on the
    # machine that runs the evaluator (read there, not where the options were made), else our
    # own cgroup if it delegates them, else no cgroup (the watchdog).
    cgroup_parent: str | None = None
    use_cgroup: bool = True
    cpu_quota: float = 1.0  # CPUs the sandbox may use at once, under a cgroup
    watch_interval_s: float = 0.05

    @property
    def syntax_timeout(self) -> int:
        return timeout_ms(self.syntax_check_timeout_ms, DEFAULT_SYNTAX_CHECK_TIMEOUT_MS)

    @property
    def evaluator_timeout(self) -> int:
        return timeout_ms(self.evaluator_timeout_ms, DEFAULT_EVALUATOR_TIMEOUT_MS)

    def limit_values(self, timeout: int) -> dict[str, int]:
        cpu = self.cpu_seconds if self.cpu_seconds is not None else math.ceil(timeout / 1000) + 5
        return {"cpu": cpu, "as": self.memory_bytes, "nproc": self.max_processes,
                "fsize": self.max_file_bytes, "nofile": self.max_open_files}

    def limits(self, timeout: int) -> str:
        return ",".join(f"{k}={v}" for k, v in self.limit_values(timeout).items())

    def prlimit_argv(self, timeout: int) -> list[str]:
        """``prlimit`` options setting each limit (soft = hard) on the process it then execs.

        Not the process count: set before bwrap creates the user namespace, it would also bound
        the namespace's parent count, i.e. every sandbox of the host together. The launcher sets
        it inside, where it counts this sandbox's processes only.
        """
        return [f"--{k}={v}:{v}" for k, v in self.limit_values(timeout).items() if k != "nproc"]


def evaluator_env(configured: Mapping[str, str], home: str) -> dict[str, str]:
    """``safeFunctionEnv`` over explicit values: whitelisted, non-empty keys only."""
    env = {"PATH": SANDBOX_PATH, "HOME": home, "TMPDIR": home}
    for key in ENV_WHITELIST:
        value = configured.get(key)
        if value:
            env[key] = value
    return env


def _sandbox_python() -> str | None:
    """An interpreter for the launcher that is visible inside the sandbox (under /usr)."""
    candidates = [os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"]
    for path in candidates:
        if path.startswith("/usr/") and os.access(path, os.X_OK):
            return path
    return None


@dataclass(frozen=True)
class _Plan:
    bwrap: str | None  # None: the explicit unsandboxed opt-in
    python: str
    env: dict[str, str]
    cwd: str | None
    drop_to_nobody: bool
    prlimit: str
    cgroup_parent: Path | None
    # ``unshare``, when /tmp is a tmpfs mounted with an inode cap in a namespace of its own before
    # bwrap starts (bwrap's --tmpfs takes a size, not nr_inodes); None: bwrap's tmpfs, whose
    # inodes the watchdog counts.
    unshare: str | None = None

    @property
    def sandboxed(self) -> bool:
        return self.bwrap is not None


# Mounts the capped tmpfs on an empty folder of the run's own (``$2``) in the mount namespace
# ``unshare`` made (private: the host sees nothing of it), then becomes bwrap, which binds it as
# the sandbox's /tmp.
_MOUNT_TMP: Final = 'mount -t tmpfs -o "$1" fleetgrade-tmp "$2" && shift 2 && exec "$@"'


def tmp_mount_options(opts: SandboxOptions) -> str:
    return f"size={opts.tmp_size_bytes},nr_inodes={opts.tmp_inodes},mode=1777,nosuid,nodev"


def _unshare_argv(unshare: str, opts: SandboxOptions, mountpoint: str) -> list[str]:
    return [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private",
            "/bin/sh", "-c", _MOUNT_TMP, "fleetgrade-sandbox", tmp_mount_options(opts), mountpoint]


def _mountpoint() -> str:
    """An empty folder under /tmp (searchable by anyone, whatever ``tempfile.tempdir`` is) for
    the sandbox's user (nobody, when we are root) to mount its /tmp on; the mount is only seen in
    the sandbox's namespace, so the folder stays empty on the host, and is removed after."""
    path = tempfile.mkdtemp(prefix="operational-value-tmp-", dir="/tmp")
    os.chmod(path, 0o755)
    return path


@functools.cache
def _private_tmpfs(unshare: str, setpriv: tuple[str, ...]) -> bool:
    """Whether a capped tmpfs can be mounted in a namespace of our own here (as the user the
    sandbox starts as): unprivileged user namespaces, which bwrap needs too, and util-linux's
    mount. Asked once per process."""
    probe = SandboxOptions(tmp_size_bytes=1 << 20, tmp_inodes=16)
    try:
        folder = _mountpoint()
    except OSError:
        return False
    try:
        argv = [*setpriv, *_unshare_argv(unshare, probe, folder), "/bin/true"]
        done = subprocess.run(argv, capture_output=True, timeout=10, env={"PATH": SANDBOX_PATH}, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        os.rmdir(folder)
    return done.returncode == 0


def _setpriv_argv() -> list[str]:
    # setpriv, not Popen(user=…): those arguments make CPython fork() instead of vfork(),
    # and a fork() of a multi-threaded gRPC process (a Beam SDK worker) can crash the child.
    setpriv = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]


def _bwrap_argv(bwrap: str, python: str, opts: SandboxOptions, evaluator_fd: int, seccomp_fd: int,
                info_fd: int, plan: _Plan, tmp_dir: str | None) -> list[str]:
    # --as-pid-1: the launcher is the namespace's init, so no unfiltered bwrap reaper sits inside.
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--as-pid-1", "--clearenv", "--seccomp", str(seccomp_fd),
            "--info-fd", str(info_fd), "--ro-bind", "/usr", "/usr"]
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for path in _ETC:
        argv += ["--ro-bind-try", path, path]
    # /dev and the root are tmpfs mounts bwrap makes; both end read-only, so the capped /tmp
    # is the only place the evaluator can write to.
    if tmp_dir is not None:
        # /tmp: the tmpfs capped in bytes and inodes mounted before bwrap started (_MOUNT_TMP);
        # bwrap runs as root of that namespace, so the sandbox's user is given explicitly.
        uid = NOBODY if plan.drop_to_nobody else os.getuid()
        gid = NOBODY if plan.drop_to_nobody else os.getgid()
        tmp = ["--uid", str(uid), "--gid", str(gid), "--bind", tmp_dir, "/tmp"]
    else:
        tmp = ["--size", str(opts.tmp_size_bytes), "--tmpfs", "/tmp"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", *tmp,
             "--dir", "/evaluator", "--perms", "0500", "--ro-bind-data", str(evaluator_fd), SANDBOX_EVALUATOR,
             "--remount-ro", "/", "--chdir", "/tmp"]
    for key, value in evaluator_env(opts.env, "/tmp").items():
        argv += ["--setenv", key, value]
    return [*argv, "--", python]


def _plan(opts: SandboxOptions, tempdir: str) -> _Plan:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise SandboxUnavailableError(
            "operational-value sandbox unavailable: prlimit (util-linux) is not installed; "
            "refusing to run the evaluator without its limits"
        )
    bwrap = opts.bwrap_path or shutil.which("bwrap")
    if bwrap is None or not os.access(bwrap, os.X_OK):
        if opts.allow_unsandboxed:
            return _Plan(None, sys.executable, evaluator_env(opts.env, tempdir), tempdir, False, prlimit, None)
        raise SandboxUnavailableError(
            "operational-value sandbox unavailable: bwrap (bubblewrap) is not installed; "
            "refusing to run the evaluator unsandboxed"
        )
    python = _sandbox_python()
    if python is None:
        raise SandboxUnavailableError(
            "operational-value sandbox unavailable: no Python interpreter under /usr for the sandbox launcher"
        )
    if not seccomp.supported():
        raise SandboxUnavailableError(
            f"operational-value sandbox unavailable: no seccomp table for architecture {os.uname().machine}"
        )
    explicit = opts.cgroup_parent or os.environ.get(CGROUP_ENV) or None
    parent = find_parent(explicit) if opts.use_cgroup else None
    root = os.geteuid() == 0
    unshare = shutil.which("unshare")
    if unshare is not None and _private_tmpfs(unshare, tuple(_setpriv_argv()) if root else ()):
        return _Plan(bwrap, python, {}, None, root, prlimit, parent, unshare)
    return _Plan(bwrap, python, {}, None, root, prlimit, parent)


class _Capped(threading.Thread):
    """Drains one pipe, keeping at most ``limit`` bytes and flagging any excess."""

    def __init__(self, stream: IO[bytes], limit: int, on_overflow: threading.Event) -> None:
        super().__init__(daemon=True)
        self.stream, self.limit, self.on_overflow = stream, limit, on_overflow
        self.data = bytearray()

    def run(self) -> None:
        while chunk := os.read(self.stream.fileno(), 65536):
            room = self.limit - len(self.data)
            self.data += chunk[: max(room, 0)]
            if len(chunk) > room:
                self.on_overflow.set()
                break
        self.stream.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError):
        pass  # the evaluator need not read its request
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _read_status(fd: int) -> list[str]:
    os.set_blocking(fd, False)
    data = b""
    try:
        while chunk := os.read(fd, 4096):
            data += chunk
    except BlockingIOError:
        pass
    return data.decode("ascii", "replace").split()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


@dataclass
class _Outcome:
    stdout: bytes
    stderr: bytes
    status: list[str]
    returncode: int
    timed_out: bool
    overflow: bool
    memory_exceeded: bool = False
    inodes_exceeded: bool = False


def _pss_bytes(smaps_rollup: Path) -> int:
    try:
        text = smaps_rollup.read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return 0  # the process ended between the listing and the read
    for line in text.splitlines():
        if line.startswith(b"Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def sandbox_memory(child_pid: int) -> int | None:
    """The summed PSS of every process in the sandbox whose init has host PID ``child_pid``.

    The sandbox's own ``/proc`` (seen through its init's root) lists exactly its PID namespace.
    None when the sandbox is already gone. Raises PermissionError when a process (or the sandbox)
    cannot be read: bwrap's own set-up, before it execs the launcher, is briefly unreadable.
    """
    procfs = Path(f"/proc/{child_pid}/root/proc")
    try:
        entries = [e.name for e in os.scandir(procfs) if e.name.isdigit()]
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    return sum(_pss_bytes(procfs / name / "smaps_rollup") for name in entries)


def sandbox_tmp_inodes(child_pid: int) -> int | None:
    """Files, folders, links and the like in the /tmp of the sandbox whose init has host PID
    ``child_pid`` (its tmpfs's inodes in use); None when the sandbox is gone or not set up yet."""
    path = f"/proc/{child_pid}/root/tmp"
    try:
        # Until bwrap has mounted the sandbox's /tmp, its child sees the host's: not counted.
        if os.stat(path).st_dev in (os.stat("/tmp").st_dev, os.stat("/").st_dev):
            return None
        st = os.statvfs(path)
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    return st.f_files - st.f_ffree


def _child_pid(info: bytes) -> int | None:
    try:
        data = orjson.loads(info)
    except orjson.JSONDecodeError:
        return None
    pid = data.get("child-pid") if isinstance(data, dict) else None
    return pid if isinstance(pid, int) and pid > 0 else None


class _InfoReader(threading.Thread):
    """Reads bwrap's ``--info-fd`` JSON (it holds the sandbox init's host PID)."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self.fd = fd
        self.data = b""
        self.done = threading.Event()

    def run(self) -> None:
        try:
            while chunk := os.read(self.fd, 4096):
                self.data += chunk
                if len(self.data) > 65536:
                    break
        finally:
            os.close(self.fd)
            self.done.set()


def _seccomp_fd() -> int:
    """A pipe's read end holding the seccomp program (far smaller than a pipe buffer)."""
    program = seccomp.filter_bytes()
    r, w = os.pipe()
    try:
        os.write(w, program)
    finally:
        os.close(w)
    return r


def _spawn(plan: _Plan, opts: SandboxOptions, bash_args: list[str], input_data: bytes,
           timeout: int, evaluator_fd: int | None) -> _Outcome:
    launcher = _LAUNCHER.read_text(encoding="utf-8")
    status_r, status_w = os.pipe()
    opened = [status_r, status_w]
    cgroup: SandboxCgroup | None = None
    info: _InfoReader | None = None
    info_r: int | None = None
    tmp_dir: str | None = None
    try:
        pass_fds: tuple[int, ...] = (status_w,)
        if plan.bwrap is not None:
            assert evaluator_fd is not None
            seccomp_r = _seccomp_fd()
            info_r, info_w = os.pipe()
            opened += [seccomp_r, info_r, info_w]
            if plan.unshare is not None:
                tmp_dir = _mountpoint()
            argv = _bwrap_argv(plan.bwrap, plan.python, opts, evaluator_fd, seccomp_r, info_w, plan, tmp_dir)
            if plan.unshare is not None and tmp_dir is not None:
                argv = [*_unshare_argv(plan.unshare, opts, tmp_dir), *argv]
            pass_fds += (evaluator_fd, seccomp_r, info_w)
        else:
            argv = [plan.python]
        argv = [*argv, "-I", "-S", "-B", "-c", launcher, str(status_w), opts.limits(timeout),
                "/bin/bash", *bash_args]
        if plan.drop_to_nobody:
            argv = [*_setpriv_argv(), *argv]
        # The limits are set before bwrap starts, so every process of the sandbox inherits them.
        argv = [plan.prlimit, *opts.prlimit_argv(timeout), "--", *argv]
        if plan.cgroup_parent is not None:
            cgroup = SandboxCgroup.create(plan.cgroup_parent, opts.memory_bytes, opts.max_processes,
                                          opts.cpu_quota)
            # The shell joins the cgroup and then execs the rest, so nothing starts outside it.
            argv = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"', cgroup.procs_file, *argv]
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=plan.env, cwd=plan.cwd, pass_fds=pass_fds, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            raise SandboxUnavailableError(f"operational-value sandbox unavailable: {exc}") from exc
        # Our copies of the child's ends go now, so EOF arrives when the child is done with them.
        for fd in opened[1:]:
            if fd != info_r:
                os.close(fd)
        opened = [status_r]
        if info_r is not None:
            info = _InfoReader(info_r)  # it closes info_r
            info.start()
        outcome = _supervise(proc, opts, input_data, timeout, info, cgroup, count_inodes=plan.unshare is None)
        outcome.status = _read_status(status_r)
        if cgroup is not None and cgroup.oom_killed():
            outcome.memory_exceeded = True
        return outcome
    finally:
        for fd in opened:
            os.close(fd)
        if cgroup is not None:
            cgroup.remove()
        if tmp_dir is not None:
            with contextlib.suppress(OSError):
                os.rmdir(tmp_dir)  # empty on the host: the tmpfs was mounted in the sandbox's namespace only


def _supervise(proc: subprocess.Popen[bytes], opts: SandboxOptions, input_data: bytes, timeout: int,
               info: _InfoReader | None, cgroup: SandboxCgroup | None, count_inodes: bool = False) -> _Outcome:
    overflow = threading.Event()
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    readers = [_Capped(proc.stdout, opts.max_output_bytes, overflow),
               _Capped(proc.stderr, opts.max_output_bytes, overflow)]
    writer = threading.Thread(target=_feed, args=(proc.stdin, input_data), daemon=True)
    exited = threading.Event()
    # Wait without reaping, so the process group id cannot be reused before we kill it.

    def wait_exit() -> None:
        try:
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        finally:
            exited.set()

    waiter = threading.Thread(target=wait_exit, daemon=True)
    for t in (*readers, writer, waiter):
        t.start()

    def kill_group() -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # Without a cgroup, the sandbox's total memory is watched from here; without a /tmp capped in
    # inodes by the kernel (bwrap's own tmpfs), its inodes too.
    watch_memory = info is not None and cgroup is None
    count_inodes = count_inodes and info is not None
    deadline = time.monotonic() + timeout / 1000
    timed_out = memory_exceeded = inodes_exceeded = False
    watch_error: OSError | None = None
    denied_since: float | None = None
    while not exited.wait(min(opts.watch_interval_s, max(deadline - time.monotonic(), 0))):
        if overflow.is_set():
            kill_group()
        elif time.monotonic() >= deadline:
            timed_out = True
            kill_group()
            exited.wait()
            break
        elif (watch_memory or count_inodes) and info is not None and info.data:
            child = _child_pid(info.data)  # None until bwrap has written the whole document
            used = None
            try:
                if count_inodes and child is not None and (sandbox_tmp_inodes(child) or 0) > opts.tmp_inodes:
                    inodes_exceeded = True
                    kill_group()
                    exited.wait()
                    break
                used = sandbox_memory(child) if child is not None and watch_memory else None
                denied_since = None
            except PermissionError as exc:
                # Transient while bwrap sets up; a sandbox that stays unreadable does not go on.
                now = time.monotonic()
                denied_since = denied_since if denied_since is not None else now
                if now - denied_since >= _WATCH_DENIED_S:
                    watch_error = exc
            except OSError as exc:  # fail closed: a sandbox we cannot watch does not go on
                watch_error = exc
            if watch_error is not None or (used is not None and used > opts.memory_bytes):
                memory_exceeded = watch_error is None
                kill_group()
                exited.wait()
                break
    kill_group()  # stragglers of an unsandboxed run; the PID namespace already took sandboxed ones
    returncode = proc.wait()
    for t in readers:
        t.join(5)
    writer.join(1)
    if watch_error is not None:
        raise SandboxUnavailableError(
            f"operational-value sandbox unavailable: cannot watch the sandbox's memory: {watch_error}"
        )
    return _Outcome(bytes(readers[0].data), bytes(readers[1].data), [], returncode,
                    timed_out, overflow.is_set(), memory_exceeded, inodes_exceeded)


def _interpret(outcome: _Outcome, operation: str, timeout: int, opts: SandboxOptions, sandboxed: bool) -> bytes:
    limit = opts.max_output_bytes
    if outcome.timed_out:
        raise OperationalValueError(f"{operation} timed out after {timeout}ms")
    if outcome.memory_exceeded:
        raise OperationalValueError(f"{operation} exceeded the {opts.memory_bytes}-byte memory limit")
    if outcome.inodes_exceeded:
        raise OperationalValueError(f"{operation} made more than {opts.tmp_inodes} files and folders in /tmp")
    if outcome.overflow:
        raise OperationalValueError(f"{operation} output exceeded the {limit}-byte limit")
    stderr = js_trim(outcome.stderr.decode("utf-8", "replace"))
    if "started" not in outcome.status:
        where = "operational-value sandbox unavailable" if sandboxed else f"{operation} could not start"
        raise SandboxUnavailableError(f"{where}: {stderr or f'exit status {outcome.returncode}'}")
    if len(outcome.status) >= 3:
        kind, number = outcome.status[1], int(outcome.status[2])
    elif outcome.returncode < 0:  # the launcher itself was killed before it could report
        kind, number = "signal", -outcome.returncode
    else:
        kind, number = "exit", outcome.returncode
    if kind == "signal":
        raise OperationalValueError(f"{operation} was terminated by signal {_signal_name(number)}")
    if number != 0:
        raise OperationalValueError(stderr or f"{operation} exited with status {number}")
    return outcome.stdout


def run_evaluator(content: bytes, request: bytes, options: SandboxOptions | None = None) -> str:
    """``bash -n`` then ``bash <evaluator>`` with ``request`` on stdin; returns stdout as text.

    Raises :class:`OperationalValueError` with the §10 messages, or
    :class:`SandboxUnavailableError` when no sandbox can be made.
    """
    opts = options or SandboxOptions()
    tempdir = tempfile.mkdtemp(prefix="operational-value-grader-")  # mode 0700
    try:
        path = os.path.join(tempdir, EVALUATOR_NAME)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)

        def execute(args: list[str], data: bytes, operation: str, timeout: int) -> bytes:
            with open(path, "rb") as evaluator:
                plan = _plan(opts, tempdir)
                target = SANDBOX_EVALUATOR if plan.sandboxed else path
                bash_args = [target if a == EVALUATOR_NAME else a for a in args]
                outcome = _spawn(plan, opts, bash_args, data, timeout, evaluator.fileno())
            return _interpret(outcome, operation, timeout, opts, plan.sandboxed)

        try:
            execute(["-n", EVALUATOR_NAME], b"", SYNTAX_OPERATION, opts.syntax_timeout)
        except SandboxUnavailableError:
            raise
        except OperationalValueError as exc:
            raise OperationalValueError(f"operational-value evaluator has invalid Bash syntax: {exc}") from exc
        stdout = execute([EVALUATOR_NAME], request, RUN_OPERATION, opts.evaluator_timeout)
        return stdout.decode("utf-8", "replace")
    finally:
        shutil.rmtree(tempdir, ignore_errors=True)
