"""The in-sandbox launcher: apply resource limits, run Bash, report how it ended.

bubblewrap turns a child killed by signal S into exit status 128+S, which would make a killed
evaluator indistinguishable from one that ran ``exit 137``. This launcher is the sandbox's first
process (PID 1 of its namespace, ``bwrap --as-pid-1``); it forks, limits and execs Bash, reaps
every orphan, then writes ``exit N`` or ``signal S`` to a status fd. When it returns, the kernel
kills whatever is left in the namespace. It is passed to the interpreter with ``-I -S -c``, so it
must stay standard-library only.

The limits are set before bubblewrap starts, so they bind this process too; the launcher checks
that they did and refuses to start the evaluator otherwise (the sandbox fails closed). The
process count is the exception: the launcher sets it on itself, inside the sandbox's user
namespace, where it counts this sandbox's processes and not every sandbox's of the host. It makes itself
non-dumpable so that the evaluator, running as the same user, cannot open ``/proc/1/mem`` and
forge the status it reports; the seccomp filter denies ``ptrace`` to every process inside.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

_LIMITS = {
    "cpu": resource.RLIMIT_CPU,
    "as": resource.RLIMIT_AS,
    "nproc": resource.RLIMIT_NPROC,
    "fsize": resource.RLIMIT_FSIZE,
    "nofile": resource.RLIMIT_NOFILE,
}
_PR_SET_DUMPABLE = 4


def _check_limits(spec: str) -> None:
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        if name == "nproc":
            # Set here, inside the user namespace, so it counts this sandbox's processes only.
            resource.setrlimit(_LIMITS[name], (int(value), int(value)))
            continue
        soft, hard = resource.getrlimit(_LIMITS[name])
        if resource.RLIM_INFINITY in (soft, hard) or max(soft, hard) > int(value):
            raise RuntimeError(f"the {name} limit was not set before the sandbox started")


def _not_dumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def main(argv: list[str]) -> int:
    """``<status fd> <limits> <program> [args…]``."""
    status_fd = int(argv[0])
    try:
        _not_dumpable()
        _check_limits(argv[1])
    except (OSError, RuntimeError) as exc:
        os.write(2, f"operational-value launcher: {exc}\n".encode())
        return 126
    # As PID 1 the launcher only gets the signals it handles: ignore the one Python handles.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.write(status_fd, b"started\n")
    pid = os.fork()
    if pid == 0:
        try:
            # Only stdin, stdout and stderr reach Bash (not the status pipe or the evaluator copy fd).
            os.closerange(3, 1 << 16)
            # The interpreter ignores SIGPIPE and SIGXFSZ (and we SIGINT), and exec keeps ignored
            # signals ignored: restore the defaults Bash scripts expect (`yes | head`, the file-size limit).
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                signal.signal(sig, signal.SIG_DFL)
            # The interpreter's C-locale coercion (PEP 538) adds LC_CTYPE; the evaluator gets
            # exactly the whitelisted environment the sandbox was given.
            env = {k: v for k, v in os.environ.items() if k != "LC_CTYPE"}
            os.execve(argv[2], argv[2:], env)
        except BaseException as exc:
            os.write(2, f"operational-value launcher: {exc}\n".encode())
        os._exit(127)
    while True:  # reap orphans too: zombies would count against the process limit
        reaped, status = os.waitpid(-1, 0)
        if reaped == pid:
            break
    if os.WIFSIGNALED(status):
        os.write(status_fd, f"signal {os.WTERMSIG(status)}\n".encode())
    else:
        os.write(status_fd, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
