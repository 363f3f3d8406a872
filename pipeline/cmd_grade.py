"""``fleetgrade grade`` and ``fleetgrade preprocess``: one run, gh-aw's files (docs/reference/graders.md §3–§5)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from graders.grading.engine import grade_trace, results_document
from graders.grading.registry import sandboxed_families
from graders.jsrt.jscompat import js_stringify
from graders.jsrt.jsonio import JsonError, parse_json
from graders.one_run import RunGrader, close_executors, open_executors
from graders.prepare import PreparedRun, prepare_run
from graders.runs.console import for_terminal, printable
from graders.runs.runfiles import local_run_files
from graders.single_run import runs_inside, single_run_meta
from pipeline.errors import InputError, UsageError
from pipeline.plans import PlanLoadError, load_plans


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    g = sub.add_parser(
        "grade",
        help="grade one run folder (or a preprocessed trace) and write gh-aw's grader files",
        description="Prints grader_results.json (docs/reference/graders.md §4) to stdout, or writes "
        "grader_manifest.json, grader_payload.json and grader_results.json (docs/reference/graders.md §3–§4) "
        "into --out. Nothing is written into the run folder.",
    )
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("run_dir", nargs="?", help="a run's artifact folder (aw_info.json optional)")
    src.add_argument("--trace", metavar="TRACE.json", help="an already preprocessed trace (grader_payload.json)")
    g.add_argument("--graders", metavar="FILE", help="graders map (YAML/JSON) or a gh-aw workflow .md")
    g.add_argument("--out", metavar="DIR",
                   help="write gh-aw's three files here (not inside the run folder); default: print "
                   "grader_results.json to stdout")
    g.add_argument("--json", action="store_true", help="print grader_results.json to stdout (the default "
                   "without --out)")
    g.add_argument("--allow-unsandboxed", action="store_true",
                   help="DANGEROUS: run evaluators without bubblewrap when no sandbox can be created")
    g.set_defaults(func=handle_grade)

    p = sub.add_parser("preprocess", help="print a run's preprocessed trace (grader_payload.json) as JSON")
    p.add_argument("run_dir", help="a run's artifact folder (aw_info.json optional)")
    p.set_defaults(func=handle_preprocess)


def _pretty(doc: Any) -> str:
    """``JSON.stringify(doc, null, 2)``, as gh-aw writes its grader files."""
    return js_stringify(doc, indent=2) or "null"


def _load_trace(path: str) -> dict[str, Any]:
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from exc
    try:
        trace = parse_json(data)
    except JsonError as exc:
        raise InputError(f"not valid JSON: {exc}", path) from exc
    if not isinstance(trace, dict):
        raise InputError("expected a JSON object (a preprocessed trace)", path)
    return trace


def _run_dir(path: str) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise InputError("not a directory", path)
    return p


def _prepare(root: Path) -> PreparedRun:
    """One run folder, identity optional; a folder of runs is refused (it is not one run)."""
    files = local_run_files(root)
    runs = runs_inside(files)
    if runs:
        shown = ", ".join(runs[:3]) + (", …" if len(runs) > 3 else "")
        if all("/" not in r for r in runs):
            what = f"this is a workflow folder ({len(runs)} run folder(s): {shown}); pass one of its run folders"
        else:
            what = (f"this folder holds {len(runs)} runs ({shown}); pass one run folder, or grade them all "
                    "with `fleetgrade run --input`")
        raise UsageError(what, str(root))
    return prepare_run(files, os.path.abspath(root), single_run_meta)


def _out_dir(out: str, run: Path | None) -> Path:
    """``--out``, refused inside the input run folder: grading never changes its input's listing."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UsageError("--out must be a folder, and this is a file", out)
    if run is not None:
        target, source = os.path.realpath(p), os.path.realpath(run)
        if os.path.commonpath([target, source]) == source:
            raise UsageError("--out is inside the input run folder; write the files elsewhere", out)
    return p


def handle_grade(args: argparse.Namespace) -> int:
    try:
        plans = load_plans(args.graders, None)
        plan = plans.default
        evals = None
        run_id, attempt = "", 1
        prep = None
        if args.trace:
            trace = _load_trace(args.trace)
            out_dir = _out_dir(args.out, None) if args.out else None
        else:
            root = _run_dir(args.run_dir)
            out_dir = _out_dir(args.out, root) if args.out else None
            prep = _prepare(root)
            trace, evals = prep.trace, prep.evals
            run_id, attempt = prep.meta.run_id, prep.meta.attempt
        executors = open_executors(sandboxed_families(), args.allow_unsandboxed)
        try:
            if prep is not None:
                grader = RunGrader(plans, executors=executors)
                plan = grader.plan_of(prep)
                results = grader.grade(prep, strict=True).results
            else:
                results = grade_trace(trace, plan, executors)
        finally:
            close_executors(executors)
        doc = results_document(results, run_id=run_id, attempt=attempt, evals=evals)
    except (PlanLoadError, ValueError) as exc:
        raise InputError(str(exc)) from exc
    if args.json or out_dir is None:  # stdout by default: the run folder is input, never written to
        sys.stdout.write(for_terminal(_pretty(doc), sys.stdout) + "\n")
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "grader_manifest.json").write_text(_pretty(plan.manifest()))
    (out_dir / "grader_payload.json").write_text(js_stringify(trace) or "null")
    (out_dir / "grader_results.json").write_text(_pretty(doc))
    print(f"wrote {out_dir}/grader_manifest.json, grader_payload.json, grader_results.json")
    return 0


def handle_preprocess(args: argparse.Namespace) -> int:
    try:
        prep = _prepare(_run_dir(args.run_dir))
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    for warning in prep.report.warnings:
        print(printable(f"fleetgrade preprocess: warning: {warning}"), file=sys.stderr)
    sys.stdout.write(for_terminal(js_stringify(prep.trace) or "null", sys.stdout) + "\n")
    return 0
