"""``fleetgrade trace``: rule-based trace grading, CLI-compatible with trace-grader (spec §6).

Exit codes: 3 corrupt-success or not-all-delivered task, 0 otherwise; 2 no source flag;
1 self-test failure, unreadable or malformed input, or an unusable config value.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graders.families.trace_rules.config import WARN_PREFIX, ConfigError, from_mapping, load_mapping
from graders.families.trace_rules.report import render, to_json
from graders.families.trace_rules.selftest import self_test
from graders.families.trace_rules.verdicts import grade
from graders.formats import FormatError
from graders.formats.claude_code import runs_from_transcript
from graders.formats.copilot import runs_from_copilot_events
from graders.formats.files import read_input
from graders.formats.hooks import runs_from_audit
from graders.formats.jsonl import read_lines
from graders.formats.model import Run
from graders.formats.parsers import TraceFormatError, runs_from_traces
from graders.runs.console import for_terminal, printable

PROG = "fleetgrade trace"
# Source flags in the reference's precedence order; the Copilot parser and --input are ours.
SOURCES = ("traces", "audit", "transcript", "copilot_events", "input")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "trace",
        help="grade agent trajectories with path rules and pass^k (trace-grader compatible)",
        description="Grade an agent's path, not just its answer: rule flags, verdicts and pass^k.",
    )
    p.add_argument("--traces", help="canonical traces.json")
    p.add_argument("--audit", help="hook audit / code-logger JSONL")
    p.add_argument("--transcript", help="Claude Code session transcript JSONL")
    p.add_argument("--copilot-events", dest="copilot_events", help="GitHub Copilot CLI session events.jsonl")
    p.add_argument("--input", help="a session or trace file of any supported format, or a folder of them "
                   "(gh-aw run folders included); subagent work attributed, hook Pre/Post calls deduplicated")
    p.add_argument("--task", help="task id for audit/transcript/Copilot/--input runs")
    p.add_argument("--config", help="adapter config YAML (engine defaults when absent)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--k", type=_positive_int, help="also report pass^k and pass@k estimates for k = 1..K")
    p.add_argument("--self-test", action="store_true", help="run the bundled self-test")
    p.set_defaults(func=handler)


def _error(message: str) -> None:
    print(printable(f"{PROG}: error: {message}"), file=sys.stderr)


def _warn(message: str) -> None:
    print(printable(f"{WARN_PREFIX} {message}"), file=sys.stderr)


def _read_runs(kind: str, path: str, task: str | None) -> list[Run]:
    if kind == "input":
        return [s.run(task=task) for s in read_input(path, _warn)]
    if kind == "traces":
        return runs_from_traces(json.loads(Path(path).read_text(encoding="utf-8")))
    parse: Callable[..., list[Run]] = {
        "audit": runs_from_audit,
        "transcript": runs_from_transcript,
        "copilot_events": runs_from_copilot_events,
    }[kind]
    return parse(read_lines(path, _warn), task_hint=task, source=path, warn=_warn)


def handler(args: argparse.Namespace) -> int:
    if args.self_test:
        return self_test(sys.stdout)
    kind = next((k for k in SOURCES if getattr(args, k, None)), None)
    if kind is None:
        _error("provide --traces, --audit, --transcript, --copilot-events, --input, or --self-test")
        return 2
    if args.config and not Path(args.config).is_file():
        _warn(f"config file {args.config!r} not found; using engine defaults")
    try:
        cfg = from_mapping(load_mapping(args.config))
    except ConfigError as e:
        _error(f"{args.config}: {e}")
        return 1
    path = getattr(args, kind)
    flag = "--" + kind.replace("_", "-")
    try:
        runs = _read_runs(kind, path, args.task)
    except OSError as e:
        _error(f"cannot read {flag} file {path!r}: {e.strerror or e}")
        return 1
    except UnicodeDecodeError as e:
        _error(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})")
        return 1
    except json.JSONDecodeError as e:
        _error(f"{path}: not valid JSON ({e})")
        return 1
    except FormatError as e:  # its message names the file
        _error(str(e))
        return 1
    except (TraceFormatError, RecursionError) as e:
        _error(f"{path}: {e}")
        return 1
    report = grade(runs, cfg)
    print(for_terminal(to_json(report, args.k), sys.stdout) if args.json else render(report, args.k))
    return report.exit_code()
