"""Ctrl-C ends a command with one line, ``fleetgrade <command>: interrupted``, and exit 130.

Beam runs DoFns under its own handlers: a KeyboardInterrupt raised inside one comes back as
``RuntimeError: KeyboardInterrupt [while running '…']``, after Beam has logged the traceback,
and the worker processes of ``direct-multiprocess`` (the whole foreground process group gets the
signal) print theirs. So the command's SIGINT handler records the interrupt before it raises,
and from then on nothing but the final line reaches the terminal: logging is switched off and
standard error goes nowhere. For pipeline commands, standard error is a pipe from the start,
relayed to the terminal by a thread until the interrupt: the processes the job starts inherit
the pipe, so their output after an interrupt is dropped too.

Whatever the command raises or returns after an interrupt, its status is 130; the cleanups on
the way out (the output's lock released, the job's staging removed) run as for any failure.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

T = TypeVar("T")
INTERRUPTED_EXIT = 130  # 128 + SIGINT, what a shell reports for a job stopped by Ctrl-C


class Interrupts:
    """Around one command: SIGINT raises KeyboardInterrupt and marks the command interrupted;
    ``relay`` makes standard error a pipe that is relayed until then (pipeline commands)."""

    def __init__(self, relay: bool = False) -> None:
        self.relay = relay
        self.caught = False
        self._terminal: int | None = None  # the real standard error, while fd 2 is replaced
        self._previous: object = None
        self._thread: threading.Thread | None = None
        self._installed = False

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
            if self.relay:
                self._start_relay()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
        if self._terminal is not None and not self.caught:
            _flush()
            os.dup2(self._terminal, 2)  # the pipe's write end closes: the relay reads to its end
            if self._thread is not None:
                self._thread.join(timeout=2)
            if self._thread is None or not self._thread.is_alive():  # else a child still writes: it owns the fd
                os.close(self._terminal)
            self._terminal = None

    # -- the signal --------------------------------------------------------------------------

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if not self.caught:
            self.caught = True
            self._mute()
        raise KeyboardInterrupt

    def _mute(self) -> None:
        logging.disable(logging.CRITICAL)
        try:
            if self._terminal is None:
                self._terminal = os.dup(2)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 2)
            os.close(devnull)
        except OSError:  # no standard error to replace: there is nothing to silence either
            pass

    def say(self, line: str) -> None:
        """The one line, on the real standard error (the replaced one stays muted until exit)."""
        _flush()
        target = self._terminal if self._terminal is not None else 2
        try:
            os.write(target, (line + "\n").encode("utf-8", "replace"))
        except OSError:
            pass

    # -- the relay ---------------------------------------------------------------------------

    def _start_relay(self) -> None:
        try:
            fd = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # captured by a test harness: nothing to relay
            return
        if fd != 2:
            return
        _flush()
        read_end, write_end = os.pipe()
        self._terminal = os.dup(2)
        os.dup2(write_end, 2)
        os.close(write_end)
        self._thread = threading.Thread(target=self._forward, args=(read_end, self._terminal),
                                        name="fleetgrade-stderr", daemon=True)
        self._thread.start()

    def _forward(self, read_end: int, terminal: int) -> None:
        try:
            while chunk := os.read(read_end, 65536):
                if not self.caught:
                    os.write(terminal, chunk)
        except OSError:
            pass
        finally:
            os.close(read_end)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def interruptible(cancel: Callable[[], object], work: Callable[[], T]) -> T:
    """``work()`` in a thread, so that Ctrl-C reaches this one while native code runs there (a
    DuckDB query holds the main thread until it ends): on an interrupt ``cancel()`` stops it."""
    box: dict[str, Any] = {}
    # Not Thread.join: interrupted, it marks a running thread as stopped (CPython bpo-45274).
    done = threading.Event()

    def target() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # handed to the caller, as if raised here
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="fleetgrade-work", daemon=True).start()
    try:
        while not done.wait(0.1):
            pass
    except KeyboardInterrupt:
        for _ in range(100):  # again until it stops: the work may not have reached its query yet
            cancel()
            if done.wait(0.1):
                break
        raise
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
