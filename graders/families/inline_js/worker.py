"""The inline-grader worker process: V8 runs outside the pipeline worker, as gh-aw runs node.

Some scripts bring V8 down with a fatal error that no in-process handler can catch (for example
``new Array(3e8).fill(1.5)``: "Fatal JavaScript out of memory: invalid table size"), and a few
builtins ignore termination for many seconds. So ``JsSandbox`` keeps one long-lived helper process
(``python -m graders.families.inline_js.worker_main``, the child side) that evaluates scripts, each in a fresh isolate, and talks over
pipes with length-prefixed JSON. The parent enforces a hard wall-clock limit; a crashed or stuck
helper is killed and replaced, and only that one evaluation fails.

The helper is also where the limits V8 itself lacks are set:

- ``ArrayBuffer`` backing stores live outside the V8 heap, so the heap limit does not bound them.
  Once V8 is up, the helper caps its own writable data (``RLIMIT_DATA``) at what it uses then plus
  the heap limit, ``external_limit_bytes`` and room for the payload's copies; past it an allocation
  fails (``RangeError: Array buffer allocation failed``) or V8 aborts and the helper is replaced.
  A helper whose retained memory has grown past half the heap limit exits after its reply, so
  the next evaluation starts with the whole budget.
- It runs with a fixed locale and time zone (``LANG``/``LC_ALL`` ``C.UTF-8``, ``TZ`` ``UTC``), never
  the host's: ICU takes V8's default locale from them, and ``toLocaleString``, ``localeCompare``
  and ``Intl`` must give the same answer on every machine (``en-US``).
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import time
from typing import IO, Any, Final

_HEADER: Final = struct.Struct(">Q")
_ENV_KEYS: Final = ("PATH", "HOME", "TMPDIR", "TEMP", "TMP")
FIXED_ENV: Final = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC"}
PAYLOAD_SLACK_BYTES: Final = 384 * 1024 * 1024  # the request, the payload text and its copy for V8


class WorkerDied(RuntimeError):
    """The helper process crashed, was killed, or broke the protocol."""


def write_message(stream: IO[bytes], text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    chunks: list[bytes] = []
    while size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float | None) -> str:
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size, deadline))
    return _read_exact(fd, size, deadline).decode("utf-8", "surrogatepass")


class WorkerClient:
    """Parent side: start the helper lazily, send one request, wait with a hard deadline."""

    def __init__(self, settings: dict[str, Any], reply_timeout_ms: int, timeout_message: str) -> None:
        self.settings = settings
        self.reply_timeout_ms = reply_timeout_ms
        self.timeout_message = timeout_message
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr: IO[bytes] | None = None
        self.restarts = 0

    def start(self) -> str | None:
        """Start the helper; the reason inline graders cannot run, or None."""
        self.stderr = tempfile.TemporaryFile()
        env = {k: os.environ[k] for k in _ENV_KEYS if k in os.environ}
        env.update(FIXED_ENV)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "graders.families.inline_js.worker_main", json.dumps(self.settings)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env)
            assert self.proc.stdout is not None
            hello = json.loads(read_message(self.proc.stdout.fileno(), time.monotonic() + 60))
        except (OSError, EOFError, TimeoutError, ValueError) as exc:
            reason = self._stderr_tail() or f"{type(exc).__name__}: {exc}"
            self.close()
            return f"cannot start the script worker: {reason}"
        if hello.get("ok") is not True:
            self.close()
            return str(hello.get("error") or "script worker refused to start")
        return None

    def run(self, request: dict[str, Any], retry: bool = True) -> str:
        if self.proc is None or self.proc.poll() is not None:
            self.close()
            self.restarts += 1
            reason = self.start()
            if reason is not None:
                raise WorkerDied(reason)
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        try:
            write_message(proc.stdin, json.dumps(request))
        except BrokenPipeError:
            self.close()  # it died between evaluations: nothing was lost, start over once
            if retry:
                return self.run(request, retry=False)
            raise WorkerDied("script worker crashed (broken pipe)") from None
        try:
            deadline = time.monotonic() + self.reply_timeout_ms / 1000
            reply = read_message(proc.stdout.fileno(), deadline)
            # Then whether the helper is leaving (its retained memory grew): if so, let it go now,
            # so the next request goes to a new helper and never into a closing pipe.
            status = json.loads(read_message(proc.stdout.fileno(), deadline))
            if not isinstance(status, dict):
                raise ValueError("bad status frame")
            if status.get("recycle") is True:
                self.close()
            return reply
        except TimeoutError:
            self.close()  # stuck inside V8 past every limit: kill it, the next run gets a new one
            raise WorkerDied(self.timeout_message) from None
        except (EOFError, OSError, ValueError):
            proc.kill()
            proc.wait()
            tail = self._stderr_tail()
            self.close()
            status = proc.returncode
            raise WorkerDied(f"script worker crashed ({tail or f'exit status {status}'})") from None

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        self.stderr.seek(0)
        lines = [ln.strip() for ln in self.stderr.read()[-65536:].decode("utf-8", "replace").splitlines()]
        # V8's fatal errors read "# Fatal JavaScript out of memory: …"; prefer that line.
        fatal = [ln.lstrip("# ") for ln in lines if ln.startswith("# Fatal")]
        useful = [ln for ln in lines if ln and not ln.startswith(("#", "/", "[", "<", "=="))]
        return (fatal or useful or [""])[-1]

    def __del__(self) -> None:
        # Best effort: the helper also exits by itself when its stdin closes with the parent.
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
        if self.stderr is not None:
            self.stderr.close()
            self.stderr = None
