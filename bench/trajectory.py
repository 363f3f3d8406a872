"""Trajectory graders on synthetic IRs: all 22 graders on a 5,000-item and a 200-item IR.

Rows time each grader (best CPU time of a few runs, after one warm-up call inside the best-of
loop) and, for the graders whose reference algorithm is
quadratic in Python (RQA DET/LAM/TT, LZ76, nDTW), compare with a plain transcription of
that algorithm (``tests/graders/trajectory/naive.py``) as the baseline. The naive baselines
are skipped at 5,000 items in quick mode (they take seconds each there). ``ratio`` is
baseline / ours, i.e. the speed-up.
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from typing import Any

from graders.families.trajectory.ir import event_symbols, state_visits
from graders.grading import registry
from graders.grading.registry import GraderContext

TRAJECTORY_IDS = registry.grader_ids("trajectory")

SKILL_CONFIG = {"constraints": [
    {"id": "tests", "pattern": r"make (test|lint)"},
    {"id": "edits", "pattern": r"^edit_file src/"},
    {"id": "digits", "pattern": r"\d+"},
    {"id": "unicode", "pattern": "écrire"},
]}


def synthetic_ir(n: int, seed: int = 7) -> dict[str, Any]:
    """An IR whose every collection has ``n`` items, with realistic repetition in states/events."""
    rng = random.Random(seed)
    state_ids = [f"s{rng.randrange(max(2, n // 20))}" for _ in range(n)]
    for i in range(1, n):  # dwell: agents often stay in a state for a few steps
        if rng.random() < 0.3:
            state_ids[i] = state_ids[i - 1]
    tools = ["view", "grep", "edit_file", "bash", "create_issue", "search"]
    kinds = ["tool_call", "observation", "state_change", "message"]
    events = []
    for i in range(n):
        kind = kinds[rng.randrange(4)]
        ref = tools[rng.randrange(6)] if kind == "tool_call" else state_ids[i] if kind == "state_change" else f"r{i}"
        events.append({"index": i, "kind": kind, "timestamp": f"t{i}", "ref": ref})
    events[-1] = {"index": n - 1, "kind": "safe_output", "ref": "out0"}
    tool_calls = [
        {"id": f"t{i}", "eventIndex": i, "name": tools[i % 6], "arguments": {"path": f"src/f{i % 50}.py", "n": i % 7},
         "success": rng.random() > 0.1, "durationMs": 5, "outputRef": f"o{i}"}
        for i in range(n)
    ]
    return {
        "runId": "bench",
        "events": events,
        "states": [{"id": s, "label": s, "firstEventIndex": i} for i, s in enumerate(state_ids)],
        "actions": [{"id": f"a{i}", "eventIndex": i, "type": "edit", "target": f"src/f{i % 50}.py",
                     "validAtIssueTime": rng.random() > 0.05, "consequential": i % 3 == 0} for i in range(n)],
        "toolCalls": tool_calls,
        "observations": [{"id": f"o{i}", "eventIndex": i, "sourceToolCallId": f"t{i}",
                          "consumedByActionIds": [f"a{i}"] if i % 2 else []} for i in range(n)],
        "resources": [{"id": f"r{i}", "kind": "file", "uri": f"./src/f{i}.py"} for i in range(n)],
        "provenanceEdges": [{"from": f"a{i - 1}" if i % 10 else f"t{i}", "to": f"a{i}", "relation": "informed"}
                            for i in range(n)],
        "objectives": [{"id": f"g{i}", "description": "verify policy" if i % 4 == 0 else "do work",
                        "satisfiedAtEventIndex": i if i % 5 else None, "dependsOn": [f"g{i - 1}"] if i else []}
                       for i in range(n)],
        "reference": {
            "toolCalls": [{"name": c["name"], "arguments": c["arguments"]} for c in tool_calls],
            "states": [s if rng.random() > 0.2 else "other" for s in state_ids],
            "patch": {"files": [{"path": f"src/f{i}.py"} for i in range(n)]},
        },
    }


def _best(fn: Callable[[], Any], repeat: int) -> float:
    """Best CPU time of ``repeat`` runs: "on one core", and robust to a shared, loaded machine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _naive_baselines(ir: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    from tests.graders.trajectory import naive

    states = [v.id for v in state_visits([ir])]
    symbols = event_symbols([ir])
    path = [e["ref"] for e in ir["events"] if e["kind"] == "state_change"]
    return {
        "recurrence-determinism": lambda: naive.rqa_diagonal(states),
        "recurrence-laminarity": lambda: naive.rqa_vertical(states),
        "recurrence-trapping-time": lambda: naive.rqa_vertical(states),
        "lempel-ziv-trajectory-complexity": lambda: naive.lz76(symbols),
        "trajectory-ndtw": lambda: naive.dtw(ir["reference"]["states"], path),
    }


def _row(name: str, seconds: float) -> dict[str, Any]:
    return {"part": "trajectory", "name": name, "value": seconds * 1000, "unit": "cpu ms",
            "baseline": None, "ratio": None}


def run(quick: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in (200, 5000):
        ir = synthetic_ir(n)
        trace: dict[str, Any] = {"toolCalls": [], "agentOutput": None, "trajectoryIR": ir}
        repeat = 2 if quick and n > 200 else 5
        baselines = _naive_baselines(ir) if not (quick and n > 200) else {}
        total = 0.0
        for grader_id in TRAJECTORY_IDS:
            spec = registry.get(grader_id)
            assert spec is not None
            config = SKILL_CONFIG if grader_id == "skill-constraint-coverage" else {}
            ctx = GraderContext(config=config)
            fn = spec.fn
            seconds = _best(functools.partial(fn, trace, ctx), repeat)
            total += seconds
            row = _row(f"{grader_id} n={n}", seconds)
            if grader_id in baselines:
                base = _best(baselines[grader_id], 1)
                row["baseline"] = base * 1000
                row["ratio"] = base / seconds if seconds else None
            rows.append(row)
        rows.append(_row(f"all 22 trajectory graders n={n}", total))
    return rows
