"""``fleetgrade grade`` and ``fleetgrade preprocess``: one run, gh-aw's files (graders.md §3–§5)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graders.engine import grade_trace, results_document
from graders.executors import SANDBOXED_SOURCES, close_executor, make_executor
from graders.jscompat import js_stringify
from graders.jsonio import JsonError, parse_json
from graders.prepare import grade_prepared, prepare_run
from graders.runfiles import local_run_files
from pipeline.plans import PlanLoadError, load_plans


class CliError(Exception):
    """A problem with the command's input; printed as ``fleetgrade <cmd>: <message>``, exit 1."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    g = sub.add_parser(
        "grade",
        help="grade one run folder (or a preprocessed trace) and write gh-aw's grader files",
        description="Writes grader_manifest.json, grader_payload.json and grader_results.json "
        "(graders.md §3–§4) into --out, or prints grader_results.json with --json.",
    )
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("run_dir", nargs="?", help="a run's artifact folder")
    src.add_argument("--trace", metavar="TRACE.json", help="an already preprocessed trace (grader_payload.json)")
    g.add_argument("--graders", metavar="FILE", help="graders map (YAML/JSON) or a gh-aw workflow .md")
    g.add_argument("--out", metavar="DIR", help="where to write the files (default: <run>/agent/graders)")
    g.add_argument("--json", action="store_true", help="print grader_results.json to stdout instead")
    g.add_argument("--allow-unsandboxed", action="store_true",
                   help="DANGEROUS: run evaluators without bubblewrap when no sandbox can be created")
    g.set_defaults(func=handle_grade)

    p = sub.add_parser("preprocess", help="print a run's preprocessed trace (grader_payload.json) as JSON")
    p.add_argument("run_dir", help="a run's artifact folder")
    p.set_defaults(func=handle_preprocess)


def _pretty(doc: Any) -> str:
    """``JSON.stringify(doc, null, 2)``, as gh-aw writes its grader files."""
    return js_stringify(doc, indent=2) or "null"


def _load_trace(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise CliError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        trace = parse_json(data)
    except JsonError as exc:
        raise CliError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(trace, dict):
        raise CliError(f"{path}: expected a JSON object (a preprocessed trace)")
    return trace


def _run_dir(path: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise CliError(f"{path}: not a directory")
    return p


def handle_grade(args: argparse.Namespace) -> int:
    try:
        plan = load_plans(args.graders, None).default
        evals = None
        run_id, attempt = "", 1
        prep = None
        if args.trace:
            trace = _load_trace(args.trace)
            out_dir = Path(args.out) if args.out else None
        else:
            root = _run_dir(args.run_dir)
            prep = prepare_run(local_run_files(root), root.name)
            trace, evals = prep.trace, prep.evals
            run_id, attempt = prep.meta.run_id, prep.meta.attempt
            out_dir = Path(args.out) if args.out else root / "agent" / "graders"
        executors = {}
        for source in SANDBOXED_SOURCES:
            ex = make_executor(source, args.allow_unsandboxed)
            if ex is not None:
                executors[source] = ex
        try:
            if prep is not None:
                plan = prep.plan(plan)
                results = grade_prepared(prep, plan, executors).results
            else:
                results = grade_trace(trace, plan, executors)
        finally:
            for ex in executors.values():
                close_executor(ex)
        doc = results_document(results, run_id=run_id, attempt=attempt, evals=evals)
    except (CliError, PlanLoadError, ValueError) as exc:
        print(f"fleetgrade grade: {exc}", file=sys.stderr)
        return 1
    if args.json:
        sys.stdout.write(_pretty(doc) + "\n")
        return 0
    if out_dir is None:
        print("fleetgrade grade: --out DIR or --json is required with --trace", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "grader_manifest.json").write_text(_pretty(plan.manifest()))
    (out_dir / "grader_payload.json").write_text(js_stringify(trace) or "null")
    (out_dir / "grader_results.json").write_text(_pretty(doc))
    print(f"wrote {out_dir}/grader_manifest.json, grader_payload.json, grader_results.json")
    return 0


def handle_preprocess(args: argparse.Namespace) -> int:
    try:
        root = _run_dir(args.run_dir)
        prep = prepare_run(local_run_files(root), root.name)
    except (CliError, ValueError) as exc:
        print(f"fleetgrade preprocess: {exc}", file=sys.stderr)
        return 1
    for warning in prep.report.warnings:
        print(f"fleetgrade preprocess: warning: {warning}", file=sys.stderr)
    sys.stdout.write((js_stringify(prep.trace) or "null") + "\n")
    return 0
