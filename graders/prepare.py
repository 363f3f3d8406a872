"""From a run's files to everything graders need, once per run (the "read + preprocess" stage)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from graders.families.opvalue.archived import archived_entry
from graders.formats.evidence import RunEvidence, TokenLines, evidence_warnings, read_evidence
from graders.formats.ghaw.preprocess import PreprocessReport, preprocess, read_evals, read_trajectory_ir_file
from graders.formats.model import Run
from graders.grading.plan import GradingPlan, PlanEntry, with_entry
from graders.runs.layout import ARTIFACT_NAMES
from graders.runs.runfiles import RunFiles
from graders.runs.runmeta import determine_run_meta, read_aw_info
from schemas.documents import RunMeta


class NoArtifactsError(ValueError):
    """A folder that looked like a run holds none of the gh-aw artifact files."""


class UnreadableRunError(OSError):
    """A run folder of which nothing can be read (unreadable, or only links and special files)."""


@dataclass
class PreparedRun:
    meta: RunMeta
    trace: dict[str, Any]
    report: PreprocessReport
    input_digest: str
    evals: dict[str, Any] | None = None
    aw_info: dict[str, Any] | None = field(default=None, repr=False)
    # The run's own archived operational-value grader (graders/families/opvalue/archived.py), if any.
    archived: PlanEntry | None = field(default=None, repr=False)
    # agent/graders/trajectory_ir.json: the trajectory graders' last IR candidate.
    file_ir: Any = field(default=None, repr=False)
    # What the observed graders and the trace rules read beyond the trace (graders/formats/evidence.py).
    evidence: RunEvidence | None = field(default=None, repr=False)
    # Incremental backfill: the run's listing digest and its previous state row, if any.
    listing_digest: str = ""
    previous: dict[str, Any] | None = field(default=None, repr=False)
    # The input format (graders/formats): ``runs.source_kind``; for a session file, its reader's
    # trace-rules run (steps with subagents attributed), used instead of the one from ``trace``.
    source_kind: str = "gh-aw"
    steps_run: Run | None = field(default=None, repr=False)

    def plan(self, base: GradingPlan) -> GradingPlan:
        """The run's plan: ``base`` plus its archived evaluator when ``base`` has none."""
        return with_entry(base, self.archived)


def prepare_run(
    files: RunFiles, run_root: str, identify: Callable[[RunFiles, str], RunMeta] = determine_run_meta
) -> PreparedRun:
    """Identity, preprocessed trace and input digest of one run; raises on an ungradable run.

    ``identify`` finds the run's identity from its files and ``run_root``: a fleet's, by default
    (every field required); graders/single_run.py's for a run graded on its own."""
    if not files.sizes and files.warnings:  # nothing in it can be read: say what is there
        raise UnreadableRunError(f"{files.root}: nothing in the run folder can be read: "
                                 + "; ".join(files.warnings[:5]))
    if not any(rel.split("/", 1)[0] in ARTIFACT_NAMES for rel in files.sizes):
        listed = ", ".join(sorted(files.sizes)[:5]) or "no files"
        raise NoArtifactsError(
            f"{files.root}: no gh-aw run artifacts (aw_info.json, agent_output.json, mcp-logs/, "
            f"sandbox/, …) found; it holds {listed}"
        )
    with files.held():  # the run folder opened once for all its files
        return _prepared(files, run_root, identify)


def _prepared(files: RunFiles, run_root: str, identify: Callable[[RunFiles, str], RunMeta]) -> PreparedRun:
    meta = identify(files, run_root)
    _, aw_info = read_aw_info(files)
    report = PreprocessReport(warnings=list(files.warnings))
    # The observed layer reads the token-usage file's records from the blocks preprocessing reads.
    tokens = TokenLines()
    trace = preprocess(files, report, tokens.feed)
    tokens.finish(report.sources.get("tokenUsage"))
    evals = read_evals(files, report)
    archived = archived_entry(files)
    file_ir = read_trajectory_ir_file(files, report)
    evidence = read_evidence(files, aw_info, tokens, trace)
    report.warnings.extend(evidence_warnings(evidence))
    files.check_time()  # preprocessing after the last read counts too
    return PreparedRun(meta, trace, report, files.input_digest(), evals, aw_info, archived, file_ir, evidence=evidence)
