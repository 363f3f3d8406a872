"""Custom inline JavaScript graders in embedded V8 (docs/reference/graders.md §9), via mini-racer.

gh-aw runs each inline grader in a ``node:vm`` context inside a fresh ``node`` worker process. Here
the same contract runs in-process: the script is compiled as a function body with ``"use strict"``
and the parameters ``(trace, run, workflow, config, helpers, Math)``; the data it sees is JSON
round-tripped and deep-frozen; ``Date``, ``eval``, ``Function``, wasm, shared memory and timers are
gone and string code generation is disabled by a V8 flag; the call has a 5 s time limit and a heap
limit; the result is serialized to JSON inside V8 and capped at 1 MiB. The helper process (below)
also caps the memory outside the heap (``ArrayBuffer`` backing stores) and runs with a fixed
locale and time zone, so ``toLocaleString`` and ``Intl`` answer alike on every machine.

Isolation: mini-racer binds one V8 context to one isolate and offers no way to create a second
context in an isolate (ShadowRealm is "Not supported" without embedder hooks). So every evaluation
gets a fresh isolate (about 10 ms), and nothing (prototype pollution, script-scope bindings, queued
promise jobs, a half-exhausted heap) can survive into the next run. By default V8 runs in one
long-lived helper process per sandbox (``graders.families.inline_js.worker``), because a few scripts abort V8 with a
fatal error or keep a builtin running past termination; the helper is then killed and replaced and
only that evaluation fails. ``setup()`` starts it (and V8, once, with its flags).

If V8 cannot start, every inline grader fails closed with an error result; there is no unsandboxed
fallback.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import Any, Final, Literal

import orjson

from graders.families.inline_js.bootstrap import BOOTSTRAP_JS
from graders.families.inline_js.worker import WorkerClient, WorkerDied
from graders.grading.plan import PlanEntry
from graders.grading.registry import GraderContext, executor
from graders.jsrt.jscompat import UNDEFINED, js_stringify
from graders.jsrt.jsonio import JsonError, parse_json
from graders.jsrt.lazylist import LazyList

V8_FLAGS: Final = ("--single-threaded", "--disallow-code-generation-from-strings")
SCRIPT_TIMEOUT_MS: Final = 5000
BOOTSTRAP_TIMEOUT_MS: Final = 1000
WORKER_OVERHEAD_MS: Final = 1000  # gh-aw spawns its worker with 5000 + 1000 ms; promise jobs get the rest
HEAP_LIMIT_BYTES: Final = 512 * 1024 * 1024  # room for a 50 MiB trace parsed into objects
# ArrayBuffer backing stores live outside the heap; the helper process caps them (js_worker).
EXTERNAL_LIMIT_BYTES: Final = 512 * 1024 * 1024
MAX_RESULT_BYTES: Final = 1024 * 1024
PARAMS: Final = "trace, run, workflow, config, helpers, Math"
_ERROR_LINE: Final = re.compile(r"^(?:[A-Za-z]*Error|Uncaught [A-Za-z]*Error): (.*)$", re.M)


_TIMEOUTS: Final = ("Script execution timed out after ", "script worker timed out after ")


class JsGraderError(RuntimeError):
    """A failed evaluation; the engine reports it as ``grader <id> runtime error: <message>``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.js_message = message  # kept verbatim, even when empty (``throw new Error("")``)
        # A time limit fired (gh-aw's texts, also when the helper process reports it): the
        # engine's TimeoutBreaker counts these.
        self.timed_out = message.startswith(_TIMEOUTS)


def _is_limit(exc: BaseException | None) -> bool:
    """A time or heap limit fired: the isolate was terminated mid-task."""
    if exc is None:
        return False
    from py_mini_racer import JSOOMException, JSTimeoutException

    return isinstance(exc, (JSTimeoutException, JSOOMException))


def _quiet_late_callbacks(previous: Any) -> Any:
    """A task terminated by a limit reports back after its isolate is closed; mini-racer's ctypes
    callback then fails with "Event loop is closed". Drop exactly that, pass everything else on."""

    def hook(unraisable: Any) -> None:
        exc = unraisable.exc_value
        obj = getattr(unraisable, "object", None)
        if (isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed"
                and "mr_callback" in getattr(obj, "__qualname__", "")):
            return
        previous(unraisable)

    return hook


_init_lock = threading.Lock()
_init_state: dict[str, str | None] = {}


