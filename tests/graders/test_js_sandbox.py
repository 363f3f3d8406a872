"""Inline JavaScript graders in embedded V8: the gh-aw worker contract, limits and isolation."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from graders.families.inline_js import sandbox as js_sandbox
from graders.families.inline_js.sandbox import JsGraderError, JsSandbox
from graders.grading.engine import grade_one, grade_trace
from graders.grading.plan import GradingPlan, PlanEntry
from graders.grading.registry import GraderContext
from graders.jsrt.jsonio import parse_json

TRACE: dict[str, Any] = {
    "toolCalls": [{"name": f"tool-{i % 7}", "arguments": {"i": i}, "success": i % 5 != 0} for i in range(200)],
    "artifacts": [],
    "totalRequests": 3,
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[JsSandbox]:
    # Short limits keep the hostile battery fast; the defaults are checked separately.
    with JsSandbox(timeout_ms=300, heap_limit_bytes=64 * 1024 * 1024) as sb:
        if sb.unavailable_reason:
            pytest.skip(f"V8 unavailable: {sb.unavailable_reason}")
        yield sb


@pytest.fixture(scope="module")
def local() -> Iterator[JsSandbox]:
    """V8 in this process (what the helper process runs)."""
    with JsSandbox(timeout_ms=300, heap_limit_bytes=64 * 1024 * 1024, isolation="inprocess") as sb:
        if sb.unavailable_reason:
            pytest.skip(f"V8 unavailable: {sb.unavailable_reason}")
        yield sb


def _entry(script: str, **kw: Any) -> PlanEntry:
    script = script.strip()
    return PlanEntry(id="my-metric", name="My Metric", source="inline", script=script,
                     digest=hashlib.sha256(script.encode()).hexdigest(), **kw)


def grade(sb: JsSandbox, script: str, config: Any = None, **kw: Any) -> dict[str, Any]:
    ctx = GraderContext(config=config if config is not None else {}, grader_count=1)
    return grade_one(_entry(script, **kw), TRACE, ctx, {"inline": sb})


def test_defaults_match_gh_aw() -> None:
    sb = JsSandbox()
    assert (sb.timeout_ms, sb.worker_timeout_ms, sb.max_result_bytes) == (5000, 6000, 1024 * 1024)


def test_a_grader_sees_the_trace_config_helpers_and_run(sandbox: JsSandbox) -> None:
    script = """
      const ok = trace.toolCalls.filter(c => c.success).length;
      return { value: helpers.ratio(ok, trace.toolCalls.length), details: `k=${config.k}`,
               diagnostics: { clamp: helpers.clamp(5, 0, 1), sum: helpers.sum([1, 2, 3]), zero: helpers.ratio(1, 0) } };
    """
    result = grade(sandbox, script, config={"k": 7}, threshold=0.9, direction="higher_is_better", unit="ratio")
    assert result["value"] == 0.8 and result["status"] == "fail" and result["passed"] is False
    assert result["details"] == "k=7" and result["diagnostics"] == {"clamp": 1, "sum": 6, "zero": 0}
    assert result["implementation"]["digest"] == _entry(script).digest
    assert result["source"] == "inline" and result["unit"] == "ratio"


def test_grader_count_is_run_grader_count(sandbox: JsSandbox) -> None:
    entries = tuple(PlanEntry(id=f"g{i}", name="", source="inline", script="return run.graderCount") for i in range(3))
    results = grade_trace(TRACE, GradingPlan(entries), {"inline": sandbox})
    assert [r["value"] for r in results] == [3, 3, 3]


def test_environment_is_pure(sandbox: JsSandbox) -> None:
    names = ["Date", "require", "fetch", "process", "global", "globalThis", "Function", "eval", "WebAssembly",
             "SharedArrayBuffer", "Atomics", "setTimeout", "Temporal"]
    script = "return { value: 1, details: [" + ", ".join(f"typeof {n}" for n in names) + "].join(',') }"
    assert grade(sandbox, script)["details"] == ",".join(["undefined"] * len(names))
    assert grade(sandbox, "return typeof Math.random + ',' + typeof Math.max")["error"].endswith("undefined,function")
    assert grade(sandbox, "return this === undefined ? 1 : 0")["value"] == 1


def test_inputs_are_frozen_json(sandbox: JsSandbox) -> None:
    result = grade(sandbox, "trace.toolCalls.push(1); return 1")
    assert result["error"] == "grader my-metric runtime error: Cannot add property 200, object is not extensible"
    assert grade(sandbox, "return Object.isFrozen(config) && Object.isFrozen(trace.toolCalls[0]) ? 1 : 0")["value"] == 1


# -- normalization effects of the JSON round trip (docs/reference/graders.md §9) --------------------------------


@pytest.mark.parametrize(("script", "status", "field", "text"), [
    ("const x = 1;", "unavailable", "message", "grader returned null/undefined"),
    ("return null", "unavailable", "message", "grader returned null/undefined"),
    ("return { value: NaN }", "unavailable", "message", "grader returned no value"),
    ("return { value: Infinity, message: 'mine' }", "unavailable", "message", "mine"),
    ("return 'abc'", "error", "error", "grader my-metric returned non-finite value: abc"),
    ("return [1, 2]", "error", "error", "grader my-metric returned non-finite value: 1,2"),
    ("return true", "error", "error", "grader my-metric returned non-finite value: true"),
    ("return 1 / 0", "error", "error", "grader my-metric runtime error: custom grader returned non-finite numeric value"),
    ("return NaN", "error", "error", "grader my-metric runtime error: custom grader returned non-finite numeric value"),
    ("return Promise.resolve(1)", "unavailable", "message", "grader returned no value"),
    ("return 10n", "error", "error", "grader my-metric runtime error: Do not know how to serialize a BigInt"),
    ("throw 'boom'", "error", "error", "grader my-metric runtime error: boom"),
    ("throw new RangeError('nope')", "error", "error", "grader my-metric runtime error: nope"),
    ("throw new Error('')", "error", "error", "grader my-metric runtime error: "),
    ("throw undefined", "error", "error", "grader my-metric runtime error: undefined"),
])
def test_json_round_trip_normalization(sandbox: JsSandbox, script: str, status: str, field: str, text: str) -> None:
    result = grade(sandbox, script)
    assert result["status"] == status
    assert result[field] == text


def test_script_unit_is_ignored_and_object_fields_survive(sandbox: JsSandbox) -> None:
    script = ("return { value: 2, unit: 'ms', passed: true, severity: 'warning', message: 'm', "
              "metrics: [{ id: 'a', value: 2 }], toJSONIgnored: undefined }")
    result = grade(sandbox, script, unit="count")
    assert result["unit"] == "count" and result["passed"] is True and result["status"] == "pass"
    assert result["severity"] == "warning" and result["metrics"] == [{"id": "a", "value": 2}]


def test_syntax_errors_are_runtime_errors(sandbox: JsSandbox) -> None:
    assert grade(sandbox, "return x y")["error"] == "grader my-metric runtime error: Unexpected identifier 'y'"


# -- hostile scripts: each one is a clear error, and the next evaluation grades normally ----------

HOSTILE: list[tuple[str, str]] = [
    ("while (true) {}", "Script execution timed out after 300ms"),
    ("const f = n => f(n + 1) + 1; return f(0)", "Maximum call stack size exceeded"),
    ("const a = []; while (true) a.push(new Array(1e6).fill(1.5))", "JavaScript heap out of memory (limit 64 MiB)"),
    ("return new ArrayBuffer(2 ** 40).byteLength", "Invalid array buffer length"),
    ("return 'x'.repeat(2 ** 30)", "Invalid string length"),
    ("let s = 'ab'; while (true) s = s + s; return s.length", "Invalid string length"),
    ("return (() => {}).constructor.constructor('return this')()",
     "Code generation from strings disallowed for this context"),
    ("return [].constructor.constructor('return 1')()", "Code generation from strings disallowed for this context"),
    ("return (async () => {}).constructor('return 1')", "Code generation from strings disallowed for this context"),
    ("return new WebAssembly.Module(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]))", "WebAssembly is not defined"),
    ("return Atomics.wait(new Int32Array(4), 0, 0, 10000)", "Atomics is not defined"),
    ("return new SharedArrayBuffer(8).byteLength", "SharedArrayBuffer is not defined"),
    ("Promise.resolve().then(() => { while (true) {} }); return 5", "script worker timed out after 1300ms"),
    ("return require('fs')", "require is not defined"),
    ("return globalThis.process.env", "Cannot read properties of undefined (reading 'process')"),
    ("return Date.now()", "Date is not defined"),
    ("return __fg.load('{}')", ""),  # the host hooks are not reachable as a side channel: see below
    ("return 'x'.repeat(2 * 1024 * 1024)", "grader result exceeds the 1048576-byte limit"),
    ("return { value: 1, details: 'é'.repeat(600000) }", "grader result exceeds the 1048576-byte limit"),
    ("const o = {}; o.self = o; return o", "Converting circular structure to JSON"),
    ("return { value: 1, toJSON() { while (true) {} } }", "Script execution timed out after 300ms"),
    ("throw { toString() { throw new Error('nested') } }", "nested"),
    ("return 1 }); let leaked = 1; (function () {", "missing ) after argument list"),
]


@pytest.mark.parametrize(("script", "message"), HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_scripts_fail_cleanly_and_the_next_run_is_normal(sandbox: JsSandbox, script: str,
                                                                 message: str) -> None:
    result = grade(sandbox, script)
    if script.startswith("return __fg"):
        # Reaching the loader only reloads this run's own payload; it is gone with the isolate.
        assert result["status"] in ("pass", "error", "unavailable")
    else:
        assert result["status"] == "error", result
        assert result["error"].startswith("grader my-metric runtime error: ")
        assert message in result["error"]
        assert result["message"] == "grader returned null/undefined"  # gh-aw's cosmetic artefact (§14.8)
    after = grade(sandbox, "return trace.toolCalls.length + (typeof leaked === 'undefined' ? 0 : 1000)")
    assert (after["status"], after["value"]) == ("pass", 200)


def test_prototype_pollution_does_not_cross_runs(sandbox: JsSandbox) -> None:
    polluted = grade(sandbox, "Object.prototype.x = 1; Array.prototype.y = 2; return ({}).x + [].y")
    assert polluted["value"] == 3  # allowed inside the run, as in a gh-aw vm context
    clean = grade(sandbox, "return ({}).x === undefined && [].y === undefined ? 1 : 0")
    assert clean["value"] == 1


def test_isolates_are_replaced_after_limits(local: JsSandbox) -> None:
    before = local.isolates_killed
    assert grade(local, "while (true) {}")["error"].endswith("Script execution timed out after 300ms")
    assert local.isolates_killed == before + 1
    assert grade(local, "return 2")["value"] == 2


def test_in_process_mode_grades_the_same(local: JsSandbox) -> None:
    for script, _ in HOSTILE[:3]:
        assert grade(local, script)["status"] == "error"
    assert grade(local, "return { value: run.graderCount + trace.toolCalls.length }")["value"] == 201


def test_a_v8_that_ignores_termination_is_killed(sandbox: JsSandbox) -> None:
    # Array.prototype.fill on a huge dictionary-mode array does not check for termination; in
    # process it would hold the caller for many seconds or abort the process (V8 fatal OOM).
    result = grade(sandbox, "return new Array(1e8).fill(0).length")
    assert result["status"] == "error" and "timed out after" in result["error"]
    assert grade(sandbox, "return 3")["value"] == 3


def test_a_crashed_helper_is_replaced(sandbox: JsSandbox) -> None:
    import os
    import signal
    import threading

    client = sandbox._client
    assert client is not None and client.proc is not None
    os.kill(client.proc.pid, signal.SIGKILL)  # dies while idle: the next run restarts it
    client.proc.wait()
    assert grade(sandbox, "return 4")["value"] == 4
    pid = client.proc.pid
    threading.Timer(0.15, os.kill, (pid, signal.SIGKILL)).start()
    slow = JsSandbox.evaluate  # a run in flight when the helper dies
    with pytest.raises(JsGraderError, match=r"script worker crashed \(exit status -9\)"):
        slow(sandbox, "const t = 1; for (;;) {}", TRACE)
    assert grade(sandbox, "return 5")["value"] == 5


def test_fail_closed_when_the_helper_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    sb = JsSandbox()
    result = grade(sb, "return 1")
    assert result["status"] == "error"
    assert result["error"].startswith("grader my-metric runtime error: inline JavaScript sandbox unavailable: "
                                      "cannot start the script worker: ")
    sb.close()


def test_fail_closed_when_v8_cannot_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(js_sandbox, "_init_v8", lambda: "LibNotFoundError: no native library")
    sb = JsSandbox(isolation="inprocess")
    with pytest.raises(JsGraderError, match="inline JavaScript sandbox unavailable"):
        sb.evaluate("return 1", TRACE)
    result = grade(sb, "return 1")
    assert result["status"] == "error"
    assert result["error"] == ("grader my-metric runtime error: inline JavaScript sandbox unavailable: "
                               "LibNotFoundError: no native library")


def test_payload_json_follows_json_stringify() -> None:
    text = js_sandbox.payload_json({"a": float("nan"), "b": [float("inf")]}, None, 2)
    assert text == '{"trace":{"a":null,"b":[null]},"run":{"graderCount":2},"workflow":{},"config":{}}'
    # What orjson refuses (lone surrogates, integers past 64 bits, nesting past 255 levels) is
    # JSON.stringify's text too, written without recursion, lone surrogates escaped for UTF-8.
    odd = js_sandbox.payload_json({"s": "\ud800", "n": float("nan"), "big": 2**70}, {"k": 1}, 1)
    assert odd == ('{"trace":{"s":"\\ud800","n":null,"big":1.1805916207174113e+21},"run":{"graderCount":1},'
                   '"workflow":{},"config":{"k":1}}')
    deep = "[" * 1100 + "1" + "]" * 1100
    nested: list[Any] = [1]
    for _ in range(1099):
        nested = [nested]
    text = js_sandbox.payload_json({"a": parse_json("[" * 1000 + "1" + "]" * 1000), "b": nested}, None, 1)
    assert text == '{"trace":{"a":' + "[" * 1000 + "1" + "]" * 1000 + ',"b":' + deep + '},"run":{"graderCount":1},' \
        '"workflow":{},"config":{}}'
    text.encode("utf-8")


def test_a_configured_plan_grades_end_to_end(sandbox: JsSandbox, tmp_path: Any) -> None:
    from graders.grading.config import load_graders

    wf = tmp_path / "wf.md"
    wf.write_text("---\ngraders:\n  tool-success-rate: {threshold: 0.9}\n  calls-per-request:\n"
                  "    script: |\n      return { value: helpers.ratio(trace.toolCalls.length, trace.totalRequests) }\n"
                  "    unit: calls\n    direction: lower_is_better\n    threshold: 100\n---\n# wf\n")
    plan = load_graders(wf)
    trace = {**TRACE, "retryEvents": [], "tokenUsageEntries": [], "totalDurationMs": 0}
    results = {r["id"]: r for r in grade_trace(trace, plan, {"inline": sandbox})}
    assert len(results) == 11
    custom = results["calls-per-request"]
    assert (custom["value"], custom["status"], custom["unit"], custom["source"]) == (200 / 3, "pass", "calls", "inline")
    assert custom["implementation"]["digest"] == plan.entries[-1].digest
    assert results["tool-success-rate"]["status"] == "fail"  # 0.8 < 0.9


def test_sandbox_pickles_and_runs_in_threads(sandbox: JsSandbox) -> None:
    import pickle
    from concurrent.futures import ThreadPoolExecutor

    clone = pickle.loads(pickle.dumps(JsSandbox(timeout_ms=1234)))
    assert clone.timeout_ms == 1234
    sandboxes = [pickle.loads(pickle.dumps(clone)) for _ in range(4)]

    def work(sb: JsSandbox) -> list[Any]:
        return [sb.evaluate("return trace.toolCalls.length + run.graderCount", TRACE, {}, i) for i in range(5)]

    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(work, sandboxes))
    assert outs == [[200, 201, 202, 203, 204]] * 4


def test_no_isolate_or_thread_outlives_an_evaluation(local: JsSandbox) -> None:
    import threading

    from py_mini_racer._context import context_count  # a test hook of mini-racer

    threads = threading.active_count()
    contexts = context_count()  # other tests in this process may hold their own context
    for _ in range(20):
        local.evaluate("return 1", TRACE)
    grade(local, "while (true) {}")
    assert context_count() == contexts
    assert threading.active_count() <= threads
