"""Every engine's real public sample through the executable (issue 41): `fleetgrade run` reads each as a
session file and, for an engine's stdout, inside a gh-aw run folder (``agent-stdio.log`` mixed with
container lines, ``aw_info.json`` naming the engine), and ``tool-call-count`` / ``tool-error-count``
equal a count of the sample made by an independent rule (a jq program, written before the reader,
stated in each sample's PROVENANCE.md; the counts are repeated here so the test holds without jq).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.tables import connect
from tests.conftest import REPO

FLEETGRADE = str(Path(sys.executable).parent / "fleetgrade")
REAL = REPO / "tests" / "data" / "real"
DAY = "2026-10-09"

# A call id of an item, and how its last record ended, as jq reads them (PROVENANCE.md of each format).
_CODEX_ITEM = ('[.[] | select(.type|tostring|startswith("item.")) | .item | select(.type as $t | '
               '["agent_message","reasoning","todo_list","error"] | index($t) | not)]')
JQ = {
    "claude-stream-json": (
        '[.[] | .message.content[]? | select(.type=="tool_use") | .id] + [.[] | .message.content[]? | '
        'select(.type=="tool_result") | .tool_use_id] | unique | length',
        '[.[] | .message.content[]? | select(.type=="tool_result" and .is_error==true) | .tool_use_id] | unique | length'),
    "codex-exec": (
        f'{_CODEX_ITEM} | map("\\(.sender_thread_id // "")/\\(.id)") | unique | length',
        f'{_CODEX_ITEM} | group_by("\\(.sender_thread_id // "")/\\(.id)") | map(last | select((.status // "" | '
        'ascii_downcase) as $s | (["failed","declined","error","cancelled"] | index($s)) or ((.exit_code // 0) != 0))) '
        '| length'),
    "codex-rollout": (
        '([.[] | select(.type=="response_item") | .payload | select(.type=="function_call" or .type=="custom_tool_call" '
        'or .type=="local_shell_call" or .type=="function_call_output" or .type=="custom_tool_call_output") | .call_id] '
        '| unique | length) + ([.[] | select(.type=="response_item") | .payload | select(.type=="web_search_call")] '
        '| length)',
        '[.[] | select(.type=="response_item") | .payload | select(.type=="function_call_output" or '
        '.type=="custom_tool_call_output") | .output | select(type=="string") | select(test("Process exited with code '
        '[1-9]|^Exit code: [1-9]|^[a-z_]+ failed|^failed to") or ((fromjson? | .metadata.exit_code? // 0) != 0))] | length'),
    "gemini-chat": (
        '[.[0].messages[].toolCalls[]?.id] | unique | length',
        '[.[0].messages[].toolCalls[]? | select(.status=="error" or .status=="cancelled") | .id] | unique | length'),
    "opencode": (
        '[.[] | .part.callID // empty] | unique | length',
        '[.[] | select(.type=="tool_use") | .part | select(.state.status=="error" or ((.state.metadata.exit // 0) != 0))'
        ' | .callID] | unique | length'),
    "goose": (
        '[.[] | .message.content[]? | select(.type=="toolRequest" or .type=="toolResponse") | .id] | unique | length',
        '[.[] | .message.content[]? | select(.type=="toolResponse") | select(.toolResult.status=="error" or '
        '.toolResult.value.isError==true or ((.toolResult.value.structuredContent.exit_code // 0) != 0)) | .id] '
        '| unique | length'),
    "agy": (
        '[.[] | select(.event=="step_update") | .step_update | select(.step_type=="tool") | .step_index] | unique | length',
        '[.[] | select(.event=="step_update") | .step_update | select(.step_type=="tool")] | group_by(.step_index) | '
        'map(last | select(.state as $s | ["ERROR","FAILED","CANCELLED"] | index($s))) | length'),
    "aw-session": (
        '[.[] | select(.provenance.phase != "detection") | select(.type=="tool.execution_start" or '
        '.type=="tool.execution_complete") | .data.toolCallId] | unique | length',
        '[.[] | select(.provenance.phase != "detection") | select(.type=="tool.execution_complete") | '
        'select(.data.success==false or .data.isError==true or ((.data.exitCode // 0) != 0)) | .data.toolCallId] '
        '| unique | length'),
}

# (sample, its format, the gh-aw engine whose stdout it is (None: not an engine's stdout), calls, errors)
SAMPLES = [
    ("claude_stream/claude-clean-simple/claude-stream-json-simple.jsonl", "claude-stream-json", "claude", 21, 1),
    ("codex_exec/ghaw-codex-collab/codex_collab.jsonl", "codex-exec", "codex", 7, 0),
    ("codex_exec/ghaw-codex-ci-failure/agent-stdio.log", "codex-exec", "codex", 0, 0),
    ("codex_rollout/codemie-shell-json/rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl",
     "codex-rollout", None, 3, 0),
    ("codex_rollout/codemie-exec-command/rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl",
     "codex-rollout", None, 7, 0),
    ("codex_rollout/codemie-apply-patch-web-search/rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl",
     "codex-rollout", None, 15, 1),
    ("gemini_chat/codemie-file-ops/session-2026-01-16T11-01-file-ops-37b7abef.json", "gemini-chat", None, 14, 0),
    ("opencode/ghaw-opencode-ci/opencode.jsonl", "opencode", "opencode", 2, 2),
    ("goose/ghaw-goose-ci/success.jsonl", "goose", "goose", 2, 0),
    ("goose/ghaw-goose-ci/failed-tool.jsonl", "goose", "goose", 1, 1),
    ("agy/ghaw-agy-ci/agy.jsonl", "agy", "agy", 2, 0),
    ("aw_session/ghaw-pi-claude-two-subagents/aw_session.jsonl", "aw-session", "pi", 5, 0),
]
# The run's tokens by an independent rule (jq over the sample's records, as JQ above): [fresh input,
# output, cache read, cache write], null when the log states no usage. Claude's stream: the result's
# modelUsage (every model's bill; a response's streamed records stop short of its output); Agy: the
# result's usage (the steps may leave calls out); GPT models count cached tokens inside their input.
_ROLLOUT_LAST = ('[.[] | select(.type=="event_msg" and .payload.type=="token_count" and .payload.info.total_token_usage) '
                 '| .payload.info] | reduce .[] as $x ({prev: null, l: []}; ($x.total_token_usage | [.input_tokens, '
                 '.cached_input_tokens, .output_tokens]) as $k | if $k == .prev then . else {prev: $k, l: (.l + '
                 '[$x.last_token_usage])} end) | .l')
JQ_TOKENS = {
    "claude-stream-json": ('[.[] | select(.type=="result") | .modelUsage // empty | to_entries[] | .value] | if length == 0 '
                           'then null else [map(.inputTokens), map(.outputTokens), map(.cacheReadInputTokens), '
                           'map(.cacheCreationInputTokens)] | map(add) end'),
    "codex-exec": ('[.[] | select(.type=="turn.completed") | .usage] | if length == 0 then null else [map(.input_tokens '
                   '- (.cached_input_tokens // 0)), map(.output_tokens), map(.cached_input_tokens // 0), '
                   'map(.cache_write_input_tokens // 0)] | map(add) end'),
    "codex-rollout": (f'{_ROLLOUT_LAST} | if length == 0 then null else [map(.input_tokens - .cached_input_tokens), '
                      'map(.output_tokens), map(.cached_input_tokens), map(0)] | map(add) end'),
    "gemini-chat": ('[.[0].messages[] | select(.type=="gemini" and .tokens) | .tokens] | if length == 0 then null else '
                    '[map(.input - .cached), map(.output), map(.cached), map(0)] | map(add) end'),
    "opencode": ('[.[] | .part | select(.type=="step-finish")] | unique_by(.id) | map(.tokens) | if length == 0 then '
                 'null else [map(.input), map(.output), map(.cache.read), map(.cache.write)] | map(add) end'),
    "goose": ('[.[] | select(.type=="complete")] | if length == 0 then null else last | [.input_tokens - '
              '.cache_read_input_tokens - .cache_write_input_tokens, .output_tokens, .cache_read_input_tokens, '
              '.cache_write_input_tokens] end'),
    "agy": ('[.[] | select(.event=="result") | .result.usage] | if length == 0 then null else last | '
            '[.input_tokens, .output_tokens, .cache_read_tokens, 0] end'),
    "aw-session": ('[.[] | select(.type=="firewall.token_usage" and .provenance.phase != "detection") | .data | .model '
                   'as $m | .usage | [if ($m | startswith("gpt")) then .inputTokens - .cacheReadInputTokens else '
                   '.inputTokens end, .outputTokens, .cacheReadInputTokens, .cacheCreationInputTokens]] | if length '
                   '== 0 then null else transpose | map(add) end'),
}
# Reasoning tokens where the log states them (null: it states none; 0 when it says 0).
_SUM = "if length == 0 then null else add end"
JQ_REASONING = {
    "claude-stream-json": "null",
    "codex-exec": f'[.[] | select(.type=="turn.completed") | .usage.reasoning_output_tokens // empty] | {_SUM}',
    "codex-rollout": f"{_ROLLOUT_LAST} | map(.reasoning_output_tokens // empty) | {_SUM}",
    "gemini-chat": f'[.[0].messages[] | select(.type=="gemini") | .tokens.thoughts // empty] | {_SUM}',
    "opencode": f'[.[] | .part | select(.type=="step-finish")] | unique_by(.id) | map(.tokens.reasoning // empty) | {_SUM}',
    "goose": "null",
    "agy": '[.[] | select(.event=="result") | .result.usage.thinking_tokens // empty] | last',
    "aw-session": ('[.[] | select(.type=="firewall.token_usage" and .provenance.phase != "detection") | '
                   f'.data.usage.reasoningOutputTokens // empty] | {_SUM}'),
}
# sample -> (the tokens JQ_TOKENS gives, JQ_REASONING's, the model calls the log shows); None: the log
# states no usage.
TOKENS: dict[str, tuple[tuple[int, int, int, int], int | None, int] | None] = {
    SAMPLES[0][0]: ((7584, 3704, 85759, 43679), None, 8),  # distinct message ids: 5 Sonnet, 3 Haiku
    SAMPLES[1][0]: ((10, 2, 0, 0), None, 1),
    SAMPLES[2][0]: None,
    SAMPLES[3][0]: ((7626, 300, 14848, 0), 128, 3),
    SAMPLES[4][0]: None,
    SAMPLES[5][0]: ((34032, 2004, 1557376, 0), 790, 13),
    SAMPLES[6][0]: ((25301, 1441, 62117, 0), 2914, 9),
    SAMPLES[7][0]: ((23222, 53, 22912, 0), 0, 2),
    SAMPLES[8][0]: ((6, 2, 4, 0), None, 1),
    SAMPLES[9][0]: ((6, 2, 4, 0), None, 1),
    SAMPLES[10][0]: ((79491, 4742, 298918, 0), 3221, 2),  # calls: the two finished steps that state usage
    SAMPLES[11][0]: ((11860, 1149, 36503, 17120), None, 9),
}
CHATTER = [b"[entrypoint] starting the agent container", b"", b"   Downloading tools...",
           b"::group::agent output", b"warning: something unrelated {not json}"]


def _name(sample: str) -> str:
    """A sample as a file of its own: stdout kept as ``agent-stdio.log`` is a ``.log`` of another name
    (``agent-stdio.log`` would make its folder a gh-aw run)."""
    path = Path(sample)
    return f"{path.parent.name}.log" if path.name == "agent-stdio.log" else f"{path.parent.name}-{path.name}"


def _stdio(data: bytes, index: int) -> bytes:
    """The engine's records mixed with container lines, as AWF writes ``agent-stdio.log``."""
    out: list[bytes] = []
    for i, line in enumerate(data.splitlines()):
        out.append(CHATTER[(i + index) % len(CHATTER)])
        out.append(line)
    out.append(b"Process exiting with code: 0")
    return b"\n".join(out) + b"\n"


