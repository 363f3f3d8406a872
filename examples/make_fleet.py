"""Writes the bundled sample fleet under examples/fleet/ (deterministic; rerun to regenerate).

Three gh-aw workflows with reruns (attempt 2), token usage, MCP gateway logs, Copilot
events.jsonl, agent_output.json safe outputs, embedded Trajectory IR on some runs, and a few
broken runs that must end in the dead letter. Every workflow runs three times a day on the last
three days (DAYS); issue-triage (twice a day) and ci-doctor (once) also ran on the 11 days
before (HISTORY_DAYS), so their regression cells have a baseline. The planted change: from
CHANGE_DATE on, issue-triage's tool calls fail 80% of the time instead of 5%, a regression the
demo's `check` and report find and date. daily-file-diet is new (three days): too little
history to test yet. The history is drawn from its own generator, so the three days' runs are
the same runs with or without it. daily-file-diet runs carry gh-aw's archived
operational-value files (manifest, frozen evaluator, original grader_results.json) for
`fleetgrade regrade`; its first day's runs froze a transitional evaluator that also speaks the
older attainment protocol, and one run in 11 has a tampered evaluator.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "fleet"
WORKFLOWS = {
    "issue-triage": ["github-list_issues", "github-get_issue", "github-search_issues", "view", "bash"],
    "daily-file-diet": ["view", "bash", "edit", "glob", "github-get_file_contents"],
    "ci-doctor": ["bash", "github-get_workflow_run", "github-list_workflow_jobs", "view", "grep"],
}
DAYS = ["2026-11-28", "2026-11-29", "2026-11-30"]
HISTORY_DAYS = [f"2026-11-{d}" for d in range(17, 28)]
HISTORY_WORKFLOWS = {"issue-triage": 2, "ci-doctor": 1}  # runs a day
CHANGE_DATE = "2026-11-26"  # issue-triage's tool calls fail more often from this day on
FAILURE = 0.15  # the chance that a completed tool call failed
FAILURE_BEFORE, FAILURE_AFTER = 0.05, 0.8  # issue-triage's, before and from CHANGE_DATE
HISTORY_SEED = 3  # a draw whose unchanged cells show no false alarm (the test says so)
MODELS = ["gpt-5", "claude-sonnet-4.5"]


def failure_rate(wf: str, day: str) -> float:
    """The planted change: issue-triage's calls fail more often from CHANGE_DATE on."""
    if wf != "issue-triage":
        return FAILURE
    return FAILURE_AFTER if day >= CHANGE_DATE else FAILURE_BEFORE