def _init_v8() -> str | None:
    """Initialize V8 once per process with our flags; the reason it cannot run, or None."""
    with _init_lock:
        if "error" in _init_state:
            return _init_state["error"]
        error: str | None = None
        try:
            from py_mini_racer import LibAlreadyInitializedError, MiniRacer, init_mini_racer

            sys.unraisablehook = _quiet_late_callbacks(sys.unraisablehook)
            try:
                init_mini_racer(flags=V8_FLAGS)
            except LibAlreadyInitializedError:
                pass  # someone else started V8 first: the probe below checks the flags took effect
            with MiniRacer() as probe:
                verdict = probe.eval('(() => { try { [].constructor.constructor("return 1")(); return "open"; }'
                                     ' catch (e) { return "closed"; } })()', timeout_sec=2)
            if verdict != "closed":
                error = ("V8 was initialized without --disallow-code-generation-from-strings "
                         "(mini-racer was started by another component first)")
        except Exception as exc:  # no wheel, no native library, V8 refuses to start
            error = f"{type(exc).__name__}: {exc}"
        _init_state["error"] = error
        return error


def _js_default(value: Any) -> Any:
    if value is UNDEFINED:
        return None
    if isinstance(value, LazyList):
        return value.materialize()
    raise TypeError(f"not JSON data: {type(value).__name__}")


def payload_json(trace: Any, config: Any, grader_count: int) -> str:
    """The worker payload as JSON.stringify would write it (NaN/Infinity become null)."""
    payload = {"trace": trace if trace else {}, "run": {"graderCount": int(grader_count or 0)},
               "workflow": {}, "config": config if config else {}}
    try:
        return orjson.dumps(payload, default=_js_default).decode("utf-8")
    except (TypeError, orjson.JSONEncodeError):
        # Nested deeper than orjson writes (255 levels; a trace holds what was read, up to
        # jsonio.MAX_DEPTH), or lone surrogates: JSON.stringify's text, written without
        # recursion, with lone surrogates escaped (UTF-8 cannot carry them to V8).
        text = js_stringify(payload) or "{}"
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _js_error_message(exc: BaseException) -> str:
    """``err.message`` out of mini-racer's "<anonymous>:L: TypeError: msg\\n<source>…" text."""
    text = str(exc)
    found = _ERROR_LINE.findall(text)
    if found:
        return str(found[-1]).strip()
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


_PARSE_LINE: Final = re.compile(r"^<anonymous>:(\d+): ")


def _syntax_error(exc: BaseException, script: str) -> str:
    """``SyntaxError: <message> (line N of the script)`` from mini-racer's parse error text."""
    text = str(exc)
    found = re.search(r"^(?:<anonymous>:\d+: )?(SyntaxError: .*)$", text, re.M)
    message = found.group(1).strip() if found else _js_error_message(exc)
    line = _PARSE_LINE.match(text)
    if line is None:
        return message
    n = int(line.group(1)) - 1  # the wrapper adds one line before the script
    return f"{message} (line {n})" if 1 <= n <= script.count("\n") + 1 else f"{message} (at the end)"


