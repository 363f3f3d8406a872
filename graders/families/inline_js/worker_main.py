"""The inline-grader worker process, child side: evaluates scripts in fresh isolates until stdin closes.

Run as ``python -m graders.families.inline_js.worker_main SETTINGS``; ``worker.WorkerClient`` is the
parent side and the module docstring of ``worker`` says why V8 runs in its own process.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from graders.families.inline_js.sandbox import (
    EXTERNAL_LIMIT_BYTES,
    HEAP_LIMIT_BYTES,
    JsGraderError,
    JsSandbox,
)
from graders.families.inline_js.worker import FIXED_ENV, PAYLOAD_SLACK_BYTES, read_message, write_message


def data_bytes() -> int:
    """This process's writable private memory (``VmData``), what ``RLIMIT_DATA`` bounds."""
    with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
        for line in fh:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    raise OSError("no VmData in /proc/self/status")


def cap_data(settings: dict[str, Any]) -> int:
    """Set ``RLIMIT_DATA`` to the current use plus the V8 heap, external and payload budgets."""
    import resource

    baseline = data_bytes()
    limit = (baseline + int(settings.get("heap_limit_bytes", HEAP_LIMIT_BYTES))
             + int(settings.get("external_limit_bytes", EXTERNAL_LIMIT_BYTES)) + PAYLOAD_SLACK_BYTES)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return baseline


def serve(settings: dict[str, Any]) -> None:
    """Child side: evaluate requests in fresh isolates until stdin closes."""
    os.environ.update(FIXED_ENV)  # before V8 and ICU start, whoever spawned us

    out = sys.stdout.buffer
    sandbox = JsSandbox(isolation="inprocess", **settings)
    reason = sandbox.unavailable_reason
    baseline = 0
    if reason is None:
        try:
            baseline = cap_data(settings)
        except (OSError, ValueError) as exc:  # fail closed: no V8 without the memory cap
            reason = f"cannot cap the script worker's memory: {exc}"
    write_message(out, json.dumps({"ok": reason is None, "error": reason}))
    if reason is not None:
        return
    recycle_at = baseline + int(settings.get("heap_limit_bytes", HEAP_LIMIT_BYTES)) // 2
    fd = sys.stdin.buffer.fileno()
    while True:
        try:
            request = json.loads(read_message(fd, None))
        except EOFError:
            return
        try:  # "compile": a syntax check before any run (no data, nothing called)
            text = (sandbox.compile_text(request["compile"]) if "compile" in request
                    else sandbox.evaluate_text(request["script"], request["payload"]))
        except JsGraderError as exc:
            text = json.dumps({"ok": False, "error": exc.js_message})
        write_message(out, text)
        recycle = data_bytes() > recycle_at  # retained memory would eat the next evaluation's budget
        write_message(out, json.dumps({"recycle": recycle}))
        if recycle:
            return


if __name__ == "__main__":
    serve(json.loads(sys.argv[1]))