def dump(path: Path, obj: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def jsonl(path: Path, rows: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def args_for(tool: str, rng: random.Random) -> dict[str, object]:
    if tool in ("view", "edit"):
        return {"path": f"src/module_{rng.randint(1, 6)}.py"}
    if tool == "bash":
        return {"command": rng.choice(["make test", "git status", "ls -la", "pytest -q tests/unit"])}
    if tool in ("glob", "grep"):
        return {"pattern": rng.choice(["**/*.py", "TODO", "def main"])}
    return {"owner": "octo-org", "repo": "widgets", "issue_number": rng.randint(100, 200)}


def trajectory_ir(rng: random.Random, run_id: str) -> dict[str, object]:
    states = ["triage", "read-issue", "search", "read-issue", "label", "comment", "search", "label"]
    n = rng.randint(5, len(states))
    events = []
    for i, s in enumerate(states[:n]):
        events.append({"index": i * 2, "kind": "state_change", "ref": s})
        events.append({"index": i * 2 + 1, "kind": "tool_call", "ref": rng.choice(["view", "search", "label"])})
    events.append({"index": 2 * n, "kind": "safe_output", "ref": "out-1"})
    return {
        "runId": run_id,
        "events": events,
        "states": [{"id": s, "label": s, "firstEventIndex": i * 2} for i, s in enumerate(states[:n])],
        "toolCalls": [{"id": "tc-1", "eventIndex": 1, "name": "view", "arguments": {"path": "README.md"},
                       "success": True, "durationMs": 120, "outputRef": "obs-1"}],
        "observations": [{"id": "obs-1", "eventIndex": 2, "sourceToolCallId": "tc-1",
                          "consumedByActionIds": ["act-1"] if rng.random() < 0.7 else []}],
        "actions": [{"id": "act-1", "eventIndex": 3, "type": "add_labels", "target": "issue#7",
                     "validAtIssueTime": True, "consequential": True}],
        "resources": [{"id": "r1", "kind": "file", "uri": "src/triage.py"}],
        "provenanceEdges": [{"from": "obs-1", "to": "act-1", "relation": "informed"},
                            {"from": "tc-1", "to": "out-1", "relation": "derived-from"}],
        "objectives": [
            {"id": "o1", "description": "verify the issue is not a duplicate", "satisfiedAtEventIndex": 3,
             "dependsOn": []},
            {"id": "o2", "description": "label the issue", "satisfiedAtEventIndex": 5 if rng.random() < 0.8 else None,
             "dependsOn": ["o1"]},
        ],
        "reference": {"toolCalls": [{"name": "view", "arguments": {"path": "README.md"}}],
                      "states": ["triage", "read-issue", "label"],
                      "patch": {"files": [{"path": "src/triage.py"}, "docs/triage.md"]}},
    }


def task_fields(wf: str, run_id: int) -> dict[str, object]:
    """The triggering issue or PR: reruns on one number are one task for pass^k."""
    if wf == "issue-triage":
        return {"issue_number": run_id % 1000}
    if wf == "ci-doctor":
        return {"pull_request_number": 500 + run_id % 3}
    return {}


def write_run(wf: str, day: str, run_id: int, attempt: int, rng: random.Random) -> None:
    root = ROOT / wf / f"run-{run_id}" if attempt == 1 else ROOT / wf / f"run-{run_id}-attempt-{attempt}"
    hour = rng.randint(0, 23)
    dump(root / "aw_info.json", {
        "workflow_name": wf, "run_id": run_id, "run_number": run_id % 1000, "run_attempt": attempt,
        "created_at": f"{day}T{hour:02d}:{rng.randint(0, 59):02d}:00Z", "repository": "octo-org/widgets",
        "engine_id": "copilot", "engine_name": "GitHub Copilot CLI", "model": rng.choice(MODELS),
        "version": "1.0.55", "cli_version": "v0.40.1", "staged": False, "agent_runtime": "node",
        **task_fields(wf, run_id),
    })
    tools = WORKFLOWS[wf]
    failure = failure_rate(wf, day)
    n_calls = rng.randint(3, 14)
    storm = rng.random() < 0.15  # a stretch of identical failing calls: trace-grader's retry_storm
    events: list[object] = [{"type": "session.start", "data": {"sessionId": f"s-{run_id}", "version": 1}}]
    gateway: list[object] = []
    for i in range(n_calls):
        tool = "bash" if storm and 2 <= i < 6 else rng.choice(tools)
        if wf == "ci-doctor" and i == n_calls - 1 and rng.random() < 0.2:
            tool = "github-merge_pull_request"  # forbidden by examples/trace-grader.config.yaml
        call_id = f"call_{run_id}_{i}"
        a = args_for(tool, rng)
        server = "github" if tool.startswith("github-") else None
        start = {"toolCallId": call_id, "toolName": tool, "arguments": a}
        if server:
            start["mcpServerName"] = server
            start["mcpToolName"] = tool.split("-", 1)[1]
        events.append({"type": "tool.execution_start", "data": start, "timestamp": f"{day}T{hour:02d}:00:{i:02d}Z"})
        if rng.random() < 0.93 or (storm and 2 <= i < 6):
            ok = rng.random() > failure and not (storm and 2 <= i < 6)
            done: dict[str, object] = {"toolCallId": call_id, "success": ok}
            if not ok:
                done["error"] = {"message": "command failed", "code": "failure"}
            events.append({"type": "tool.execution_complete", "data": done})
        if server:
            gateway.append({"type": "tool_call", "tool_name": tool.split("-", 1)[1], "server_id": server,
                            "payload": {"arguments": a}})
            gateway.append({"type": "response", "method": "tools/call", "server_id": server, "status": 200})
            if rng.random() < 0.2:
                gateway.append({"level": "warn", "message": "Retrying after 429 rate limit", "retry": True})
    if rng.random() < 0.15:
        gateway.append({"level": "error", "type": "error", "message": "upstream timeout"})
    jsonl(root / "sandbox/agent/logs/copilot-session-state/events.jsonl", events)
    if gateway:
        jsonl(root / "mcp-logs/gateway.jsonl", gateway)
    tokens = []
    context = rng.randint(4000, 9000)
    for _ in range(rng.randint(2, 9)):
        context += rng.randint(500, 4000)
        tokens.append({"model": rng.choice(MODELS), "input_tokens": context,
                       "output_tokens": rng.randint(100, 1500), "duration_ms": rng.randint(800, 9000)})
    jsonl(root / "sandbox/firewall-audit-logs/api-proxy-logs/token-usage.jsonl", tokens)
    items = [{"type": "add_labels", "labels": ["bug"]}] if rng.random() < 0.7 else []
    if rng.random() < 0.5:
        items.append({"type": "add_comment", "body": "Triaged automatically."})
    errors = [{"type": "missing_tool", "message": "no tool to close the issue"}] if rng.random() < 0.15 else []
    output: dict[str, object] = {"items": items, "errors": errors}
    if wf == "issue-triage" and rng.random() < 0.6:
        output["trajectoryIR"] = trajectory_ir(rng, str(run_id))
    dump(root / "agent_output.json", output)
    if wf == "daily-file-diet":
        write_archive(root, str(run_id), attempt, len(items), tampered=run_id % 11 == 0,
                      attainment=day == DAYS[0])
    dump(root / "agent_usage.json", {"input_tokens": sum(t["input_tokens"] for t in tokens),
                                     "output_tokens": sum(t["output_tokens"] for t in tokens)})


# gh-aw archives the frozen operational-value evaluator with each run (docs/reference/graders.md §3-§4).
EVALUATOR = """#!/usr/bin/env bash
# File Diet Decision Conformance: did the run request the right follow-up?
# Metrics (frozen with these bytes):
#   conformance  1 when the run filed at least one label or comment, 0 when it filed nothing
#                but reported an error, null (no evidence) when it did neither.
#   outputs      number of safe outputs the run requested.
set -euo pipefail
request=$(cat)
outputs=$(jq '.outputs | length' <<<"$request")
if [ "$outputs" -gt 0 ]; then
  value=1
elif [ "$(jq '.config.strict // false' <<<"$request")" = "true" ]; then
  value=0
else
  value=null
fi
printf '[{"id":"conformance","value":%s},{"id":"outputs","value":%s}]\n' "$value" "$outputs"
"""


# The first day's runs froze an evaluator from the older design's transition: given an evidence
# time (a regrade) it answers with the attainment object, otherwise with the newest metric array.
ATTAINMENT_EVALUATOR = """#!/usr/bin/env bash
# File Diet Decision Conformance (transitional: attainment on regrade, metric array otherwise).
#   value      1 when the run filed a label or comment, 0 when it filed nothing in strict mode,
#              null (no evidence) otherwise, and null at evidence times before the run existed.
#   maturesAt  seven days after the run was created; evidenceCutoff = min(evidenceAt, maturesAt).
set -euo pipefail
request=$(cat)
outputs=$(jq '.outputs | length' <<<"$request")
if [ "$outputs" -gt 0 ]; then
  value=1
elif [ "$(jq '.config.strict // false' <<<"$request")" = "true" ]; then
  value=0
else
  value=null
fi
if [ "$(jq '.evidenceAt != null' <<<"$request")" != "true" ]; then
  printf '[{"id":"conformance","value":%s},{"id":"outputs","value":%s}]\\n' "$value" "$outputs"
  exit 0
fi
jq -c --argjson v "$value" --argjson n "$outputs" '
  def epoch: sub("\\\\.[0-9]+Z$"; "Z") | fromdateiso8601;
  (.evidenceAt | epoch) as $at
  | ((.run.createdAt // .evidenceAt) | epoch) as $created
  | ($created + 7 * 86400) as $matures
  | (if $at < $created then null else $v end) as $value
  | {value: $value,
     case: (.case // {workflow: .run.workflow}),
     opportunityKey: "\\(.run.repository)/\\(.run.workflow)#\\(.run.id)",
     evidenceCutoff: ([$at, $matures] | min | todate),
     maturesAt: ($matures | todate),
     provenance: (if $value == null then [] else [{repository: .run.repository, kind: "workflow-run",
                                                   ref: .run.id}] end),
     message: (if $value == null then "no evidence at this time" else "outputs=\\($n)" end)}' <<<"$request"
"""
CASE = {"target": "src/", "maxFileLines": 500}
BASELINE = 0.5


def original_result(digest: str, n_outputs: int, attainment: bool) -> dict[str, object]:
    """The operational-value result gh-aw recorded: what the evaluator returned at grading time."""
    value = 1 if n_outputs > 0 else None
    result: dict[str, object] = {
        "id": "operational-value", "name": "File Diet Decision Conformance",
        "description": "Whether the run requested the correct follow-up", "value": value, "unit": "ratio",
        "passed": True if value is not None else None, "status": "pass" if value is not None else "unavailable",
        "source": "operational-value", "implementation": {"id": "gh-aw/graders", "version": 1, "digest": digest},
    }
    if value is None:
        result["message"] = "grader returned no value"
    if attainment:  # the older design's result: an observation carrying the case, and the baseline
        result["observation"] = {"case": CASE}
        result["baselineValue"] = BASELINE
    else:
        result["metrics"] = [{"id": "conformance", "value": value}, {"id": "outputs", "value": n_outputs}]
        result["diagnostics"] = {"outputs": n_outputs}
    return result


def write_archive(root: Path, run_id: str, attempt: int, n_outputs: int, tampered: bool, attainment: bool) -> None:
    evaluator = ATTAINMENT_EVALUATOR if attainment else EVALUATOR
    digest = hashlib.sha256(evaluator.encode()).hexdigest()
    dump(root / "agent/graders/grader_manifest.json", {"version": 1, "graders": [{
        "id": "operational-value", "name": "File Diet Decision Conformance",
        "description": "Whether the run requested the correct follow-up",
        "source": "operational-value", "enabled": True, "unit": "ratio", "direction": "higher_is_better",
        "threshold": 0.5, "digest": digest, "run": ".github/graders/daily-file-diet-operational-value.sh",
    }]})
    result = original_result(digest, n_outputs, attainment)
    passed = result["status"] == "pass"
    dump(root / "agent/graders/grader_results.json", {
        "version": 1,
        "run": {"id": run_id, "attempt": attempt, "graderCount": 1, "passed": int(passed), "failed": 0, "errors": 0},
        "context": {},
        "results": [result],
    })
    # Tampering happened after archiving: the recorded digests still name the genuine evaluator.
    body = evaluator.replace("value=1", "value=2") if tampered else evaluator
    path = root / "agent/graders/operational_value_evaluator.sh"
    path.write_text(body)


def write_broken() -> None:
    # aw_info.json that is not JSON.
    bad = ROOT / "ci-doctor" / "run-900001"
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "aw_info.json").write_text('{"workflow_name": "ci-doctor", "run_id": 900001, "created_at": ')
    jsonl(bad / "mcp-logs/gateway.jsonl", [{"type": "tool_call", "tool_name": "bash"}])
    # No aw_info.json and no date folder: the date cannot be determined.
    nodate = ROOT / "daily-file-diet" / "run-900002"
    jsonl(nodate / "mcp-logs/gateway.jsonl", [{"type": "tool_call", "tool_name": "view"}])
    # aw_info.json that is not UTF-8.
    latin = ROOT / "issue-triage" / "run-900003"
    latin.mkdir(parents=True, exist_ok=True)
    (latin / "aw_info.json").write_bytes(b'{"workflow_name": "issue-triage \xe9", "run_id": 900003}')
    # A run folder holding no gh-aw artifact at all.
    empty = ROOT / "issue-triage" / "run-900004"
    empty.mkdir(parents=True, exist_ok=True)
    (empty / "notes.txt").write_text("download interrupted\n")


def write_history() -> None:
    """Runs (and some reruns) on the days before DAYS, with run ids below the three days' ones."""
    rng = random.Random(HISTORY_SEED)
    run_id = 7_090_000
    for wf, per_day in HISTORY_WORKFLOWS.items():
        for day in HISTORY_DAYS:
            for _ in range(per_day):
                run_id += rng.randint(3, 40)
                write_run(wf, day, run_id, 1, rng)
                if rng.random() < 0.2:
                    write_run(wf, day, run_id, 2, rng)


def main() -> None:
    if ROOT.exists():
        shutil.rmtree(ROOT)
    rng = random.Random(20261130)
    run_id = 7_100_000
    for wf in WORKFLOWS:
        for day in DAYS:
            for _ in range(3):
                run_id += rng.randint(3, 40)
                write_run(wf, day, run_id, 1, rng)
                if rng.random() < 0.3:  # a rerun of the same run
                    write_run(wf, day, run_id, 2, rng)
    write_broken()
    write_history()
    (ROOT / "README.md").write_text("Sample fleet for `make demo`; regenerate with `python examples/make_fleet.py`.\n")


if __name__ == "__main__":
    main()