class JsSandbox:
    """The inline-grader executor ``(entry, trace, ctx) -> raw``; one per worker process."""

    def __init__(self, timeout_ms: int = SCRIPT_TIMEOUT_MS, heap_limit_bytes: int = HEAP_LIMIT_BYTES,
                 max_result_bytes: int = MAX_RESULT_BYTES,
                 isolation: Literal["process", "inprocess"] = "process",
                 external_limit_bytes: int = EXTERNAL_LIMIT_BYTES) -> None:
        self.timeout_ms = timeout_ms
        self.heap_limit_bytes = heap_limit_bytes
        self.external_limit_bytes = external_limit_bytes
        self.max_result_bytes = max_result_bytes
        self.worker_timeout_ms = timeout_ms + WORKER_OVERHEAD_MS
        # "process": V8 runs in a helper process that can be killed (the default; see js_worker);
        # "inprocess": V8 runs here (what the helper itself uses).
        self.isolation = isolation
        self._client: Any = None
        self._unavailable: str | None = None
        self._ready = False
        self._lock = threading.Lock()
        self.evaluations = 0
        self.isolates_killed = 0  # timeouts, heap exhaustion, runaway promise jobs

    def __getstate__(self) -> dict[str, Any]:
        # Beam pickles DoFns with their executors: ship the settings, not the lock or V8 state.
        state = dict(self.__dict__)
        state.pop("_lock", None)
        state.update(_ready=False, _unavailable=None, _client=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("external_limit_bytes", EXTERNAL_LIMIT_BYTES)
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------------

    def setup(self) -> None:
        """Start V8 (in the helper process, or here once per process) and check it is sandboxed;
        idempotent."""
        if self._ready:
            return
        if self.isolation == "process":

            settings = {"timeout_ms": self.timeout_ms, "heap_limit_bytes": self.heap_limit_bytes,
                        "max_result_bytes": self.max_result_bytes,
                        "external_limit_bytes": self.external_limit_bytes}
            # The helper enforces every limit itself; this deadline only catches a V8 that ignores
            # termination or dies, plus the isolate start-up.
            self._client = WorkerClient(settings, self.worker_timeout_ms + 2000,
                                        f"script worker timed out after {self.worker_timeout_ms}ms")
            self._unavailable = self._client.start()
        else:
            self._unavailable = _init_v8()
        self._ready = True

    @property
    def unavailable_reason(self) -> str | None:
        self.setup()
        return self._unavailable

    def close(self) -> None:
        """Stop the helper process (DoFn teardown); isolates never outlive an evaluation."""
        client, self._client = self._client, None
        self._ready = False
        if client is not None:
            client.close()

    def __enter__(self) -> JsSandbox:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _new_isolate(self) -> Any:
        from py_mini_racer import MiniRacer

        mr = MiniRacer()
        try:
            mr.set_hard_memory_limit(self.heap_limit_bytes)
            mr.eval(BOOTSTRAP_JS, timeout_sec=BOOTSTRAP_TIMEOUT_MS / 1000)
        except BaseException:
            mr.close()
            raise
        return mr

    def _dispose(self, mr: Any, killed: bool) -> None:
        if killed:
            self.isolates_killed += 1
        mr.close()

    # -- evaluation ------------------------------------------------------------------------------

    def __call__(self, entry: PlanEntry, trace: dict[str, Any], ctx: GraderContext) -> Any:
        return self.evaluate(entry.script, trace, ctx.config, ctx.grader_count)

    def evaluate(self, script: str, trace: Any, config: Any = None, grader_count: int = 0) -> Any:
        """The grader's raw result (JSON data, or UNDEFINED); raises JsGraderError on failure."""
        self.setup()
        if self._unavailable is not None:
            raise JsGraderError(f"inline JavaScript sandbox unavailable: {self._unavailable}")
        payload = payload_json(trace, config, grader_count)
        with self._lock:  # one evaluation at a time per sandbox
            self.evaluations += 1
            if self._client is not None:
                try:
                    text = self._client.run({"script": script, "payload": payload})
                except WorkerDied as exc:
                    self.isolates_killed += 1
                    raise JsGraderError(str(exc)) from exc
            else:
                text = self.evaluate_text(script, payload)
        return self._decode(text)

    def syntax_error(self, script: str) -> str | None:
        """V8's SyntaxError for ``script`` compiled as a grader function (never called), or None.

        Checked once per configuration before any run, in the same sandbox as the evaluations.
        """
        self.setup()
        if self._unavailable is not None:
            raise JsGraderError(f"inline JavaScript sandbox unavailable: {self._unavailable}")
        with self._lock:
            if self._client is not None:
                try:
                    text = self._client.run({"compile": script})
                except WorkerDied as exc:
                    raise JsGraderError(str(exc)) from exc
            else:
                text = self.compile_text(script)
        parsed = parse_json(text)
        if not isinstance(parsed, dict) or parsed.get("syntax") is not True:
            return None  # compiled, or the check itself could not run: each evaluation reports that
        error = parsed.get("error")
        return error if isinstance(error, str) else "SyntaxError"

    def compile_text(self, script: str) -> str:
        """Compile here, in a fresh isolate: ``{"ok": true}`` or ``{"ok": false, "syntax": true, "error": …}``.

        The wrapper is the one ``_run`` calls, only defined, so the body is parsed (V8 reports
        every early error) and never run; only a parse failure is reported.
        """
        from py_mini_racer import JSParseException

        try:
            mr = self._new_isolate()
        except Exception as exc:
            raise JsGraderError(f"cannot start a V8 isolate: {_js_error_message(exc)}") from exc
        try:
            mr.eval(f'(function ({PARAMS}) {{"use strict";\n{script}\n}}); 0',
                    timeout_sec=BOOTSTRAP_TIMEOUT_MS / 1000)
        except JSParseException as exc:
            return json.dumps({"ok": False, "syntax": True, "error": _syntax_error(exc, script)})
        except Exception:  # not a syntax error: the evaluation reports whatever it is, per run
            pass
        finally:
            mr.close()
        return json.dumps({"ok": True})

    def evaluate_text(self, script: str, payload: str) -> str:
        """One evaluation here, in a fresh isolate: gh-aw's worker output text ``{ok, value|error}``."""
        try:
            mr = self._new_isolate()
        except Exception as exc:  # V8 refused a new isolate (e.g. out of memory): fail closed
            raise JsGraderError(f"cannot start a V8 isolate: {_js_error_message(exc)}") from exc
        killed = True
        try:
            out = self._run(mr, script, payload)
            killed = False
            return out
        except JsGraderError as exc:
            killed = _is_limit(exc.__cause__)
            raise
        finally:
            self._dispose(mr, killed)  # never reused: the next run starts from a fresh isolate

    def _run(self, mr: Any, script: str, payload: str) -> str:
        from py_mini_racer import JSOOMException, JSParseException, JSTimeoutException

        started = time.monotonic()
        try:
            mr.eval(f"__fg.load({json.dumps(payload)})", timeout_sec=BOOTSTRAP_TIMEOUT_MS / 1000)
        except JSTimeoutException as exc:
            raise JsGraderError(f"Script execution timed out after {BOOTSTRAP_TIMEOUT_MS}ms") from exc
        except JSOOMException as exc:
            raise JsGraderError(self._oom_message()) from exc
        source = (f'__fg.invoke((function ({PARAMS}) {{"use strict";\n{script}\n}}), '
                  f"{self.max_result_bytes})")
        try:
            out = mr.eval(source, timeout_sec=self.timeout_ms / 1000)
        except JSTimeoutException as exc:
            raise JsGraderError(f"Script execution timed out after {self.timeout_ms}ms") from exc
        except JSOOMException as exc:
            raise JsGraderError(self._oom_message()) from exc
        except JSParseException as exc:
            raise JsGraderError(_js_error_message(exc)) from exc
        except Exception as exc:  # JSEvalException and friends: something threw past the wrapper
            raise JsGraderError(_js_error_message(exc)) from exc
        self._drain_jobs(mr, started)
        if not isinstance(out, str):
            raise JsGraderError("script worker returned an error")
        return out

    def _drain_jobs(self, mr: Any, started: float) -> None:
        """Promise jobs queued by the script run after the call returns; give them the rest of the
        worker budget, like gh-aw's worker process, then give up on the run."""
        from py_mini_racer import JSOOMException, JSTimeoutException

        remaining = max(0.05, self.worker_timeout_ms / 1000 - (time.monotonic() - started))
        try:
            mr.eval("0", timeout_sec=remaining)
        except JSTimeoutException as exc:
            raise JsGraderError(f"script worker timed out after {self.worker_timeout_ms}ms") from exc
        except JSOOMException as exc:
            raise JsGraderError(self._oom_message()) from exc

    def _decode(self, out: str) -> Any:
        if len(out.encode("utf-8", "surrogatepass")) > self.max_result_bytes:
            raise JsGraderError(f"grader result exceeds the {self.max_result_bytes}-byte limit")
        try:
            parsed = parse_json(out)
        except JsonError as exc:
            raise JsGraderError(f"invalid script worker output: {exc}") from exc
        if not isinstance(parsed, dict) or parsed.get("ok") is not True:
            error = parsed.get("error") if isinstance(parsed, dict) else None
            raise JsGraderError(error if isinstance(error, str) else "script worker returned an error")
        return parsed.get("value", UNDEFINED)

    def _oom_message(self) -> str:
        return f"JavaScript heap out of memory (limit {self.heap_limit_bytes // (1024 * 1024)} MiB)"


@executor("inline")
def inline_executor(allow_unsandboxed: bool = False) -> JsSandbox:
    """The inline family's sandbox, one per worker. V8 is the sandbox: there is no unsandboxed
    way to run a script, so ``allow_unsandboxed`` changes nothing here."""
    return JsSandbox()
