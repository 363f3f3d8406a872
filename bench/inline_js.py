"""Inline JavaScript graders: embedded V8 (helper process, fresh isolate per evaluation) against gh-aw's way,
one ``node`` worker process per evaluation, on a trace with 200 tool calls.

The node worker below follows gh-aw's trace_graders_worker.cjs contract (vm context without code
generation, frozen JSON inputs, function-body compile, 5 s timeout); it is ours, written for the
comparison. The node row is skipped when ``node`` is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from graders.families.inline_js.sandbox import JsSandbox, payload_json

SCRIPT = """
const calls = trace.toolCalls;
const ok = calls.filter(c => c.success !== false).length;
const names = new Set(calls.map(c => c.name));
return { value: helpers.ratio(ok, calls.length), details: `distinct=${names.size}`, passed: ok / calls.length >= (config.min || 0) };
"""

NODE_WORKER = r"""
const vm = require("vm");
let raw = "";
process.stdin.setEncoding("utf-8");
process.stdin.on("data", c => { raw += c; });
process.stdin.on("end", () => {
  const p = JSON.parse(raw);
  const ctx = vm.createContext(Object.assign(Object.create(null), { __payload: JSON.stringify(p.data) }),
                               { codeGeneration: { strings: false, wasm: false } });
  vm.runInContext(`(() => { const d = JSON.parse(__payload); const f = v => { Object.freeze(v);
      for (const k of Object.getOwnPropertyNames(v)) { const x = v[k]; if (x && typeof x === "object") f(x); }
      return v; }; for (const [k, v] of Object.entries(d)) globalThis[k] = f(v);
      globalThis.helpers = Object.freeze({ ratio: (a, b) => (b === 0 ? 0 : a / b) }); })()`, ctx, { timeout: 1000 });
  const fn = vm.compileFunction(`"use strict";\n${p.script}`,
                                ["trace", "run", "workflow", "config", "helpers", "Math"], { parsingContext: ctx });
  ctx.__grader = fn;
  process.stdout.write(vm.runInContext(
    "JSON.stringify({ ok: true, value: __grader(trace, run, workflow, config, helpers, Math) })", ctx,
    { timeout: 5000 }));
});
"""


def make_trace(n_calls: int = 200) -> dict[str, Any]:
    return {
        "toolCalls": [{"name": f"tool-{i % 11}", "tool": f"tool-{i % 11}", "arguments": {"path": f"src/f{i}.py", "i": i},
                       "success": i % 9 != 0, "completed": True} for i in range(n_calls)],
        "artifacts": [], "retryEvents": [], "totalRequests": n_calls // 4,
    }


def _rate(fn: Any, n: int) -> float:
    fn()  # warm-up
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return n / (time.perf_counter() - started)


def _node_rate(node: str, trace: dict[str, Any], n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        worker = os.path.join(tmp, "worker.cjs")
        with open(worker, "w") as fh:
            fh.write(NODE_WORKER)
        payload = json.dumps({"script": SCRIPT, "data": json.loads(payload_json(trace, {"min": 0.5}, 1))})

        def once() -> None:
            out = subprocess.run([node, worker], input=payload, capture_output=True, text=True, timeout=10,
                                 check=True)
            assert json.loads(out.stdout)["ok"] is True

        return _rate(once, n)


def run(quick: bool) -> list[dict[str, Any]]:
    trace = make_trace()
    n_v8, n_node = (40, 10) if quick else (400, 60)
    rows: list[dict[str, Any]] = []
    with JsSandbox() as sandbox:
        if sandbox.unavailable_reason:
            return [{"part": "inline_js", "name": f"V8 unavailable: {sandbox.unavailable_reason}", "value": 0.0,
                     "unit": "", "baseline": None, "ratio": None}]
        v8 = _rate(lambda: sandbox.evaluate(SCRIPT, trace, {"min": 0.5}, 1), n_v8)
    rows.append({"part": "inline_js", "name": "inline grader evals/s, V8 helper, fresh isolate (200 calls)", "value": v8,
                 "unit": "evals/s", "baseline": None, "ratio": None})
    rows.append({"part": "inline_js", "name": "inline grader latency, V8 helper, fresh isolate", "value": 1000 / v8,
                 "unit": "ms", "baseline": None, "ratio": None})
    node = shutil.which("node")
    if node:
        rate = _node_rate(node, trace, n_node)
        rows.append({"part": "inline_js", "name": "inline grader evals/s, node process per eval (gh-aw)",
                     "value": rate, "unit": "evals/s", "baseline": None, "ratio": None})
        rows[0]["baseline"] = rate
        rows[0]["ratio"] = v8 / rate
    return rows
