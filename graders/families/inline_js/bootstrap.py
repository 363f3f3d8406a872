"""The JavaScript that runs first in every fresh isolate of ``graders.families.inline_js.sandbox``.

It mirrors gh-aw's trace_graders_worker.cjs bootstrap (frozen JSON globals, helpers, a Math copy
without random), then removes what a pure, deterministic grader must not reach: clocks, randomness,
wasm, shared memory and timers. Kept as a string so it ships inside the Python package.
"""

from typing import Final

BOOTSTRAP_JS: Final = r"""
(() => {
  "use strict";
  const root = globalThis;
  for (const name of ["Date", "Temporal", "WebAssembly", "SharedArrayBuffer", "Atomics", "eval", "Function",
                      "fetch", "require", "process", "global"]) {
    delete root[name];
  }
  // mini-racer's timer shim uses `var` (non-configurable): disarm instead of delete.
  for (const name of ["setTimeout", "clearTimeout", "__timer_manager"]) {
    if (name in root) root[name] = undefined;
  }
  delete Math.random;
  if (typeof Intl === "object") delete Intl.DateTimeFormat;  // its format() reads the clock

  const deepFreeze = value => {
    if (value === null || typeof value !== "object") return value;
    Object.freeze(value);
    for (const key of Object.getOwnPropertyNames(value)) {
      const v = value[key];
      if (v !== null && typeof v === "object" && !Object.isFrozen(v)) deepFreeze(v);
    }
    return value;
  };
  const m = {};
  const descriptors = Object.getOwnPropertyDescriptors(Math);
  for (const key of Object.keys(descriptors)) Object.defineProperty(m, key, descriptors[key]);
  Object.defineProperty(m, "random", { value: undefined, writable: false, enumerable: true, configurable: false });
  const safeMath = Object.freeze(m);
  const helpers = Object.freeze({
    clamp: (v, lo, hi) => safeMath.max(lo, safeMath.min(hi, v)),
    ratio: (num, den) => (den === 0 ? 0 : num / den),
    sum: arr => arr.reduce((a, b) => a + b, 0),
  });
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const ErrorCtor = Error;
  let data = null;

  // Called by the host with the payload JSON (a string), before the grader is compiled.
  const load = payloadJson => {
    data = deepFreeze(parse(payloadJson));
    return true;
  };
  // Called by the host with the compiled grader; returns the JSON text of {ok, value|error}.
  const invoke = (grader, maxChars) => {
    let out;
    try {
      if (typeof grader !== "function") throw new ErrorCtor("grader script did not compile to a function");
      const value = grader(data.trace, data.run, data.workflow, data.config, helpers, safeMath);
      if (typeof value === "number" && !Number.isFinite(value)) {
        throw new ErrorCtor("custom grader returned non-finite numeric value");
      }
      out = stringify({ ok: true, value });
    } catch (err) {
      out = stringify({ ok: false, error: err instanceof ErrorCtor ? err.message : String(err) });
    }
    if (out.length > maxChars) {
      return stringify({ ok: false, error: `grader result exceeds the ${maxChars}-byte limit` });
    }
    return out;
  };
  Object.defineProperty(root, "__fg", { value: Object.freeze({ load, invoke }), writable: false,
                                        enumerable: false, configurable: false });
  Object.defineProperty(root, "globalThis", { value: undefined, writable: false, enumerable: false,
                                              configurable: false });
})();
true
"""
