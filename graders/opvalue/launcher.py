"""The in-sandbox launcher: apply resource limits, run Bash, report how it ended.

bubblewrap turns a child killed by signal S into exit status 128+S, which would make a killed
evaluator indistinguishable from one that ran ``exit 137``. This launcher is the sandbox's first
process; it forks, limits and execs Bash, then writes ``exit N`` or ``signal S`` to a status fd.
It is passed to the interpreter with ``-I -S -c``, so it must stay standard-library only.
"""

from __future__ import annotations

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


def _apply_limits(spec: str) -> None:
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        limit = int(value)
        resource.setrlimit(_LIMITS[name], (limit, limit))


def main(argv: list[str]) -> int:
    """``<status fd> <limits> <program> [args…]``."""
    status_fd = int(argv[0])
    os.write(status_fd, b"started\n")
    pid = os.fork()
    if pid == 0:
        try:
            # Only stdin, stdout and stderr reach Bash (not the status pipe or the evaluator copy fd).
            os.closerange(3, 1 << 16)
            # The interpreter ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals ignored:
            # restore the defaults Bash scripts expect (`yes | head`, the file-size limit).
            for sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            # Limits apply to Bash and everything it starts, not to the launcher itself.
            _apply_limits(argv[1])
            # The interpreter's C-locale coercion (PEP 538) adds LC_CTYPE; the evaluator gets
            # exactly the whitelisted environment the sandbox was given.
            env = {k: v for k, v in os.environ.items() if k != "LC_CTYPE"}
            os.execve(argv[2], argv[2:], env)
        except BaseException as exc:
            os.write(2, f"operational-value launcher: {exc}\n".encode())
        os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        os.write(status_fd, f"signal {os.WTERMSIG(status)}\n".encode())
    else:
        os.write(status_fd, f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
