// The reference baseline of `make bench` (bench/reference.py): gh-aw's own preprocessing, its
// 10 built-in graders and its 22 trajectory graders, run warm over many runs in one Node process.
//
// Usage: node reference_driver.js <dir holding trace_graders.cjs and trajectory_graders.cjs>
// stdin, one JSON document per line:
//   {"runs": ["/abs/run/folder", ...]}      set the runs (answered with {"ok": true, "shims": [...]})
//   {"pass": true}                          grade every run once; answered with {"ms": [per-run ms]}
//   {"one": i}                              grade run i once; answered with {"ms": its ms}
//   {"results": "/abs/run/folder"}          the normalized results of one run (checks, not timing)
// No gh-aw code lives in this repository: the modules are loaded from the checkout given.
"use strict";

const fs = require("fs");
const path = require("path");
const Module = require("module");
const readline = require("readline");

const dir = path.resolve(process.argv[2] || "");
const ROOT = "/tmp/gh-aw"; // gh-aw reads its run's files under this fixed folder

// The step runs under actions/github-script, which provides a global `core`; only logging and
// the step summary are used by the functions called here.
const quiet = () => {};
global.core = {
  info: quiet, warning: quiet, error: quiet, debug: quiet, notice: quiet, setFailed: quiet,
  summary: { addDetails: () => global.core.summary, addRaw: () => global.core.summary, write: async () => {} },
};

// Helper modules the graders require. A full checkout has them; when one is absent (a partial
// copy), a small stand-in with the behaviour graders.md specifies is used, and reported.
const SHIMS = {
  "error_helpers.cjs": { getErrorMessage: err => (err instanceof Error ? err.message : String(err)) },
  "experiment_helpers.cjs": { readExperimentAssignments: () => null },
  "operational_value_grader.cjs": {
    executeOperationalValueEvaluator: () => {
      throw new Error("operational-value grading is not part of the benchmark");
    },
  },
  "run_created_at.cjs": { normalizeRunCreatedAt: value => (typeof value === "string" ? value : "") },
  "tool_call_details.cjs": {
    // graders.md §5: the first of these that is an object (arrays count) or a non-blank string.
    extractStructuredToolInput: data => {
      for (const key of ["input", "arguments", "parameters", "args", "toolInput"]) {
        const value = data[key];
        if (value !== null && typeof value === "object") return value;
        if (typeof value === "string" && value.trim() !== "") return value;
      }
      return undefined;
    },
  },
  "working_set_metrics.cjs": {
    // graders.md §6: safe non-negative integer input_tokens only, BigInt sum and peak.
    calculateWorkingSetFromEntries: entries => {
      let sum = 0n;
      let peak = 0n;
      for (const entry of entries) {
        const value = entry === null || typeof entry !== "object" ? undefined : entry.input_tokens;
        if (!Number.isSafeInteger(value) || value < 0) continue;
        const big = BigInt(value);
        sum += big;
        if (big > peak) peak = big;
      }
      if (peak === 0n) return { workingSet: { rebuild_factor: null } };
      const factor = Number(sum) / Number(peak);
      return { workingSet: { rebuild_factor: Number.isFinite(factor) ? Math.max(1, factor) : 1 } };
    },
  },
};
const shimmed = [];
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const name = path.basename(request);
  if (Object.hasOwn(SHIMS, name) && request.startsWith("./") && !fs.existsSync(path.join(dir, name))) {
    if (!shimmed.includes(name)) shimmed.push(name);
    return SHIMS[name];
  }
  return load.call(this, request, parent, isMain);
};

// Each run's files are read where gh-aw would read them: /tmp/gh-aw/<rel> becomes <run>/<rel>.
let runRoot = "";
const redirect = p => (typeof p === "string" && (p === ROOT || p.startsWith(ROOT + "/")) ? runRoot + p.slice(ROOT.length) : p);
for (const fn of ["existsSync", "statSync", "readFileSync", "readdirSync"]) {
  const original = fs[fn];
  fs[fn] = (p, ...rest) => original.call(fs, redirect(p), ...rest);
}

const traceGraders = require(path.join(dir, "trace_graders.cjs"));
const trajectory = require(path.join(dir, "trajectory_graders.cjs"));
const { preprocessTrace, runBuiltinGrader, normalizeResult, BUILTIN_META, BUILTIN_GRADERS } = traceGraders;
const { TRAJECTORY_GRADERS, TRAJECTORY_GRADER_META } = trajectory;

const builtins = Object.keys(BUILTIN_GRADERS).map(id => [id, { name: id, source: "builtin", ...BUILTIN_META[id] }]);
const trajectories = Object.keys(TRAJECTORY_GRADERS).map(id => [id, { source: "builtin", ...TRAJECTORY_GRADER_META[id] }]);

// One run, as the step does it: one preprocessing pass, then every grader on the trace.
function gradeRun(folder) {
  runRoot = folder;
  let trace;
  try {
    trace = preprocessTrace();
  } catch (err) {
    return [{ error: `preprocessing failed: ${err && err.message}` }]; // e.g. a `null` JSONL line
  }
  const results = [];
  for (const [id, meta] of builtins) results.push(runBuiltinGrader(id, trace, meta));
  for (const [id, meta] of trajectories) {
    let raw;
    try {
      raw = TRAJECTORY_GRADERS[id](trace, {});
    } catch (err) {
      raw = null;
    }
    results.push(normalizeResult(id, raw, meta));
  }
  return results;
}

let runs = [];
let sink = 0; // keeps the results observable so that no work can be skipped
const rl = readline.createInterface({ input: process.stdin });
rl.on("line", line => {
  const msg = JSON.parse(line);
  let reply;
  if (msg.runs) {
    runs = msg.runs;
    reply = { ok: true, graders: builtins.length + trajectories.length, shims: shimmed };
  } else if (msg.pass) {
    const ms = new Array(runs.length);
    for (let i = 0; i < runs.length; i += 1) {
      const start = process.hrtime.bigint();
      sink += JSON.stringify(gradeRun(runs[i])).length; // the step serializes its results document too
      ms[i] = Number(process.hrtime.bigint() - start) / 1e6;
    }
    reply = { ms, sink, shims: shimmed };
  } else if (Number.isInteger(msg.one) && msg.one >= 0 && msg.one < runs.length) {
    // One run, timed alone: the bench interleaves it with fleetgrade's time on the same run.
    const start = process.hrtime.bigint();
    sink += JSON.stringify(gradeRun(runs[msg.one])).length;
    reply = { ms: Number(process.hrtime.bigint() - start) / 1e6, sink };
  } else if (msg.results) {
    reply = { results: gradeRun(msg.results) };
  } else {
    reply = { error: "unknown command" };
  }
  process.stdout.write(JSON.stringify(reply) + "\n");
});