def _run_folder(fleet: Path, index: int, sample: str, engine: str) -> Path:
    run = fleet / "gh" / engine / f"run-{9100 + index}"
    run.mkdir(parents=True)
    info = {"workflow_name": f"smoke-{engine}", "run_id": 9100 + index, "run_attempt": "1", "engine_id": engine,
            "created_at": f"{DAY}T08:00:00Z", "repository": "octo-org/widgets"}
    (run / "aw_info.json").write_text(json.dumps(info))
    data = (REAL / sample).read_bytes()
    if sample.endswith("aw_session.jsonl"):
        (run / "usage").mkdir()
        (run / "usage" / "aw_session.jsonl").write_bytes(data)
    else:
        (run / "agent-stdio.log").write_bytes(_stdio(data, index))
    return run


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("engines")
    fleet = root / "fleet"
    where: dict[str, str] = {}  # sample -> its session file, and sample+"@run" -> its run folder
    for i, (sample, kind, engine, _, _) in enumerate(SAMPLES):
        # Under a date folder: a stream with no timestamps takes its date from it.
        target = fleet / DAY / kind / _name(sample)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REAL / sample, target)
        where[sample] = str(target)
        if engine is not None:
            where[sample + "@run"] = str(_run_folder(fleet, i, sample, engine))
    env = {**os.environ, "FLEETGRADE_SHARED": os.environ.get("FLEETGRADE_SHARED", "/work/shared")}
    done = subprocess.run([FLEETGRADE, "run", "--input", str(fleet), "--output", str(root / "out")],
                          capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    return root / "out", where, done


def _grades(out: Path) -> dict[tuple[str, str], float | None]:
    con = connect(str(out))
    rows = con.execute("SELECT r.root, g.grader_id, g.value FROM grader_results g JOIN runs r USING (run_id, attempt) "
                       "WHERE g.grader_id IN ('tool-call-count', 'tool-error-count')").fetchall()
    return {(root, gid): value for root, gid, value in rows}


def test_every_sample_is_graded_and_nothing_is_dead_lettered(graded) -> None:
    out, where, done = graded
    assert done.returncode == 0, done.stderr[-3000:]
    assert ", 0 dead-lettered" in done.stderr, done.stderr[-2000:]  # (no dead_letter table: no row)
    con = connect(str(out))
    kinds = dict(con.execute("SELECT root, source_kind FROM runs").fetchall())
    for sample, kind, engine, _, _ in SAMPLES:
        assert kinds[where[sample]] == kind, sample
        if engine is not None:
            assert kinds[where[sample + "@run"]] == "gh-aw"


@pytest.mark.parametrize(("sample", "kind", "engine", "calls", "errors"), SAMPLES, ids=[s[0].split("/")[1] for s in SAMPLES])
def test_counts_equal_the_independent_count(graded, sample: str, kind: str, engine: str | None, calls: int,
                                            errors: int) -> None:
    out, where, _ = graded
    grades = _grades(out)
    roots = [where[sample]] + ([where[sample + "@run"]] if engine is not None else [])
    for root in roots:
        assert grades[(root, "tool-call-count")] == calls, root
        assert grades[(root, "tool-error-count")] == errors, root
    # For a session input, the runs row counts the same calls.
    con = connect(str(out))
    assert con.execute("SELECT tool_calls FROM runs WHERE root = ?", [where[sample]]).fetchone() == (calls,)


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is installed by tools/system_deps.py")
@pytest.mark.parametrize(("sample", "kind", "calls", "errors"), [(s, k, c, e) for s, k, _, c, e in SAMPLES],
                         ids=[s[0].split("/")[1] for s in SAMPLES])
def test_the_stated_counts_are_the_jq_rules(sample: str, kind: str, calls: int, errors: int) -> None:
    data = (REAL / sample).read_bytes()
    if not sample.endswith(".json"):  # JSON lines, the engine's stdout among other lines: its records only
        data = subprocess.run(["jq", "-R", "fromjson? // empty"], input=data, capture_output=True, check=True).stdout

    def jq(program: str) -> int:
        return int(subprocess.run(["jq", "-s", program], input=data, capture_output=True, check=True).stdout)

    assert (jq(JQ[kind][0]), jq(JQ[kind][1])) == (calls, errors)


@pytest.mark.parametrize("sample", [s[0] for s in SAMPLES], ids=[s[0].split("/")[1] for s in SAMPLES])
def test_token_totals_equal_the_independent_count(graded, sample: str) -> None:
    """The runs row's cost columns (the cost graders' values) for the sample as a session file and
    as a gh-aw run's engine stdout: the jq rule's tokens; none at all (null, never 0) for a log
    without usage. Model calls need per-call records: an engine's stdout in a run gives totals only."""
    out, where, _ = graded
    con = connect(str(out))
    engine = dict((s[0], s[2]) for s in SAMPLES)[sample]
    expected = TOKENS[sample]
    for root in [where[sample]] + ([where[sample + "@run"]] if engine is not None else []):
        row = con.execute("SELECT tokens_input, tokens_output, tokens_cache_read, tokens_cache_write, model_calls, "
                          "ai_credits, models, tokens_reasoning FROM runs WHERE root = ?", [root]).fetchone()
        session = root == where[sample] or sample.endswith("aw_session.jsonl")
        if expected is None:
            assert row == (None,) * 8, root
            continue
        tokens, reasoning, calls = expected
        assert row[:4] == tokens and row[7] == reasoning, root
        assert row[4] == (calls if session else None), root
        if sample.endswith("aw_session.jsonl"):  # the firewall's running total of the agent phase
            assert row[5] == pytest.approx(2.812022)
        else:
            assert row[5] is None, root  # no log here states AI Credits: never priced, never 0
    if sample == SAMPLES[0][0]:
        mix = con.execute("SELECT models FROM runs WHERE root = ?", [where[sample]]).fetchone()[0]
        assert sorted((m["model"], m["calls"]) for m in mix) == [("claude-haiku-4-5-20251001", 3),
                                                                ("claude-sonnet-4-5-20250929", 5)]


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is installed by tools/system_deps.py")
@pytest.mark.parametrize("sample", [s[0] for s in SAMPLES], ids=[s[0].split("/")[1] for s in SAMPLES])
def test_the_stated_tokens_are_the_jq_rules(sample: str) -> None:
    kind = dict((s[0], s[1]) for s in SAMPLES)[sample]
    data = (REAL / sample).read_bytes()
    if not sample.endswith(".json"):
        data = subprocess.run(["jq", "-R", "fromjson? // empty"], input=data, capture_output=True, check=True).stdout
    def jq(program: str) -> Any:
        return json.loads(subprocess.run(["jq", "-s", "-c", program], input=data, capture_output=True, check=True).stdout)

    expected = TOKENS[sample]
    assert jq(JQ_TOKENS[kind]) == (None if expected is None else list(expected[0]))
    assert jq(JQ_REASONING[kind]) == (None if expected is None else expected[1])


def test_the_engines_native_calls_reach_the_trace_rules(graded) -> None:
    out, where, _ = graded
    con = connect(str(out))
    steps = dict(con.execute("SELECT r.root, v.step_count FROM trace_verdicts v JOIN runs r USING (run_id, attempt)")
                 .fetchall())
    # A Claude-engine run's trace holds no native call (gh-aw reads only Copilot's events): its
    # steps are the engine's stdout calls.
    assert steps[where[SAMPLES[0][0] + "@run"]] == 21
    assert steps[where["opencode/ghaw-opencode-ci/opencode.jsonl@run"]] == 2
    # gh-aw's own tool-call graders read the trace only: unchanged, they see none of them.
    gh = con.execute("SELECT g.value FROM grader_results g JOIN runs r USING (run_id, attempt) "
                     "WHERE r.root = ? AND g.grader_id = 'tool-success-rate'", [where[SAMPLES[0][0] + "@run"]]).fetchall()
    assert gh in ([(1.0,)], [(None,)])


def test_token_totals_say_whether_input_includes_cache() -> None:
    from graders.formats import Source, read_file

    def totals(sample: str) -> dict[str, object]:
        session = read_file(Source(sample, (REAL / sample).read_bytes()))[0]
        assert session.tokens is not None
        return session.tokens.to_dict()

    claude = totals(SAMPLES[0][0])
    # The result's modelUsage, every model's (its ``usage`` is the main thread's: 16 and 58,826).
    assert (claude["input"], claude["cache_read"], claude["input_includes_cache"]) == (7584, 85759, False)
    codex = totals(SAMPLES[5][0])
    assert codex["input_includes_cache"] is True and codex["input"] >= codex["cache_read"]
